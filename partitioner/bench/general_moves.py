#!/usr/bin/python3
"""Where memory-aware general allocations pay: `general-moves` against the best
contiguous and interleaved plans of `best`, on every profile x S x memory level.
Prints a table, asserts nothing.

  general_moves.py [--pipe-plan PATH] [--profiles DIR] [--stages 4,8,16]

Memory levels: 16 GB, and "tight" / "very tight" (75 % / 50 % of the peak memory
of the memory-blind `balanced` plan at that S, as bench.py). Reference model of
the profiles (m = 32, 1F1B with flush, free links). `best` is pipe-plan's default
(its boundary moves included); `general-moves` starts from madpipe's plan improved
by the same moves, so "gain" is what moving blocks of layers to other GPUs adds
over everything `best` finds. "-" marks no plan that fits.
"""
import argparse
import os
import subprocess
import tempfile
import json

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def plan(pipe_plan, args):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        out = handle.name
    try:
        subprocess.run([pipe_plan] + args + ["--quiet", "--timings", "--json", out],
                       stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        with open(out) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}
    finally:
        os.unlink(out)


def tried(report, algorithm):
    """(period, planner seconds, notes) of `algorithm`'s plan when it is valid."""
    for entry in report.get("tried", []):
        if entry.get("algorithm") == algorithm and entry.get("valid"):
            return entry["period_ms"], entry.get("planner_seconds", 0.0), entry.get("notes", "")
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-plan", default=os.path.join(REPO, "build-partitioner", "bin", "pipe-plan"))
    parser.add_argument("--profiles", default=os.path.join(REPO, "..", "shared", "data", "profiles"))
    parser.add_argument("--stages", default="4,8,16")
    args = parser.parse_args()
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(args.profiles)
                   for name in names if name.endswith(".txt") and not name.startswith("LICENSE"))
    header = (f"{'profile':<26}{'S':>3} {'memory':<11}{'best ms':>10}{'moves ms':>10}{'gain':>8}"
              f"{'stages/GPUs':>13}{'moves s':>9}")
    print(header)
    print("-" * len(header))
    wins = total = 0
    for path in files:
        name = os.path.relpath(path, args.profiles)[:-4]
        for stages in (int(s) for s in args.stages.split(",")):
            common = [path, "--stages", str(stages), "--microbatches", "32", "--reference-model"]
            free = plan(args.pipe_plan, common + ["--memory", "inf", "--algo", "balanced"])
            peak = max((t.get("max_memory_bytes", 0) for t in free.get("tried", [])), default=0)
            levels = [("16 GB", "16GB")]
            if peak > 0:
                levels += [("tight", f"{0.75 * peak:.0f}"), ("very tight", f"{0.5 * peak:.0f}")]
            for label, memory in levels:
                best = plan(args.pipe_plan, common + ["--memory", memory])
                moves = plan(args.pipe_plan, common + ["--memory", memory, "--algo", "general-moves"])
                best_ms = best.get("period_ms") if "algorithm" in best else None
                found = tried(moves, "general-moves")
                row = f"{name:<26}{stages:>3} {label:<11}"
                row += f"{best_ms:>10.2f}" if best_ms else f"{'-':>10}"
                if found:
                    ms, seconds, _ = found
                    layout = f"{moves.get('stages', '?')}/{moves.get('gpus_used', '?')}"
                    gain = f"{100 * (1 - ms / best_ms):.1f}%" if best_ms else "new"
                    row += f"{ms:>10.2f}{gain:>8}{layout:>13}{seconds:>9.2f}"
                    total += 1
                    wins += bool(best_ms) and ms < best_ms * (1 - 1e-9)
                else:
                    row += f"{'-':>10}{'':>8}{'':>13}{'':>9}"
                print(row, flush=True)
    print(f"\ngeneral-moves beats best on {wins} of {total} cases where it finds a plan")


if __name__ == "__main__":
    main()
