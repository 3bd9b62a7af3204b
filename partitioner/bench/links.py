#!/usr/bin/python3
"""Planning with real links: prints a table, asserts nothing.

  links.py [--pipe-plan PATH] [--before PATH] [--profiles DIR] [--stages 4,8,16] [--ilp SECONDS]
           [--schedule 1f1b|periodic|...]

For every profile at 16 GB (GNMT-16: 8 GB), m = 32, 1F1B with flush and the default
links (25 GB/s inside a node of 8 GPUs, the slower network between nodes), the
period `madpipe` planned beside the period its plan simulates at (before the boundary
moves the planner then tries on it), and the simulated period of `best` (and of `--before`, another pipe-plan build, on the same instance).
With `--ilp SECONDS`, also `ilp` alone under that time limit: its planned period (the
span model's, with port slots), the period its plan simulates at, and how its loop ended.
"""
import argparse
import os

from recompute import run_plan, shared_profiles  # (plan JSON, wall seconds) of one pipe-plan run

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def tried(plan, name):
    for item in plan.get("tried", []):
        if item["algorithm"] == name and item.get("valid"):
            return item
    return None


def planned_and_simulated(item):
    """(planned period, simulated period of the plan the algorithm returned, before the
    boundary moves of its result, their ratio) of a `tried` entry, or Nones."""
    if not item:
        return None, None, None
    planned = item.get("planned_period_ms")
    simulated = item.get("period_before_moves_ms", item["period_ms"])
    return planned, simulated, (simulated / planned if planned and simulated else None)


def fmt(value):
    return f"{value:.2f}" if value is not None else "-"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build", "bin", "pipe-plan"))
    parser.add_argument("--before", help="another pipe-plan to compare `best` with")
    parser.add_argument("--profiles",
                        default=os.path.join(os.path.dirname(REPO), "shared", "data", "profiles"))
    parser.add_argument("--stages", default="4,8,16")
    parser.add_argument("--ilp", type=float, help="time limit of an `ilp` run per instance")
    parser.add_argument("--schedule", default="1f1b", help="pipe-plan's --schedule (1f1b)")
    args = parser.parse_args()
    stages = [int(s) for s in args.stages.split(",")]
    header = (f"{'profile':<26}{'S':>3}{'madpipe planned':>17}{'simulated':>11}{'ratio':>7}"
              f"{'best':>9}{'best s':>8}")
    if args.before:
        header += f"{'before':>9}{'gain':>8}"
    if args.ilp:
        header += f"{'ilp planned':>13}{'simulated':>11}{'ratio':>7}{'ilp s':>7}  ilp outcome"
    print(header)
    ratios, gains, ilp_ratios = [], [], []
    for label, path, memory in shared_profiles(args.profiles):
        for s in stages:
            common = [path, "--stages", str(s), "--microbatches", "32", "--memory", memory,
                      "--schedule", args.schedule]
            plan, wall = run_plan(args.pipe_plan, common)
            planned, simulated, ratio = planned_and_simulated(tried(plan, "madpipe"))
            if ratio:
                ratios.append(ratio)
            best = plan.get("period_ms")
            line = (f"{label:<26}{s:>3}{fmt(planned):>17}{fmt(simulated):>11}"
                    f"{fmt(ratio):>7}{fmt(best):>9}{wall:>8.2f}")
            if args.before:
                old, _ = run_plan(args.before, common)
                before = old.get("period_ms")
                gain = None
                if before and best:
                    gain = 100 * (1 - best / before)
                    gains.append(gain)
                line += f"{fmt(before):>9}{(f'{gain:.1f}%' if gain is not None else '-'):>8}"
            if args.ilp:
                run, seconds = run_plan(args.pipe_plan, common + [
                    "--algo", "ilp", "--time-limit", f"{args.ilp:g}", "--no-block-moves"])
                ilp = tried(run, "ilp")
                planned, simulated, ratio = planned_and_simulated(ilp)
                if ratio:
                    ilp_ratios.append(ratio)
                outcome = (ilp.get("notes", "") if ilp else "no plan").split(":")[0]
                line += (f"{fmt(planned):>13}{fmt(simulated):>11}{fmt(ratio):>7}"
                         f"{seconds:>7.1f}  {outcome}")
            print(line, flush=True)
    if ratios:
        ratios.sort()
        within = sum(1 for r in ratios if abs(r - 1) <= 0.02)
        print(f"madpipe simulated/planned: median {ratios[len(ratios) // 2]:.3f}, "
              f"range {ratios[0]:.3f}-{ratios[-1]:.3f}, within 2 %: {within} of {len(ratios)}")
    if ilp_ratios:
        ilp_ratios.sort()
        within = sum(1 for r in ilp_ratios if abs(r - 1) <= 0.02)
        print(f"ilp simulated/planned: median {ilp_ratios[len(ilp_ratios) // 2]:.3f}, "
              f"range {ilp_ratios[0]:.3f}-{ilp_ratios[-1]:.3f}, "
              f"within 2 %: {within} of {len(ilp_ratios)}")
    if gains:
        print(f"best against --before: better on {sum(1 for g in gains if g > 0.05)}, "
              f"worse on {sum(1 for g in gains if g < -0.05)} of {len(gains)}")


if __name__ == "__main__":
    main()
