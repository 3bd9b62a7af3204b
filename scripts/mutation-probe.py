#!/usr/bin/python3
"""Feeds mutated ONNX models to pipe-opt and tallies how it ends.

For each fixture model (test/Fixtures/models, the small exports) it writes
mutants of two kinds: byte-level (a truncation, a flipped bit, overwritten
bytes) and structural (through the onnx package: an attribute of another
type, a negative or zero dim or attribute, an initializer without its data or
with too few values, a repeated or non-UTF-8 node name, no graph outputs, an
input of another element type). Each mutant is imported (pipe-opt MODEL
--micro-batch-size=2) and planned (--pipeline-stages=2 --no-codegen), each
with a time limit. It prints, per kind, how many runs ended with 0, 1, 2,
another status, a signal, or the time limit, and every mutant that ONNX's
checker (full_check, with shape inference) rejects but pipe-opt accepted.

  /usr/bin/python3 scripts/mutation-probe.py build/bin/pipe-opt [--per-model N] [--seed S]
      [--kinds bit-flip,overwrite] [--keep DIR]

The mutants depend only on the seed, so --kinds reruns a subset of the same
mutants; --keep saves each mutant that crashed, timed out or ended with another
status, for reproduction.
"""
import argparse
import collections
import glob
import os
import random
import subprocess
import sys
import tempfile

import onnx
from onnx import AttributeProto, TensorProto

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def byte_mutants(data, rng):
    out = []
    cut = rng.randrange(1, len(data))
    out.append(("truncate", data[:cut]))
    flipped = bytearray(data)
    i = rng.randrange(len(flipped))
    flipped[i] ^= 1 << rng.randrange(8)
    out.append(("bit-flip", bytes(flipped)))
    over = bytearray(data)
    i = rng.randrange(len(over))
    for k in range(i, min(len(over), i + rng.randrange(1, 9))):
        over[k] = rng.randrange(256)
    out.append(("overwrite", bytes(over)))
    return out


def structural_mutants(model, rng):
    out = []

    def variant(name, change):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        if change(m) is not False:
            out.append((name, m.SerializeToString()))

    def nodes_with_attributes(m):
        return [n for n in m.graph.node if n.attribute]

    def attr_type(m):
        nodes = nodes_with_attributes(m)
        if not nodes:
            return False
        a = rng.choice(rng.choice(nodes).attribute)
        if a.type == AttributeProto.INT:
            a.type, a.f = AttributeProto.FLOAT, float(a.i)
        elif a.type == AttributeProto.INTS:
            a.type = AttributeProto.FLOATS
            a.floats.extend(float(v) for v in a.ints)
            del a.ints[:]
        elif a.type == AttributeProto.FLOAT:
            a.type, a.s = AttributeProto.STRING, b"1.0"
        else:
            a.type, a.i = AttributeProto.INT, 3

    def attr_negative(m):
        nodes = nodes_with_attributes(m)
        if not nodes:
            return False
        a = rng.choice(rng.choice(nodes).attribute)
        if a.type == AttributeProto.INT:
            a.i = -rng.choice([1, 7, 1000])
        elif a.type == AttributeProto.INTS and len(a.ints):
            a.ints[rng.randrange(len(a.ints))] = -rng.choice([1, 1000])
        else:
            return False

    def zero_dim(m):
        inits = [t for t in m.graph.initializer if len(t.dims)]
        if not inits:
            return False
        t = rng.choice(inits)
        t.dims[rng.randrange(len(t.dims))] = 0

    def no_data(m):
        inits = [t for t in m.graph.initializer if t.raw_data]
        if not inits:
            return False
        rng.choice(inits).ClearField("raw_data")

    def short_data(m):
        inits = [t for t in m.graph.initializer if len(t.raw_data) > 8]
        if not inits:
            return False
        t = rng.choice(inits)
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]

    def repeat_name(m):
        if len(m.graph.node) < 2:
            return False
        m.graph.node[1].name = m.graph.node[0].name

    def no_outputs(m):
        del m.graph.output[:]

    def input_type(m):
        inputs = [i for i in m.graph.input if i.type.tensor_type.elem_type]
        if not inputs:
            return False
        rng.choice(inputs).type.tensor_type.elem_type = rng.choice(
            [TensorProto.FLOAT16, TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING])

    for name, change in [("attribute-type", attr_type), ("attribute-negative", attr_negative),
                         ("zero-dim", zero_dim), ("initializer-no-data", no_data),
                         ("initializer-short", short_data), ("repeated-name", repeat_name),
                         ("no-outputs", no_outputs), ("input-type", input_type)]:
        variant(name, change)
    # A node name with an invalid UTF-8 byte, patched into the serialised bytes
    # (protobuf refuses to serialise invalid UTF-8 in a string field).
    named = [n.name for n in model.graph.node if len(n.name) >= 2]
    if named:
        data = model.SerializeToString()
        target = rng.choice(named).encode()
        out.append(("invalid-utf8-name", data.replace(target, b"\xff" + target[1:], 1)))
    return out


