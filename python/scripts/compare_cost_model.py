#!/usr/bin/env python3
"""Compares the cost model's per-op times with measured ones.

    compare_cost_model.py MODEL.onnx --times times.json --target h100 \
        --dtype fp32 --micro-batch-size 8 [--pipe-opt build/bin/pipe-opt] [--markdown]

Runs `pipe-opt MODEL --test-print-pipe-cost='target=T dtype=D'` and joins its
predicted forward/backward times with the measured profile (written by
measure_node_times.py) by ONNX node name. The cost model charges an
element-wise op that it fuses into its producer's kernel (`fused_into=`) almost
nothing, while PyTorch runs it as a kernel of its own; so the unit of
comparison is the fused kernel: a kernel's predicted time is the sum over its
ops, and so is its measured time. Kernels are classed by the op that launches
them. Relative error = |predicted - measured| / measured, per kernel and
direction; the tables give its median per class and overall.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
from typing import Dict, List, Optional

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(SCRIPT_DIR))

LINE = re.compile(r"^op '(?P<name>(?:[^']|'')*)' (?P<op>\S+) class=(?P<cls>\S+)(?P<rest>.*)$")
FIELD = re.compile(r"(\w+)=('(?:[^']*)'|\S+)")
CLASS_ORDER = ["gemm", "conv", "normalization", "elementwise", "reduction", "pooling",
               "data_movement"]


def find_pipe_opt(explicit: Optional[str]) -> str:
    for candidate in (explicit, os.environ.get("PIPE_OPT"),
                      os.path.join(REPO_ROOT, "build", "bin", "pipe-opt")):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("error: pipe-opt not found (pass --pipe-opt PATH or set PIPE_OPT)")


def predicted_ops(pipe_opt: str, model: str, target: str, dtype: str, micro_batch: int,
                  dims: List[str]) -> List[dict]:
    """Per-op records of the test-print-pipe-cost pass, in program order."""
    command = [pipe_opt, model, f"--micro-batch-size={micro_batch}", "-o", os.devnull,
               f"--test-print-pipe-cost=target={target} dtype={dtype}"]
    command += [f"--dim={d}" for d in dims]
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"error: {' '.join(shlex.quote(c) for c in command)} failed:\n{done.stderr}")
    ops = []
    for line in done.stdout.splitlines():
        match = LINE.match(line)
        if not match:
            continue
        rest = match.group("rest")
        fields = {k: v.strip("'") for k, v in FIELD.findall(rest)}
        ops.append({
            "name": match.group("name"), "op": match.group("op"), "class": match.group("cls"),
            "static": rest.split()[:1] == ["static"],
            "fwd_ms": float(fields.get("fwd_us", 0)) * 1e-3,
            "bwd_ms": float(fields.get("bwd_us", 0)) * 1e-3,
            "fused_into": fields.get("fused_into"),
        })
    if not ops:
        sys.exit(f"error: no per-op lines in the output of {command[0]}")
    return ops


def load_times(path: str) -> Dict[str, dict]:
    with open(path) as f:
        document = json.load(f)
    return document.get("ops", document) if isinstance(document, dict) else {}


def kernels(ops: List[dict], times: Dict[str, dict]) -> List[dict]:
    """Groups ops into kernels (a root and the ops fused into it) with
    predicted and measured sums; skips kernels with no measured op."""
    by_name = {o["name"]: o for o in ops}

    def root(o):
        seen = set()
        while o["fused_into"] and o["fused_into"] in by_name and o["name"] not in seen:
            seen.add(o["name"])
            o = by_name[o["fused_into"]]
        return o

    groups: Dict[str, dict] = {}
    for o in ops:
        r = root(o)
        g = groups.setdefault(r["name"], {"name": r["name"], "op": r["op"], "class": r["class"],
                                          "members": [], "pred_f": 0.0, "pred_b": 0.0,
                                          "meas_f": 0.0, "meas_b": 0.0, "measured": 0})
        g["members"].append(o["name"])
        g["pred_f"] += o["fwd_ms"]
        g["pred_b"] += o["bwd_ms"]
        m = times.get(o["name"])
        if m:
            g["measured"] += 1
            g["meas_f"] += m["forward_ms"]
            g["meas_b"] += m["backward_ms"]
    return [g for g in groups.values() if g["measured"]]


def rel(pred: float, meas: float) -> Optional[float]:
    return abs(pred - meas) / meas if meas > 0 and pred > 0 else None


def summarize(groups: List[dict]) -> List[dict]:
    rows = []
    classes = [c for c in CLASS_ORDER if any(g["class"] == c for g in groups)]
    classes += sorted({g["class"] for g in groups} - set(classes) - {"free"})
    for name, members in [(c, [g for g in groups if g["class"] == c]) for c in classes] + \
            [("all", [g for g in groups if g["class"] != "free"])]:
        ef = [e for e in (rel(g["pred_f"], g["meas_f"]) for g in members) if e is not None]
        eb = [e for e in (rel(g["pred_b"], g["meas_b"]) for g in members) if e is not None]
        rows.append({
            "class": name, "kernels": len(members),
            "pred_f": sum(g["pred_f"] for g in members), "meas_f": sum(g["meas_f"] for g in members),
            "pred_b": sum(g["pred_b"] for g in members), "meas_b": sum(g["meas_b"] for g in members),
            "med_f": statistics.median(ef) if ef else None, "n_f": len(ef),
            "med_b": statistics.median(eb) if eb else None, "n_b": len(eb),
        })
    return rows


def pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{100 * value:.0f} %"


def print_report(model: str, target: str, dtype: str, micro_batch: int, groups, rows, worst: int,
                 markdown: bool, meta: dict) -> None:
    free = [g for g in groups if g["class"] == "free"]
    where = meta.get("device", "?")
    title = (f"{os.path.basename(model)}: predicted ({target}, {dtype}) vs measured ({where}, "
             f"{meta.get('precision', '?')}, torch {meta.get('torch', '?')}), "
             f"micro-batch {micro_batch}")
    header = ["class", "kernels", "pred fwd ms", "meas fwd ms", "median rel err fwd",
              "pred bwd ms", "meas bwd ms", "median rel err bwd"]
    table = [[r["class"], str(r["kernels"]), f"{r['pred_f']:.3f}", f"{r['meas_f']:.3f}",
              f"{pct(r['med_f'])} (n={r['n_f']})", f"{r['pred_b']:.3f}", f"{r['meas_b']:.3f}",
              f"{pct(r['med_b'])} (n={r['n_b']})"] for r in rows]
    ranked = sorted((g for g in groups if g["class"] != "free"),
                    key=lambda g: -max(rel(g["pred_f"], g["meas_f"]) or 0,
                                       rel(g["pred_b"], g["meas_b"]) or 0))[:worst]
    worst_header = ["kernel", "op", "ops", "pred fwd", "meas fwd", "pred bwd", "meas bwd"]
    worst_rows = [[g["name"], g["op"], str(len(g["members"])), f"{g['pred_f']:.4f}",
                   f"{g['meas_f']:.4f}", f"{g['pred_b']:.4f}", f"{g['meas_b']:.4f}"]
                  for g in ranked]
    free_line = (f"{len(free)} measured kernels the model treats as free (views, folded weight "
                 f"transposes, constant-index lookups): measured fwd "
                 f"{sum(g['meas_f'] for g in free):.3f} ms, bwd {sum(g['meas_b'] for g in free):.3f} ms")
    if markdown:
        print(f"**{title}**\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
        print(f"\n{free_line}.\n\nWorst kernels (times in ms):\n")
        print("| " + " | ".join(worst_header) + " |")
        print("|" + "---|" * len(worst_header))
        for row in worst_rows:
            print("| `" + row[0] + "` | " + " | ".join(row[1:]) + " |")
        print()
        return
    print(title)
    widths = [max(len(x) for x in col) for col in zip(header, *table)]
    for row in [header] + table:
        print("  ".join(x.ljust(w) for x, w in zip(row, widths)))
    print(free_line)
    print("worst kernels (ms):")
    widths = [max(len(x) for x in col) for col in zip(worst_header, *worst_rows)]
    for row in [worst_header] + worst_rows:
        print("  " + "  ".join(x.ljust(w) for x, w in zip(row, widths)))


def summarize_files(paths: List[str], markdown: bool) -> int:
    """One table over the kernels of several models (compare --json files)."""
    groups, names, settings = [], [], set()
    for path in paths:
        with open(path) as f:
            document = json.load(f)
        groups += document["kernels"]
        names.append(document.get("meta", {}).get("model", os.path.basename(path)))
        settings.add((document.get("target"), document.get("dtype")))
    rows = summarize(groups)
    title = f"All models ({', '.join(names)}); target/dtype: " + \
        ", ".join(f"{t}/{d}" for t, d in sorted(settings, key=str))
    header = ["class", "kernels", "median rel err fwd", "median rel err bwd",
              "sum pred / meas fwd", "sum pred / meas bwd"]
    table = [[r["class"], str(r["kernels"]), f"{pct(r['med_f'])} (n={r['n_f']})",
              f"{pct(r['med_b'])} (n={r['n_b']})",
              f"{r['pred_f'] / r['meas_f']:.2f}" if r["meas_f"] > 0 else "—",
              f"{r['pred_b'] / r['meas_b']:.2f}" if r["meas_b"] > 0 else "—"] for r in rows]
    if markdown:
        print(f"**{title}**\n")
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for row in table:
            print("| " + " | ".join(row) + " |")
        print()
    else:
        print(title)
        widths = [max(len(x) for x in col) for col in zip(header, *table)]
        for row in [header] + table:
            print("  ".join(x.ljust(w) for x, w in zip(row, widths)))
    return 0


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--times", help="measured profile (measure_node_times.py)")
    parser.add_argument("--summarize", nargs="+", metavar="JSON",
                        help="pool the --json outputs of earlier runs into one table")
    parser.add_argument("--target", default="h100")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--dim", action="append", default=[], help="NAME=VALUE, as for pipe-opt")
    parser.add_argument("--pipe-opt", help="pipe-opt binary (default: $PIPE_OPT, build/bin/pipe-opt)")
    parser.add_argument("--worst", type=int, default=5, help="worst kernels to list")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables for docs/")
    parser.add_argument("--json", help="also write the per-kernel join to this file")
    args = parser.parse_args(argv)

    if args.summarize:
        return summarize_files(args.summarize, args.markdown)
    if not args.model or not args.times:
        parser.error("MODEL and --times are required (or --summarize JSON...)")
    with open(args.times) as f:
        document = json.load(f)
    meta = document.get("meta", {}) if isinstance(document, dict) else {}
    if meta.get("micro_batch_size") not in (None, args.micro_batch_size):
        print(f"warning: {args.times} was measured at micro-batch {meta['micro_batch_size']}, "
              f"predicting at {args.micro_batch_size}", file=sys.stderr)
    times = load_times(args.times)
    ops = predicted_ops(find_pipe_opt(args.pipe_opt), args.model, args.target, args.dtype,
                        args.micro_batch_size, args.dim)
    known = {o["name"] for o in ops}
    unmatched = sorted(set(times) - known)
    if unmatched:
        print(f"warning: {os.path.basename(args.model)}: {len(unmatched)} measured nodes "
              f"not in pipe-opt's output, e.g. "
              f"{unmatched[:3]}", file=sys.stderr)
    groups = kernels(ops, times)
    rows = summarize(groups)
    print_report(args.model, args.target, args.dtype, args.micro_batch_size, groups, rows,
                 args.worst, args.markdown, meta)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "target": args.target, "dtype": args.dtype,
                       "summary": rows, "kernels": groups}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
