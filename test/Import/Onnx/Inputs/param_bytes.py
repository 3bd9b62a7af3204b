#!/usr/bin/python3
"""Checks that every nn.param that pipe-opt printed for MODEL points at the
initializer's own bytes: the byte range [offset, offset + length) of the
model file (or of its external-data file) equals the initializer's data.

  param_bytes.py MODEL < pipe-opt-output.mlir
Prints `checked N parameters` and exits non-zero on the first mismatch.
"""
import os
import re
import sys

import onnx
from onnx import numpy_helper

PARAM = re.compile(r'nn\.param "([^"]+)" \{([^}]*)\}')


def attributes(text):
    out = {}
    for key, value in re.findall(r'(\w+) = ("[^"]*"|-?\d+|#nn\.param_source<\w+>)', text):
        enum = re.fullmatch(r'#nn\.param_source<(\w+)>', value)
        out[key] = enum.group(1) if enum else value.strip('"')
    return out


def main():
    model_path = sys.argv[1]
    model = onnx.load(model_path)  # loads external data too
    expected = {t.name: numpy_helper.to_array(t).tobytes() for t in model.graph.initializer}
    checked = 0
    for name, attrs in PARAM.findall(sys.stdin.read()):
        a = attributes(attrs)
        source = a.get("source")
        if source == "file":
            path = model_path
        elif source == "external":
            path = os.path.join(os.path.dirname(model_path), a["path"])
        else:
            print(f"parameter {name}: source {source} has no bytes to check")
            return 1
        offset, length = int(a["offset"]), int(a["length"])
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(length)
        if data != expected[name]:
            print(f"parameter {name}: bytes [{offset}, {offset + length}) of {path} differ")
            return 1
        checked += 1
    print(f"checked {checked} parameters")
    return 0 if checked else 1


if __name__ == "__main__":
    sys.exit(main())
