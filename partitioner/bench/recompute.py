#!/usr/bin/python3
"""What recomputation buys: prints a table, asserts nothing.

  recompute.py [--pipe-plan PATH] [--profiles DIR] [--stages 4,8]

For the memory-bound CNN profiles at 16 GB and every profile at tight limits (50 %
and 30 % of the peak memory of the memory-blind `balanced` plan at that S), the
best plan's period under `--recompute none`, `auto` and `all`, under the reference
model of the profiles (m = 32, 1F1B with flush, 4 x parameter bytes, free links),
with the stages that recompute and the planner's wall time. "-" marks no plan.
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
POLICIES = ["none", "auto", "all"]
CNNS_AT_16GB = ["pipedream/resnet50", "pipedream/resnet101", "pipedream/inception_v3"]


def bench_parser(doc):
    """An argument parser with the options every profile bench takes: --pipe-plan
    (default: this checkout's build) and --profiles (the shared profiles)."""
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build", "bin", "pipe-plan"))
    parser.add_argument("--profiles",
                        default=os.path.join(os.path.dirname(REPO), "shared", "data", "profiles"))
    return parser


def shared_profiles(profiles):
    """(family/name, path, memory) of every shared profile, DAPPLE's then PipeDream's,
    with the memory the tables plan at: 8 GB for GNMT-16, else 16 GB."""
    for family in ("dapple", "pipedream"):
        folder = os.path.join(profiles, family)
        for name in sorted(os.listdir(folder)):
            if name.endswith(".txt") and not name.startswith("LICENSE"):
                yield (f"{family}/{name[:-4]}", os.path.join(folder, name),
                       "8GB" if "gnmt-16" in name else "16GB")


def run_plan(pipe_plan, args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        start = time.time()
        subprocess.run([pipe_plan] + args + ["--quiet", "--json", out],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        wall = time.time() - start
        with open(out) as f:
            return json.load(f), wall
    finally:
        os.unlink(out)


def cell(plan):
    return f"{plan['period_ms']:.2f}" if "period_ms" in plan else "-"


def row(pipe_plan, path, name, stages, label, memory):
    common = [path, "--stages", str(stages), "--microbatches", "32", "--reference-model",
              "--memory", memory]
    plans, walls = {}, {}
    for policy in POLICIES:
        plans[policy], walls[policy] = run_plan(pipe_plan, common + ["--recompute", policy])
    auto = plans["auto"]
    recomputing = (auto.get("allocation") or {}).get("recompute_stages", [])
    ratio = "-"
    if "period_ms" in auto and "period_ms" in plans["none"]:
        ratio = f"{auto['period_ms'] / plans['none']['period_ms']:.3f}"
    elif "period_ms" in auto:
        ratio = "new"
    stages_text = ",".join(str(s) for s in recomputing) or "none"
    if "period_ms" not in auto:
        stages_text = "-"
    print(f"{name:<26}{stages:>3} {label:<10}" + "".join(f"{cell(plans[p]):>11}" for p in POLICIES) +
          f"{ratio:>8}  {auto.get('algorithm', '-'):<12}{stages_text:<16}{walls['auto']:>7.2f}")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build", "bin", "pipe-plan"))
    parser.add_argument("--profiles", default=os.path.join(os.path.dirname(REPO), "shared", "data", "profiles"))
    parser.add_argument("--stages", default="4,8")
    args = parser.parse_args()
    stages_list = [int(s) for s in args.stages.split(",")]
    header = (f"{'profile':<26}{'S':>3} {'memory':<10}" + "".join(f"{p:>11}" for p in POLICIES) +
              f"{'auto/none':>9} {'auto algo':<12}{'recomputes':<16}{'auto s':>7}")
    print("period in ms of the best plan under each recompute policy (reference model, m = 32)")
    print(header)
    print("-" * len(header))
    for name in CNNS_AT_16GB:
        path = os.path.join(args.profiles, name + ".txt")
        if os.path.exists(path):
            for stages in stages_list:
                row(args.pipe_plan, path, name, stages, "16GB", "16GB")
    files = []
    for root, _, names in os.walk(args.profiles):
        for file in sorted(names):
            if file.endswith(".txt") and not file.startswith("LICENSE"):
                files.append(os.path.join(root, file))
    for path in sorted(files):
        name = os.path.relpath(path, args.profiles)[:-4]
        for stages in stages_list:
            common = [path, "--stages", str(stages), "--microbatches", "32", "--reference-model"]
            free, _ = run_plan(args.pipe_plan, common + ["--memory", "inf", "--algo", "balanced"])
            peak = max((t.get("max_memory_bytes", 0) for t in free.get("tried", [])), default=0)
            if peak <= 0:
                continue
            for label, fraction in (("50%", 0.5), ("30%", 0.3)):
                row(args.pipe_plan, path, name, stages, label, f"{fraction * peak:.0f}")


if __name__ == "__main__":
    main()
