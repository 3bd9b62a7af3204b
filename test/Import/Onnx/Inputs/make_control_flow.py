#!/usr/bin/python3
"""Writes models with If, Loop and Scan for control-flow.test.

  make_control_flow.py values DIR   node-test folders (model.onnx and
      test_data_set_0/{input,output}_N.pb, the outputs computed here with
      numpy), which onnx_node_values.py checks through pipe-opt and pipe-run
  make_control_flow.py errors DIR   one NAME.onnx per refused model
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def const(name, value, dtype):
    return helper.make_node("Constant", [], [name], name=name,
                            value=numpy_helper.from_array(np.array(value, dtype=dtype)))


def info(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset=13, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def body(name, nodes, inputs, outputs, initializers=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(initializers))


def rnn_loop():
    """h <- tanh(h W), three times, every h kept as a scan output."""
    step = body("step", [
        helper.make_node("Identity", ["c"], ["c_out"], name="keep"),
        helper.make_node("MatMul", ["h_in", "w"], ["p"], name="matmul"),
        helper.make_node("Tanh", ["p"], ["h_out"], name="tanh"),
        helper.make_node("Identity", ["h_out"], ["s"], name="scan")],
        [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []), info("h_in", F, [1, 3])],
        [info("c_out", TensorProto.BOOL, []), info("h_out", F, [1, 3]), info("s", F, [1, 3])])
    m = model([const("m", 3, np.int64),
               helper.make_node("Loop", ["m", "", "h0"], ["h", "hs"], name="loop", body=step)],
              [info("w", F, [3, 3]), info("h0", F, [1, 3])],
              [info("h", F, [1, 3]), info("hs", F, [3, 1, 3])])
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 3)).astype(np.float32) * 0.5
    h = rng.standard_normal((1, 3)).astype(np.float32)
    inputs = [w, h]
    states = []
    for _ in range(3):
        h = np.tanh(h @ w)
        states.append(h)
    return m, inputs, [h, np.stack(states)]


def loop_until():
    """No trip count: the body's condition, i + 1 < 2 folded from the
    iteration number, ends the loop after two iterations."""
    twice = body("twice", [
        const("one", 1, np.int64), const("two", 2, np.int64),
        helper.make_node("Add", ["j", "one"], ["next"], name="next"),
        helper.make_node("Less", ["next", "two"], ["d_out"], name="less"),
        helper.make_node("Mul", ["g_in", "g_in"], ["g_out"], name="square"),
        helper.make_node("Identity", ["g_out"], ["s"], name="scan")],
        [info("j", TensorProto.INT64, []), info("d", TensorProto.BOOL, []), info("g_in", F, [2])],
        [info("d_out", TensorProto.BOOL, []), info("g_out", F, [2]), info("s", F, [2])])
    m = model([helper.make_node("Loop", ["", "", "g0"], ["g", "gs"], name="loop", body=twice)],
              [info("g0", F, [2])], [info("g", F, [2]), info("gs", F, [2, 2])])
    g0 = np.array([0.9, -1.2], np.float32)
    return m, [g0], [g0 ** 4, np.stack([g0 ** 2, g0 ** 4])]


def scan_reverse():
    """Scan over the columns of x from the last, the running sums stacked as
    columns (opset 11)."""
    cumulate = body("cumulate", [
        helper.make_node("Add", ["acc", "col"], ["acc_out"], name="add"),
        helper.make_node("Mul", ["acc_out", "col"], ["y"], name="mul")],
        [info("acc", F, [2]), info("col", F, [2])], [info("acc_out", F, [2]), info("y", F, [2])])
    m = model([helper.make_node("Scan", ["s0", "x"], ["s", "ys"], name="scan", body=cumulate,
                                num_scan_inputs=1, scan_input_axes=[-1],
                                scan_input_directions=[1], scan_output_axes=[1])],
              [info("s0", F, [2]), info("x", F, [2, 3])], [info("s", F, [2]), info("ys", F, [2, 3])],
              opset=11)
    rng = np.random.default_rng(2)
    s0 = rng.standard_normal(2).astype(np.float32)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    acc, ys = s0, []
    for t in (2, 1, 0):
        acc = acc + x[:, t]
        ys.append(acc * x[:, t])
    return m, [s0, x], [acc, np.stack(ys, axis=1)]


def scan_batched():
    """Opset 8: a batch dim first, each row scanned on its own, reversed."""
    cumulate = body("cumulate", [
        helper.make_node("Add", ["acc", "row"], ["acc_out"], name="add"),
        helper.make_node("Tanh", ["acc_out"], ["y"], name="tanh")],
        [info("acc", F, [2]), info("row", F, [2])], [info("acc_out", F, [2]), info("y", F, [2])])
    m = model([helper.make_node("Scan", ["", "s0", "x"], ["s", "ys"], name="scan", body=cumulate,
                                num_scan_inputs=1, directions=[1])],
              [info("s0", F, [2, 2]), info("x", F, [2, 3, 2])],
              [info("s", F, [2, 2]), info("ys", F, [2, 3, 2])], opset=8)
    rng = np.random.default_rng(3)
    s0 = rng.standard_normal((2, 2)).astype(np.float32)
    x = rng.standard_normal((2, 3, 2)).astype(np.float32)
    finals, outs = [], []
    for b in range(2):
        acc, ys = s0[b], []
        for t in (2, 1, 0):
            acc = acc + x[b, t]
            ys.append(np.tanh(acc))
        finals.append(acc)
        outs.append(np.stack(ys))
    return m, [s0, x], [np.stack(finals), np.stack(outs)]


def if_else():
    """A constant false condition: the else branch, which reads x from the
    outer graph."""
    then_g = body("then_g", [helper.make_node("Relu", ["x"], ["t"], name="relu")], [],
                  [info("t", F, [2, 3])])
    else_g = body("else_g", [helper.make_node("Sigmoid", ["x"], ["sx"], name="sigmoid"),
                             helper.make_node("Mul", ["x", "sx"], ["e"], name="mul")], [],
                  [info("e", F, [2, 3])])
    m = model([const("c", False, np.bool_),
               helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                                else_branch=else_g)],
              [info("x", F, [2, 3])], [info("y", F, [2, 3])])
    x = np.random.default_rng(4).standard_normal((2, 3)).astype(np.float32)
    return m, [x], [x / (1 + np.exp(-x))]


def write_values(folder):
    for name, make in [("rnn_loop", rnn_loop), ("loop_until", loop_until),
                       ("scan_reverse", scan_reverse), ("scan_batched", scan_batched),
                       ("if_else", if_else)]:
        m, inputs, outputs = make()
        onnx.checker.check_model(m)
        data = os.path.join(folder, "test_cf_" + name, "test_data_set_0")
        os.makedirs(data)
        onnx.save(m, os.path.join(folder, "test_cf_" + name, "model.onnx"))
        for kind, arrays in (("input", inputs), ("output", outputs)):
            for i, array in enumerate(arrays):
                tensor = numpy_helper.from_array(np.asarray(array, np.float32))
                with open(os.path.join(data, f"{kind}_{i}.pb"), "wb") as f:
                    f.write(tensor.SerializeToString())


def step_body(nodes, cond_from_data=False, initializers=()):
    """A loop body over h (float): (i, c, h_in) -> (c_out, h_out), c_out
    being c unless the nodes compute it."""
    nodes = list(nodes)
    if not cond_from_data:
        nodes.insert(0, helper.make_node("Identity", ["c"], ["c_out"], name="keep"))
    return body("step", nodes, [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []),
                                info("h_in", F, None)],
                [info("c_out", TensorProto.BOOL, []), info("h_out", F, None)], initializers)


def carry_loop(step, trip=None, trip_input=False):
    """A loop of `step` over h0 (float [1, 2]): a constant trip count, one
    given as a graph input, or none."""
    main, inputs, m = [], [info("h0", F, [1, 2])], ""
    if trip is not None:
        main.append(const("m", trip, np.int64))
        m = "m"
    if trip_input:
        inputs.append(info("m", TensorProto.INT64, []))
        m = "m"
    main.append(helper.make_node("Loop", [m, "", "h0"], ["h"], name="loop", body=step))
    return model(main, inputs, [info("h", F, None)])


def write_errors(folder):
    os.makedirs(folder, exist_ok=True)
    then_g = body("then_g", [helper.make_node("Relu", ["x"], ["t"], name="relu")], [],
                  [info("t", F, [2])])
    else_g = body("else_g", [helper.make_node("Neg", ["x"], ["e"], name="neg")], [],
                  [info("e", F, [2])])
    models = {
        # The branch would depend on data.
        "if_data_cond": model(
            [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then_g,
                              else_branch=else_g)],
            [info("c", TensorProto.BOOL, []), info("x", F, [2])], [info("y", F, [2])]),
        # The trip count is a graph input.
        "loop_data_trip": carry_loop(step_body([helper.make_node("Neg", ["h_in"], ["h_out"])]),
                                     trip_input=True),
        # The condition is computed from the carried value.
        "loop_data_cond": carry_loop(step_body([
            helper.make_node("Neg", ["h_in"], ["h_out"], name="neg"),
            helper.make_node("ReduceSum", ["h_out"], ["total"], name="sum", keepdims=0),
            const("zero", 0.0, np.float32),
            helper.make_node("Greater", ["total", "zero"], ["c_out"], name="positive")],
            cond_from_data=True), trip=4),
        "loop_too_long": carry_loop(step_body([helper.make_node("Neg", ["h_in"], ["h_out"])]),
                                    trip=5000),
        # No trip count and a condition that stays true.
        "loop_forever": carry_loop(step_body([helper.make_node("Neg", ["h_in"], ["h_out"])])),
        # A constant inside the body given as the body's initializer.
        "body_initializer": carry_loop(step_body(
            [helper.make_node("Add", ["h_in", "bias"], ["h_out"], name="add")],
            initializers=[numpy_helper.from_array(np.ones((1, 2), np.float32), "bias")]), trip=2),
        # A node name in a body that is not UTF-8 (the marker is replaced below).
        "body_bad_name": carry_loop(step_body(
            [helper.make_node("Neg", ["h_in"], ["h_out"], name="bad_name_marker")]), trip=2),
        # Carried and scanned values that change shape between iterations.
        "scan_shapes_differ": model(
            [const("m", 2, np.int64),
             helper.make_node("Loop", ["m", "", "h0"], ["h", "hs"], name="loop", body=body(
                 "grow", [helper.make_node("Identity", ["c"], ["c_out"], name="keep"),
                          helper.make_node("Concat", ["h_in", "h_in"], ["h_out"], name="cat",
                                           axis=1),
                          helper.make_node("Identity", ["h_out"], ["s"], name="scan")],
                 [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []),
                  info("h_in", F, None)],
                 [info("c_out", TensorProto.BOOL, []), info("h_out", F, None), info("s", F, None)]))],
            [info("h0", F, [1, 2])], [info("h", F, None), info("hs", F, None)]),
        # Unsupported ops inside a body and outside are reported together.
        "body_unsupported": model(
            [const("m", 2, np.int64),
             helper.make_node("Loop", ["m", "", "h0"], ["h"], name="loop", body=body(
                 "step", [helper.make_node("Identity", ["c"], ["c_out"], name="keep"),
                          helper.make_node("Unique", ["h_in"], ["d"], name="unique"),
                          helper.make_node("Add", ["h_in", "d"], ["h_out"], name="add")],
                 [info("i", TensorProto.INT64, []), info("c", TensorProto.BOOL, []),
                  info("h_in", F, [2, 2])],
                 [info("c_out", TensorProto.BOOL, []), info("h_out", F, [2, 2])])),
             helper.make_node("NonMaxSuppression", ["h", "idx"], ["u"], name="nms")],
            [info("h0", F, [2, 2]), info("idx", TensorProto.INT64, [2, 2])], [info("u", F, None)]),
    }
    for name, m in models.items():
        data = m.SerializeToString()
        if name == "body_bad_name":
            data = data.replace(b"bad_name_marker", b"bad\xffname_marker")
        with open(os.path.join(folder, name + ".onnx"), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    {"values": write_values, "errors": write_errors}[sys.argv[1]](sys.argv[2])
