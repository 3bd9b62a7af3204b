"""Checks program.json's per-rank predictions against a memory limit: the
plan's categories, with the program's own saved peak and workspace where they
are larger, must sum to at most the limit. Prints "rank R fits" per rank.

With plan.json as a third argument, the communication buffers are the larger
of program.json's (the messages the plan's timeline holds) and the plan's
reserve, as the main job charges them; it also checks that the plan's parameter
state on each GPU (weights, gradients, optimizer state: tied weights on every
GPU reading them) equals the program's, and prints "rank R state as planned"."""
import json
import sys

program = json.load(open(sys.argv[1]))
limit = float(sys.argv[2])
planned_state, reserved = {}, {}
if len(sys.argv) > 3:
    for stage in json.load(open(sys.argv[3]))["stage_metrics"]:
        planned_state[stage["gpu"]] = stage["memory_breakdown"]["state"]
        reserved[stage["gpu"]] = stage["memory_breakdown"]["communication_buffers"]
for rank in program["predicted"]["ranks"]:
    memory = rank["memory"]
    comm = max(memory["comm"], reserved.get(rank["rank"], 0))
    needed = (memory["parameters"] + memory["gradients"] + memory["optimizer"] + comm
              + max(memory["saved"], rank["program_saved"])
              + max(memory["workspace"], rank["program_workspace"]))
    if needed > limit * (1 + 1e-9):
        sys.exit(f"rank {rank['rank']} needs {needed:.0f} B, over {limit:.0f} B")
    print(f"rank {rank['rank']} fits")
    if planned_state:
        state = memory["parameters"] + memory["gradients"] + memory["optimizer"]
        planned = planned_state[rank["rank"]]
        if abs(state - planned) > 1e-9 * state:
            sys.exit(f"rank {rank['rank']}: the program holds {state:.0f} B of parameter "
                     f"state, the plan {planned:.0f} B")
        print(f"rank {rank['rank']} state as planned")
