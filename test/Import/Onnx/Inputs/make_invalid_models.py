#!/usr/bin/python3
"""Writes binary ONNX models that ONNX's checker rejects, or whose external data
lies outside the model's folder, into DIR (one small MatMul model each):

  DIR/<case>.onnx             malformed initializers, names, attributes
  DIR/models/<case>.onnx      external data: inside the folder, or escaping it
  DIR/models/w.bin, DIR/secret/secret.bin, DIR/models/link -> ../secret/secret.bin
"""
import os
import sys

import onnx
from onnx import helper, TensorProto

out_dir = sys.argv[1]
os.makedirs(os.path.join(out_dir, "models", "sub"), exist_ok=True)
os.makedirs(os.path.join(out_dir, "secret"), exist_ok=True)


def weight(data=True):
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4], [1.0] * 16)
    if not data:
        w.ClearField("float_data")
    return w


def model(nodes=None, initializers=None):
    nodes = nodes or [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        initializers if initializers is not None else [weight()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def save(m, name, replace=None):
    data = m.SerializeToString()
    if replace:  # bytes protobuf's Python API refuses to put into a string field
        old, new = replace
        assert len(old) == len(new) and data.count(old) == 1
        data = data.replace(old, new)
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)


# A node name that is not UTF-8 (a bit flip in a name).
m = model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mmXX")])
save(m, "invalid-utf8-name.onnx", (b"mmXX", b"mm\xff\xfe"))

# Two nodes with one name.
save(model([helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
            helper.make_node("Relu", ["h"], ["y"], name="mm")]), "duplicate-node-name.onnx")

# An initializer with no data at all.
save(model(initializers=[weight(data=False)]), "no-data.onnx")

# external_data entries while data_location says the data is in the model.
w = weight(data=False)
w.external_data.append(onnx.StringStringEntryProto(key="location", value="w.bin"))
save(model(initializers=[w]), "external-entries-default.onnx")

# Values both in raw_data and in float_data.
w = weight()
w.raw_data = b"\0" * 64
save(model(initializers=[w]), "raw-and-typed.onnx")

# The same initializer twice.
save(model(initializers=[weight(), weight()]), "duplicate-initializer.onnx")

# An attribute declared INT whose value is in the float field.
node = helper.make_node("Gemm", ["x", "w"], ["y"], name="gemm", transB=1)
node.attribute[0].ClearField("i")
node.attribute[0].f = 1.0
save(model([node]), "attribute-declared-int-holds-float.onnx")


def external(location, name):
    w = weight(data=False)
    w.data_location = TensorProto.EXTERNAL
    for key, value in [("location", location), ("offset", "0"), ("length", "64")]:
        w.external_data.append(onnx.StringStringEntryProto(key=key, value=value))
    return model(initializers=[w]), os.path.join("models", name)


with open(os.path.join(out_dir, "models", "w.bin"), "wb") as f:
    f.write(b"\0" * 64)
with open(os.path.join(out_dir, "secret", "secret.bin"), "wb") as f:
    f.write(b"\0" * 4096)
link = os.path.join(out_dir, "models", "link")
if not os.path.lexists(link):
    os.symlink(os.path.join("..", "secret", "secret.bin"), link)
inner_link = os.path.join(out_dir, "models", "inner-link")
if not os.path.lexists(inner_link):
    os.symlink("w.bin", inner_link)
secret = os.path.abspath(os.path.join(out_dir, "secret", "secret.bin"))
for location, name in [("w.bin", "inside.onnx"), ("inner-link", "inner-link.onnx"),
                       ("../secret/secret.bin", "parent.onnx"),
                       ("sub/../../secret/secret.bin", "parent-through-sub.onnx"),
                       ("sub/../w.bin", "dotdot-inside.onnx"),
                       (secret, "absolute.onnx"), ("link", "symlink-out.onnx"),
                       (".", "dot.onnx"), ("w.binNUL", "nul.onnx")]:
    m, path = external(location, name)
    save(m, path, (b"w.binNUL", b"w.bin\0xx") if location == "w.binNUL" else None)
