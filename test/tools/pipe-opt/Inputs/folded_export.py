"""Writes a small model as a folded inference export leaves it: a weight named by
the exporter (onnx::MatMul_7) and a tied weight stored twice (embedding and head)."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)
tied = rng.standard_normal((16, 16)).astype(np.float32)
folded = rng.standard_normal((16, 16)).astype(np.float32)
initializers = [numpy_helper.from_array(tied, "embed.weight"),
                numpy_helper.from_array(tied.copy(), "head.weight"),
                numpy_helper.from_array(folded, "onnx::MatMul_7")]
nodes = [helper.make_node("MatMul", ["x", "embed.weight"], ["a"]),
         helper.make_node("MatMul", ["a", "onnx::MatMul_7"], ["b"]),
         helper.make_node("MatMul", ["b", "head.weight"], ["y"])]
graph = helper.make_graph(nodes, "folded",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])],
                          initializers)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(model, sys.argv[1])
