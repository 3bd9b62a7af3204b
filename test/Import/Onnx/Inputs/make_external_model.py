#!/usr/bin/python3
"""Writes DIR/model.onnx whose two weights live in DIR/weights.bin (ONNX
external data), as exporters do for models over protobuf's 2 GiB limit.
With --unnamed the nodes carry no names and the weights stay in the file."""
import os
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

out_dir = sys.argv[1]
unnamed = "--unnamed" in sys.argv
os.makedirs(out_dir, exist_ok=True)
rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "fc1.weight")
w2 = numpy_helper.from_array(rng.standard_normal((32, 16)).astype(np.float32), "fc2.weight")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="" if unnamed else "fc1"),
     helper.make_node("Relu", ["h"], ["r"], name="" if unnamed else "relu"),
     helper.make_node("MatMul", ["r", "fc2.weight"], ["y"], name="" if unnamed else "fc2")],
    "external",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])],
    initializer=[w1, w2])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
if unnamed:
    onnx.save(model, os.path.join(out_dir, "model.onnx"))
else:
    onnx.save(model, os.path.join(out_dir, "model.onnx"), save_as_external_data=True,
              all_tensors_to_one_file=True, location="weights.bin", size_threshold=0)
