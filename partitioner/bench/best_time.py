#!/usr/bin/python3
"""Wall time and period of `best` (pipe-plan's default algorithm): prints a table, asserts nothing.

  best_time.py [--pipe-plan PATH] [--before PATH] [--profiles DIR] [--stages 4,8,16]
               [--memory 16GB] [--repeat N] [--only SUBSTRING]

Instances: every profile at each S and --memory (default links, m = pipe-plan's
default); generated 2,000-node DAGs (gen_dag.py, seeds 1 and 2) at S = 8 and 16 GB;
generated 1,000-layer chains (gen_chain.py, seeds 1 and 2) at 64 GPUs. The time is the
wall time of the whole pipe-plan run, the least of --repeat runs. With --before, the
same instances are planned by a second pipe-plan (an older build) and both periods
and times are printed side by side.
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


def run_plan(pipe_plan, args, repeat):
    """(plan JSON, least wall seconds) of `pipe-plan args` (algorithm `best`)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        wall = float("inf")
        for _ in range(repeat):
            start = time.time()
            subprocess.run([pipe_plan] + args + ["--quiet", "--timings", "--json", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            wall = min(wall, time.time() - start)
        with open(out) as f:
            return json.load(f), wall
    finally:
        os.unlink(out)


def describe(report):
    if "period_ms" not in report:
        return "-", "no plan"
    return f"{report['period_ms']:.2f}", report["algorithm"]


def instances(profiles, stages_list, memory, tmp):
    files = []
    for root, _, names in os.walk(profiles):
        for name in names:
            if name.endswith(".txt") and not name.startswith("LICENSE"):
                files.append(os.path.join(root, name))
    for path in sorted(files):
        for stages in stages_list:
            yield (os.path.relpath(path, profiles)[:-4], stages, [path, "--stages", str(stages), "--memory", memory])
    for seed in (1, 2):
        dag = os.path.join(tmp, f"dag{seed}.txt")
        with open(dag, "w") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_dag.py"), "2000", "--seed", str(seed)],
                           stdout=f, check=True)
        yield (f"DAG 2000 nodes (seed {seed})", 8, [dag, "--stages", "8", "--memory", memory])
    for seed in (1, 2):
        chain = os.path.join(tmp, f"chain{seed}.json")
        with open(chain, "w") as f:
            subprocess.run([sys.executable, os.path.join(HERE, "gen_chain.py"), "1000", "--seed", str(seed)],
                           stdout=f, check=True)
        yield (f"chain 1000 layers (seed {seed})", 64, [chain])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build-partitioner", "bin", "pipe-plan"))
    parser.add_argument("--before", help="an older pipe-plan to compare with")
    parser.add_argument("--profiles", default=os.path.join(REPO, "..", "shared", "data", "profiles"))
    parser.add_argument("--stages", default="4,8,16")
    parser.add_argument("--memory", default="16GB")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--only", default="", help="only instances whose name contains this")
    args = parser.parse_args()
    for binary in [args.pipe_plan] + ([args.before] if args.before else []):
        if not os.path.exists(binary):
            sys.exit(f"best_time.py: pipe-plan not found at {binary}")
    stages = [int(s) for s in args.stages.split(",")]
    print(f"machine: {os.uname().nodename} ({os.cpu_count()} CPUs), memory {args.memory}, "
          f"least of {args.repeat} run(s)")
    if args.before:
        header = (f"{'instance':<32}{'S':>3}{'before ms':>11}{'after ms':>11}{'before s':>10}{'after s':>9}"
                  f"  {'chosen before -> after'}")
    else:
        header = f"{'instance':<32}{'S':>3}{'period ms':>11}{'time s':>9}  chosen"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        for name, stages, plan_args in instances(args.profiles, stages, args.memory, tmp):
            if args.only not in name:
                continue
            report, wall = run_plan(args.pipe_plan, plan_args, args.repeat)
            period, chosen = describe(report)
            if args.before:
                old_report, old_wall = run_plan(args.before, plan_args, args.repeat)
                old_period, old_chosen = describe(old_report)
                print(f"{name:<32}{stages:>3}{old_period:>11}{period:>11}{old_wall:>10.2f}{wall:>9.2f}"
                      f"  {old_chosen} -> {chosen}", flush=True)
            else:
                print(f"{name:<32}{stages:>3}{period:>11}{wall:>9.2f}  {chosen}", flush=True)


if __name__ == "__main__":
    main()
