#!/usr/bin/python3
"""Where memory-aware general allocations pay: `best` with and without its last
step, the block moves from its chosen plan (`block-moves`), and the standalone
`general-moves` (the same search from madpipe's plan, with 4x the simulations),
on every profile x S x memory level. Prints a table, asserts nothing.

  general_moves.py [--pipe-plan PATH] [--profiles DIR] [--stages 4,8,16]

Memory levels: 16 GB, and "tight" / "very tight" (75 % / 50 % of the peak memory
of the memory-blind `balanced` plan at that S, as bench.py). Reference model of
the profiles (m = 32, 1F1B with flush, free links). "contig." is `best
--no-block-moves` (its boundary moves included), "best" is `best` as it ships,
"gain" what the block moves add, "s" the wall time of `best` and of `best
--no-block-moves`. "-" marks no plan that fits.

"bound ms" is the CBC bound over every general allocation (`--general-bound`,
docs/partitioner.md "A bound over every general allocation") up to the contiguous
period, "most" the most any allocation, contiguous or not, can gain on the
contiguous plan (1 - bound / contig.; at most 0.1 %: contiguous is optimal), and
"bound s" the time it took.
"""
import argparse
import json
import os
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def plan(pipe_plan, args):
    """(plan JSON, wall seconds)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        start = time.monotonic()
        subprocess.run([pipe_plan] + args + ["--quiet", "--timings", "--json", out],
                       stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        seconds = time.monotonic() - start
        with open(out) as f:
            return json.load(f), seconds
    except (OSError, ValueError):
        return {}, 0.0
    finally:
        os.unlink(out)


def tried(report, algorithm):
    """The period of `algorithm`'s plan when it is valid."""
    for entry in report.get("tried", []):
        if entry.get("algorithm") == algorithm and entry.get("valid"):
            return entry["period_ms"]
    return None


def chosen(report):
    return report.get("period_ms") if "algorithm" in report else None


def cell(value):
    return f"{value:>10.2f}" if value else f"{'-':>10}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build-partitioner", "bin", "pipe-plan"))
    parser.add_argument("--profiles", default=os.path.join(REPO, "..", "shared", "data", "profiles"))
    parser.add_argument("--stages", default="4,8,16")
    parser.add_argument("--memory-levels", default="16 GB,tight,very tight",
                        help="which of the three memory levels to plan at")
    parser.add_argument("--general-bound", type=float, default=5,
                        help="seconds for the CBC bound over every general allocation")
    args = parser.parse_args()
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(args.profiles)
                   for name in names if name.endswith(".txt") and not name.startswith("LICENSE"))
    header = (f"{'profile':<26}{'S':>3} {'memory':<11}{'contig. ms':>11}{'best ms':>10}{'gain':>8}"
              f"{'stages/GPUs':>13}{'general-moves':>14}{'best s':>8}{'contig. s':>10}"
              f"{'others ms':>10}{'bound ms':>10}{'most':>8}{'bound s':>8}")
    print(header)
    print("-" * len(header))
    cases = wins = beyond = proven = 0
    by_cbc = []
    levels_asked = args.memory_levels.split(",")
    slowest = 0.0
    for path in files:
        name = os.path.relpath(path, args.profiles)[:-4]
        for stages in (int(s) for s in args.stages.split(",")):
            common = [path, "--stages", str(stages), "--microbatches", "32", "--reference-model"]
            free, _ = plan(args.pipe_plan, common + ["--memory", "inf", "--algo", "balanced"])
            peak = max((t.get("max_memory_bytes", 0) for t in free.get("tried", [])), default=0)
            levels = [("16 GB", "16GB")]
            if peak > 0:
                levels += [("tight", f"{0.75 * peak:.0f}"), ("very tight", f"{0.5 * peak:.0f}")]
            for label, memory in levels:
                if label not in levels_asked:
                    continue
                contiguous, contiguous_s = plan(
                    args.pipe_plan, common + ["--memory", memory, "--no-block-moves",
                                              "--general-bound", str(args.general_bound)])
                best, best_s = plan(args.pipe_plan, common + ["--memory", memory])
                moves, _ = plan(args.pipe_plan, common + ["--memory", memory, "--algo", "general-moves"])
                before, after = chosen(contiguous), chosen(best)
                standalone = tried(moves, "general-moves")
                row = f"{name:<26}{stages:>3} {label:<11}{cell(before):>11}{cell(after)}"
                if before and after:
                    cases += 1
                    slowest = max(slowest, best_s)
                    gained = after < before * (1 - 1e-9)
                    wins += gained
                    beyond += bool(standalone) and standalone < after * (1 - 1e-9)
                    layout = f"{best.get('stages', '?')}/{best.get('gpus_used', '?')}"
                    row += f"{100 * (1 - after / before):>7.1f}%{layout if gained else '':>13}"
                else:
                    row += f"{'':>8}{'':>13}"
                bounds = contiguous.get("lower_bounds_ms", {})
                bound = bounds.get("best")
                others = max((bounds.get(key, 0) for key in ("work", "largest_layer", "memory")),
                             default=0)
                bound_s = contiguous.get("general_bound_s", 0.0)
                row += f"{cell(standalone):>14}{best_s:>8.2f}{contiguous_s - bound_s:>10.2f}"
                if before and bound:
                    most = 1 - bound / before
                    proven += most <= 1e-3 + 1e-9
                    if most <= 1e-3 + 1e-9 and 1 - others / before > 1e-3 + 1e-9:
                        by_cbc.append(f"{name} S={stages} {label}")
                    row += f"{cell(others)}{cell(bound)}{100 * most:>7.1f}%{bound_s:>8.2f}"
                print(row, flush=True)
    print(f"\nblock moves improve best on {wins} of {cases} cases; the standalone "
          f"general-moves beats the shipped best on {beyond}; slowest best {slowest:.2f} s; "
          f"no allocation beats the contiguous plan by more than 0.1 % (proven) on {proven}, "
          f"{len(by_cbc)} of them by CBC alone ({', '.join(by_cbc)})")


if __name__ == "__main__":
    main()
