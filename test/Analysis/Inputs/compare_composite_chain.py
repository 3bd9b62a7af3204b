"""Compares two problem JSONs of one model: ONE, where each recurrent op is a
layer, and CELLS, where its cells were written out first (nn-expand-composites)
so that each cell kernel is a layer. A composite is costed as its cells when
the totals agree: forward, backward and weight-gradient times, parameter bytes,
and saved bytes (per layer plus the shared saved values, each once). Each node
name given must name exactly one layer of ONE, and several in CELLS (the cells
carry their node's name).

usage: compare_composite_chain.py ONE.json CELLS.json NAME...
"""

import json
import math
import sys


def totals(problem):
    layers = problem["layers"]
    shared = sum(value["bytes"] for value in problem.get("shared_saved", []))
    return {
        "forward_ms": sum(layer["forward_ms"] for layer in layers),
        "backward_ms": sum(layer["backward_ms"] for layer in layers),
        "backward_weight_ms": sum(layer["backward_weight_ms"] for layer in layers),
        "parameter_bytes": sum(layer["parameter_bytes"] for layer in layers),
        "saved_bytes": sum(layer["saved_bytes"] for layer in layers) + shared,
    }


def main():
    one_path, cells_path, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    with open(one_path) as f:
        one = json.load(f)
    with open(cells_path) as f:
        cells = json.load(f)
    failures = 0
    for name in names:
        as_one = [layer for layer in one["layers"] if layer["name"] == name]
        as_cells = [layer for layer in cells["layers"] if layer["name"] == name]
        ok = len(as_one) == 1 and name in as_one[0]["node_ids"] and len(as_cells) > 1
        failures += not ok
        print(f"{name}: {len(as_one)} layer as one op, {len(as_cells)} as cells: "
              + ("ok" if ok else "FAILED"))
    a, b = totals(one), totals(cells)
    for key in a:
        ok = math.isclose(a[key], b[key], rel_tol=1e-9, abs_tol=1e-12)
        failures += not ok
        print(f"{key}: {a[key]:.9g} as one op, {b[key]:.9g} as cells: "
              + ("equal" if ok else "DIFFERENT"))
    print(f"layers: {len(one['layers'])} as one op, {len(cells['layers'])} as cells")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
