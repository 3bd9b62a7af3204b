"""Checks program.json's per-rank predictions against a memory limit: the
plan's categories, with the program's own saved peak and workspace where they
are larger, must sum to at most the limit. Prints "rank R fits" per rank."""
import json
import sys

program = json.load(open(sys.argv[1]))
limit = float(sys.argv[2])
for rank in program["predicted"]["ranks"]:
    memory = rank["memory"]
    needed = (memory["parameters"] + memory["gradients"] + memory["optimizer"] + memory["comm"]
              + max(memory["saved"], rank["program_saved"])
              + max(memory["workspace"], rank["program_workspace"]))
    if needed > limit * (1 + 1e-9):
        sys.exit(f"rank {rank['rank']} needs {needed:.0f} B, over {limit:.0f} B")
    print(f"rank {rank['rank']} fits")