def checker_verdict(data):
    try:
        m = onnx.load_from_string(data)
        onnx.checker.check_model(m, full_check=True)
        return "ok"
    except Exception as e:  # the checker's reasons vary by version
        return "rejects: " + str(e).splitlines()[0][:100]


def run(pipe_opt, path, extra, limit):
    try:
        r = subprocess.run([pipe_opt, path, "--micro-batch-size=2"] + extra,
                           capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "timeout"
    if r.returncode < 0:
        return f"signal {-r.returncode}"
    return str(r.returncode) if r.returncode in (0, 1, 2) else f"status {r.returncode}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("pipe_opt")
    parser.add_argument("--per-model", type=int, default=3, help="rounds of mutants per model")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--time-limit", type=float, default=60)
    parser.add_argument("--kinds", default="", help="comma-separated kinds to run (default all)")
    parser.add_argument("--keep", default="", help="folder for the mutants that went wrong")
    args = parser.parse_args()
    kinds = set(filter(None, args.kinds.split(",")))
    bad_runs = []
    rng = random.Random(args.seed)
    models = sorted(p for p in glob.glob(os.path.join(root, "test/Fixtures/models/*.onnx"))
                    if os.path.getsize(p) < 2_000_000)
    tally = collections.defaultdict(collections.Counter)
    accepted_but_rejected = []
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for model_path in models:
            data = open(model_path, "rb").read()
            model = onnx.load_from_string(data)
            for round_ in range(args.per_model):
                mutants = byte_mutants(data, rng) + structural_mutants(model, rng)
                for kind, bytes_ in mutants:
                    if kinds and kind not in kinds:
                        continue
                    total += 1
                    path = os.path.join(tmp, f"m{total}.onnx")
                    with open(path, "wb") as f:
                        f.write(bytes_)
                    imported = run(args.pipe_opt, path, ["-o", os.devnull], args.time_limit)
                    planned = run(args.pipe_opt, path,
                                  ["--pipeline-stages=2", "--no-codegen", "--no-progress",
                                   "-o", os.path.join(tmp, "out")], args.time_limit)
                    tally[kind]["import " + imported] += 1
                    tally[kind]["plan " + planned] += 1
                    if {imported, planned} - {"0", "1", "2"}:
                        name = f"{os.path.basename(model_path)[:-5]}-{kind}-{round_}.onnx"
                        bad_runs.append((name, imported, planned))
                        if args.keep:
                            os.makedirs(args.keep, exist_ok=True)
                            with open(os.path.join(args.keep, name), "wb") as f:
                                f.write(bytes_)
                    if imported == "0" or planned == "0":
                        verdict = checker_verdict(bytes_)
                        if verdict != "ok":
                            accepted_but_rejected.append(
                                (os.path.basename(model_path), kind, imported, planned, verdict))
    print(f"{total} mutants of {len(models)} models, seed {args.seed}")
    print(f"{'kind':22} {'import: 0/1/2/other/signal/timeout':36} plan: 0/1/2/other/signal/timeout")
    bad = 0
    for kind in sorted(tally):
        c = tally[kind]
        row = []
        for what in ("import", "plan"):
            other = sum(v for k, v in c.items() if k.startswith(what + " status"))
            sig = sum(v for k, v in c.items() if k.startswith(what + " signal"))
            bad += other + sig + c[what + " timeout"]
            row.append(f"{c[what + ' 0']}/{c[what + ' 1']}/{c[what + ' 2']}/{other}/{sig}/"
                       f"{c[what + ' timeout']}")
        print(f"{kind:22} {row[0]:36} {row[1]}")
    print(f"crashes, other statuses and timeouts: {bad}")
    for name, imported, planned in bad_runs:
        print(f"  {name}: import {imported}, plan {planned}")
    print(f"accepted (exit 0) although ONNX's checker rejects them: {len(accepted_but_rejected)}")
    for entry in accepted_but_rejected:
        print("  " + " | ".join(entry))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
