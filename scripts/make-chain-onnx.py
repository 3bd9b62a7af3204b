#!/usr/bin/python3
"""A long chain model for timing the main job: N nodes of MatMul + Add + Relu blocks
(small tensors), written as ONNX with its weights.

  scripts/make-chain-onnx.py NODES OUT.onnx [--width 16] [--batch 4]

Then e.g. `/usr/bin/time build/bin/pipe-opt OUT.onnx --pipeline-stages=8 -o out`.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("nodes", type=int, help="nodes in the graph (a multiple of 3 is exact)")
    parser.add_argument("out")
    parser.add_argument("--width", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"
    for b in range(max(1, args.nodes // 3)):
        w, bias = f"w{b}", f"b{b}"
        inits.append(numpy_helper.from_array(
            (rng.standard_normal((args.width, args.width)) / np.sqrt(args.width)).astype(np.float32), w))
        inits.append(numpy_helper.from_array(np.zeros(args.width, np.float32), bias))
        nodes.append(helper.make_node("MatMul", [x, w], [f"m{b}"], name=f"matmul{b}"))
        nodes.append(helper.make_node("Add", [f"m{b}", bias], [f"a{b}"], name=f"add{b}"))
        nodes.append(helper.make_node("Relu", [f"a{b}"], [f"r{b}"], name=f"relu{b}"))
        x = f"r{b}"
    graph = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [args.batch, args.width])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [args.batch, args.width])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, args.out)


if __name__ == "__main__":
    main()
