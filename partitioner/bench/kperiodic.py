#!/usr/bin/python3
"""k-periodic schedules: what the 1-periodic assumption costs. Prints a table,
asserts nothing.

  kperiodic.py [--pipe-plan PATH] [--profiles DIR] [--stages 4,8] [--chains 20]

For every profile at 16 GB and 12 GB (GNMT-16: 8 GB and 6 GB), m = 32, default
links, and for random 24-layer chains (gen_chain.py, S = 4, memory from 30 to 100 %
of what the textbook 1F1B needs), `pipe-plan --algo uniform,params,balanced,pipedream,madpipe
--k-periodic 4` plans a contiguous 1F1B plan and searches its orders: every order of every stage whose
steady state repeats k micro-batches (k B's and k F's per pattern, k <= 4) within
the memory limit, exhaustively up to 200,000 combinations, else by descent from the
best 1-periodic orders. The table gives the best 1-periodic period and the best
k-periodic one, both simulated the same way (marginal time of a micro-batch).
"""
import json
import os
import re
import subprocess
import tempfile

from recompute import bench_parser, shared_profiles

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CONTIGUOUS = "uniform,params,balanced,pipedream,madpipe"
ROW = re.compile(r"^k = (\d): ([\d.]+) ms.*; (\d+) evaluated in ([\d.]+) s")


def search(pipe_plan, args):
    out = subprocess.run([pipe_plan] + args + ["--quiet", "--algo", CONTIGUOUS, "--k-periodic", "4"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    rows = {}
    for line in out.splitlines():
        match = ROW.match(line)
        if match:
            rows[int(match.group(1))] = (float(match.group(2)), int(match.group(3)),
                                         float(match.group(4)))
    return rows, out


def print_row(label, rows):
    if 1 not in rows:
        print(f"{label:<36}{'no plan fits':>20}")
        return None
    one = rows[1][0]
    k, best = min(((k, r[0]) for k, r in rows.items()), key=lambda item: (item[1], item[0]))
    seconds = sum(r[2] for r in rows.values())
    evaluated = sum(r[1] for r in rows.values())
    print(f"{label:<36}{one:>10.2f}{best:>10.2f}{k:>4}{100 * (1 - best / one):>8.1f}"
          f"{evaluated:>11}{seconds:>8.2f}")
    return 1 - best / one


def main():
    parser = bench_parser(__doc__)
    parser.add_argument("--stages", default="4,8")
    parser.add_argument("--chains", type=int, default=20)
    args = parser.parse_args()
    print(f"{'instance':<36}{'k = 1':>10}{'best k':>10}{'k':>4}{'gain %':>8}"
          f"{'evaluated':>11}{'time s':>8}")
    gains = []
    for label, path, memory in shared_profiles(args.profiles):
        tighter = f"{int(memory[:-2]) * 3 // 4}GB"
        for limit in (memory, tighter):
            for s in (int(x) for x in args.stages.split(",")):
                rows, _ = search(args.pipe_plan, [path, "--stages", str(s), "--microbatches",
                                                  "32", "--memory", limit])
                gain = print_row(f"{label} S={s} {limit}", rows)
                if gain is not None:
                    gains.append(gain)
    with tempfile.TemporaryDirectory() as work:
        for seed in range(1, args.chains + 1):
            problem = os.path.join(work, f"chain{seed}.json")
            with open(problem, "w") as f:
                subprocess.run([os.path.join(HERE, "gen_chain.py"), "24", "--seed", str(seed),
                                "--gpus", "4"], stdout=f, check=True)
            # The textbook 1F1B's peak on the chosen split, then a fraction of it.
            plan_json = os.path.join(work, "plan.json")
            subprocess.run([args.pipe_plan, problem, "--memory", "inf", "--quiet",
                            "--no-block-moves", "--algo", "balanced", "--json", plan_json],
                           stdout=subprocess.DEVNULL, check=True)
            peak = max(m["memory_bytes"] for m in json.load(open(plan_json))["stage_metrics"])
            fraction = 0.3 + 0.7 * ((seed * 37) % 100) / 100
            rows, _ = search(args.pipe_plan, [problem, "--memory", f"{fraction * peak:.0f}",
                                              "--microbatches", "32"])
            gain = print_row(f"chain{seed} S=4 {fraction:.2f} of peak", rows)
            if gain is not None:
                gains.append(gain)
    better = [g for g in gains if g > 1e-6]
    print(f"\nk-periodic better than every 1-periodic order on {len(better)} of {len(gains)} "
          f"instances" + (f", by {100 * min(better):.1f}-{100 * max(better):.1f} %"
                          if better else ""))


if __name__ == "__main__":
    main()
