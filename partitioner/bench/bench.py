#!/usr/bin/python3
"""Partitioner benchmark: prints tables, asserts nothing.

  bench.py [--pipe-plan PATH] [--profiles DIR] [--stages 2,4,8,16] [--quick] [--ilp SECONDS]

Table 1: every algorithm's period as a ratio to the lower bound, over every profile x
S x memory in {unbounded, tight, very tight}, under the reference model of the profiles
(m = 32, 1F1B with flush, 4 x parameter bytes, free links). "tight" is 75 % and "very
tight" 50 % of the peak memory of the memory-blind `balanced` plan at that S. "-" marks
an algorithm whose plan does not fit (or does not exist). "recompute" is the best of the
same algorithms under `--recompute auto`, as a ratio to that run's own bound (the
memory bound does not hold with recomputation, so its bound can be lower). Then `best`
(general allocations, block moves and k-periodic orders included) as a ratio to the
bound and its wall time in seconds; "links": `best` with the default links (25 GB/s,
no --reference-model) as a ratio to that run's bound; "replicas": the S GPUs split into
replicas x stages (`--gpus S --stages auto`), the iteration of one pipeline planned for
the iteration over the best split's (1.00: one pipeline is best; "inf": only a split
with replicas fits; "-": none fits).
Table 2: planner time of each algorithm on generated 1,000-layer chains and
10,000-node DAGs at 64 GPUs (generated into a temporary directory).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ALGORITHMS = ["uniform", "params", "balanced", "pipedream", "madpipe", "interleaved"]
ILP_SECONDS = 10


def run_plan(pipe_plan, args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        start = time.time()
        subprocess.run([pipe_plan] + args + ["--quiet", "--timings", "--json", out], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        wall = time.time() - start
        with open(out) as f:
            return json.load(f), wall
    finally:
        os.unlink(out)


def profile_table(pipe_plan, profiles, stages_list):
    files = []
    for root, _, names in os.walk(profiles):
        for name in sorted(names):
            if name.endswith(".txt") and not name.startswith("LICENSE"):
                files.append(os.path.join(root, name))
    files.sort()
    header = (f"{'profile':<28}{'S':>3} {'memory':<11}{'LB ms':>9}" + "".join(f"{a:>12}" for a in ALGORITHMS)
              + f"{'min':>12}{'recompute':>12}{'best':>8}{'best s':>8}{'links':>8}{'replicas':>9}")
    print(header)
    print("-" * len(header))
    for path in files:
        name = os.path.relpath(path, profiles)[:-4]
        for stages in stages_list:
            common = [path, "--stages", str(stages), "--microbatches", "32", "--reference-model"]
            free, _ = run_plan(pipe_plan, common + ["--memory", "inf", "--algo", "balanced"])
            peak = max((t.get("max_memory_bytes", 0) for t in free.get("tried", [])), default=0)
            levels = [("unbounded", "inf")]
            if peak > 0:
                levels += [("tight", f"{0.75 * peak:.0f}"), ("very tight", f"{0.5 * peak:.0f}")]
            for label, memory in levels:
                report, _ = run_plan(pipe_plan, common + ["--memory", memory, "--algo", ",".join(ALGORITHMS)]
                                     + ["--time-limit", str(ILP_SECONDS)])
                bound = report["lower_bounds_ms"]["best"]
                cells = {}
                for tried in report.get("tried", []):
                    if tried.get("valid"):
                        cells[tried["algorithm"]] = tried["period_ms"] / bound
                row = f"{name:<28}{stages:>3} {label:<11}{bound:>9.2f}"
                for algorithm in ALGORITHMS:
                    row += f"{cells[algorithm]:>12.3f}" if algorithm in cells else f"{'-':>12}"
                best = min(cells.values()) if cells else None
                row += f"{best:>12.3f}" if best else f"{'-':>12}"
                recomputed, _ = run_plan(pipe_plan, common + ["--memory", memory, "--algo", ",".join(ALGORITHMS)]
                                         + ["--time-limit", str(ILP_SECONDS), "--recompute", "auto"])
                periods = [t["period_ms"] for t in recomputed.get("tried", []) if t.get("valid")]
                row += (f"{min(periods) / recomputed['lower_bounds_ms']['best']:>12.3f}" if periods
                        else f"{'-':>12}")
                row += best_columns(pipe_plan, common, memory, stages)
                print(row, flush=True)


def best_columns(pipe_plan, common, memory, stages):
    """The best, links and replicas columns of one row of table 1."""
    def ratio(report):
        valid = [t["period_ms"] for t in report.get("tried", []) if t.get("valid")]
        chosen = report.get("period_ms")
        if chosen is None and valid:
            chosen = min(valid)
        return chosen / report["lower_bounds_ms"]["best"] if chosen else None
    best, wall = run_plan(pipe_plan, common + ["--memory", memory, "--time-limit", str(ILP_SECONDS)])
    value = ratio(best)
    cells = f"{value:>8.3f}{wall:>8.2f}" if value else f"{'-':>8}{wall:>8.2f}"
    links_args = [a for a in common if a != "--reference-model"]
    links, _ = run_plan(pipe_plan, links_args + ["--memory", memory, "--time-limit", str(ILP_SECONDS)])
    value = ratio(links)
    cells += f"{value:>8.3f}" if value else f"{'-':>8}"
    # common is [profile, "--stages", S, ...]: the same without the stage count.
    replicas, _ = run_plan(pipe_plan, common[:1] + common[3:]
                           + ["--gpus", str(stages), "--stages", "auto", "--memory", memory,
                              "--time-limit", str(ILP_SECONDS)])
    split = replicas.get("data_parallel", {})
    # One pipeline planned for the iteration, as each replica's is (the split with
    # one replica may not be planned: its bound already loses).
    one, _ = run_plan(pipe_plan, common + ["--memory", memory, "--objective", "iteration",
                                           "--time-limit", str(ILP_SECONDS)])
    if one.get("iteration_ms") and split.get("iteration_ms"):
        cells += f"{one['iteration_ms'] / split['iteration_ms']:>9.2f}"
    elif split.get("iteration_ms"):
        cells += f"{'inf':>9}"  # only replicas fit
    else:
        cells += f"{'-':>9}"
    return cells


def timing_table(pipe_plan, quick):
    print()
    print(f"{'instance':<34}" + "".join(f"{a:>12}" for a in ALGORITHMS) + f"{'wall s':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for seed in (1, 2) if not quick else (1,):
            chain = os.path.join(tmp, f"chain{seed}.json")
            with open(chain, "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_chain.py"), "1000", "--seed", str(seed)],
                               stdout=f, check=True)
            cases.append((f"chain 1000 layers, 64 GPUs (seed {seed})", [chain]))
            dag = os.path.join(tmp, f"dag{seed}.txt")
            with open(dag, "w") as f:
                subprocess.run([sys.executable, os.path.join(HERE, "gen_dag.py"), "10000", "--seed", str(seed)],
                               stdout=f, check=True)
            cases.append((f"DAG 10000 nodes, 64 GPUs (seed {seed})",
                           [dag, "--stages", "64", "--microbatches", "128", "--memory", "16GB"]))
        for label, args in cases:
            report, wall = run_plan(pipe_plan, args + ["--algo", ",".join(a for a in ALGORITHMS if a != "ilp")])
            seconds = {t["algorithm"]: t["planner_seconds"] for t in report.get("tried", [])}
            row = f"{label:<34}"
            for algorithm in ALGORITHMS:
                row += f"{seconds[algorithm]:>12.3f}" if algorithm in seconds else f"{'-':>12}"
            print(row + f"{wall:>10.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build-partitioner", "bin", "pipe-plan"))
    parser.add_argument("--profiles", default=os.path.join(REPO, "..", "shared", "data", "profiles"))
    parser.add_argument("--stages", default="2,4,8,16")
    parser.add_argument("--quick", action="store_true", help="one seed, S = 8 only")
    parser.add_argument("--ilp", type=float, default=0, metavar="SECONDS",
                        help="also run the ilp algorithm in table 1 with this time limit")
    args = parser.parse_args()
    global ILP_SECONDS
    if args.ilp > 0:
        ALGORITHMS.append("ilp")
        ILP_SECONDS = args.ilp
    if not os.path.exists(args.pipe_plan):
        sys.exit(f"bench.py: pipe-plan not found at {args.pipe_plan} (use --pipe-plan)")
    stages = [8] if args.quick else [int(s) for s in args.stages.split(",")]
    print(f"machine: {os.uname().nodename} ({os.cpu_count()} CPUs), pipe-plan: {args.pipe_plan}")
    if os.path.isdir(args.profiles):
        profile_table(args.pipe_plan, args.profiles, stages)
    else:
        print(f"(profiles directory {args.profiles} not found: table 1 skipped)")
    timing_table(args.pipe_plan, args.quick)


if __name__ == "__main__":
    main()
