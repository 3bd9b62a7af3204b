#!/usr/bin/python3
"""Runs ONNX backend node tests through pipe-opt and pipe-run and checks the
values: every output against the test's reference output, and the gradient
against central differences of the program's own forward.

  onnx_node_values.py PIPE_OPT PIPE_RUN NODE_TEST_DIR [--every N] [--only REGEX]
                      [--min-checked N] [--verbose]

Each test's model is rewritten into a training graph whose loss is output 0:
  - integer inputs become initializers (as in onnx_node_tests.py), float inputs
    become trainable initializers holding the test's input values; a model
    whose only floating-point type is double runs in float32;
  - every output k is cast to float and weighted by a random tensor W_k that is
    itself a trainable initializer; the loss is sum_k sum(W_k * output_k).
pipe-opt plans it on one GPU with --loss=output, and pipe-run runs one step
with --save-grads. The gradient of the loss in W_k is output_k itself, so the
saved gradients give every output element, compared with the reference to
1e-4 relative (outputs are fp32 sums on both sides).

The gradient in the inputs is checked at a jittered point x' (away from the
kinks of relu, abs, max...) along a random direction v: <g(x'), v> against
(L(x' + t v) - L(x' - t v)) / 2t, with the same program run on copies of the
model file whose input bytes differ (pipe-run reads parameters at the offsets
pipe-opt found, so the copies must keep the layout). Where the differences at
t and t/4 disagree, the loss is not smooth there (a floor, a comparison, an
argmax) and the gradient is not checked; otherwise they must agree with the
program's gradient to 1e-2 relative.

Exit status 0 when no test fails and at least --min-checked tests were
checked.
"""
import json
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_node_tests as types  # noqa: E402  (the same selection and bindings)

FORWARD_TOLERANCE = 1e-4
GRADIENT_TOLERANCE = 1e-2
STEP = 1e-2
JITTER = 1e-3


# What pipe-opt refuses on purpose for a program that runs, by its message.
REFUSALS = {
    "which the runtime cannot hold": "an element type the runtime does not hold",
    "uses its updated running statistics as values": "running statistics as outputs",
    "with storage_order 1 cannot run": "MaxPool indices in column-major order",
    "has dtype bf16, expected": "a bf16 cast (the CPU kernels compute in f32 and f64)",
}
# References that follow a reading of the op that PyTorch and onnxruntime do
# not: the test is skipped with the reason.
WRONG_REFERENCES = {
    "test_maxunpool_export_with_output_shape":
        "reference reads the indices in the inferred shape, not output_shape (onnx/onnx#2398)",
}
# Outputs drawn at random: no reference can match them.
RANDOM = re.compile(r"test_training_dropout(?!_zero_ratio)")


class Skip(Exception):
    """The test cannot be value-checked here, for the reason given."""


def run(args, cwd):
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=cwd)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines() or ["(no message)"]
        raise RuntimeError(f"{os.path.basename(args[0])}: {lines[-1]}")
    return proc


def training_model(test_dir, rng):
    """The test's model with its inputs bound and a scalar loss as output 0;
    the float inputs' names and values, the weights, and the reference outputs."""
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    data_dir = os.path.join(test_dir, "test_data_set_0")
    graph = model.graph
    as_float = in_float32(model)
    params = {}
    for index, info in enumerate(types.graph_inputs(model)):
        path = os.path.join(data_dir, f"input_{index}.pb")
        if not os.path.exists(path):
            raise Skip("no input data")
        tensor = types.load_tensor(path)
        elem = info.type.tensor_type.elem_type
        if elem in types.INT_TYPES or types.feeds_attribute(model, info.name):
            types.bind(model, info, tensor)
            continue
        if elem != onnx.TensorProto.FLOAT and not (as_float and elem == onnx.TensorProto.DOUBLE):
            raise Skip(f"{onnx.TensorProto.DataType.Name(elem).lower()} input (fp32 runtime)")
        value = numpy_helper.to_array(tensor).astype(np.float32)
        if value.size == 0:
            raise Skip("empty input")
        params[info.name] = value
        graph.input.remove(info)
        graph.initializer.append(numpy_helper.from_array(value, info.name))
    references, terms = [], []
    for index, output in enumerate(list(graph.output)):
        path = os.path.join(data_dir, f"output_{index}.pb")
        if not os.path.exists(path):
            raise Skip("no reference output")
        reference = numpy_helper.to_array(types.load_tensor(path))
        if as_float and reference.dtype == np.float64:
            reference = reference.astype(np.float32)
        if reference.dtype.kind not in "biuf" or reference.dtype == np.float64 \
                or reference.dtype == np.float16:
            raise Skip(f"{reference.dtype} output (fp32 runtime)")
        reference = reference.astype(np.float64)
        if not np.all(np.isfinite(reference)):
            raise Skip("reference output not finite")
        if reference.size == 0:
            raise Skip("empty output")
        weight = rng.standard_normal(reference.shape).astype(np.float32)
        name = f"__weight{index}"
        graph.initializer.append(numpy_helper.from_array(weight, name))
        source = output.name
        if output.type.tensor_type.elem_type != onnx.TensorProto.FLOAT:
            graph.node.append(helper.make_node("Cast", [source], [f"__float{index}"],
                                               to=onnx.TensorProto.FLOAT))
            source = f"__float{index}"
        graph.node.append(helper.make_node("Mul", [source, name], [f"__weighted{index}"]))
        graph.node.append(helper.make_node("ReduceSum", [f"__weighted{index}"],
                                           [f"__term{index}"], keepdims=0))
        terms.append(f"__term{index}")
        references.append((name, reference, weight))
    loss = terms[0]
    for index, term in enumerate(terms[1:]):
        graph.node.append(helper.make_node("Add", [loss, term], [f"__sum{index}"]))
        loss = f"__sum{index}"
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(loss, onnx.TensorProto.FLOAT, []))
    # Mul before opset 7 has the old broadcast attribute; 7 selects the same
    # version of every op that a test of opset 6 or less can use here.
    for opset in model.opset_import:
        if opset.domain in ("", "ai.onnx") and opset.version < 7:
            opset.version = 7
    return model, params, references


def in_float32(model):
    """Rewrites a model whose only floating-point type is double to float32
    (its inputs, outputs and initializers), for the fp32 runtime; whether it
    did. Not when a node names an element type (Cast's `to`, a dtype)."""
    def float_types(value_infos):
        return {v.type.tensor_type.elem_type for v in value_infos}
    graph = model.graph
    elems = float_types(graph.input) | float_types(graph.output) | \
        {t.data_type for t in graph.initializer}
    floats = elems & {onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                      onnx.TensorProto.BFLOAT16}
    if floats != {onnx.TensorProto.DOUBLE} or any(
            a.name in ("to", "dtype") for n in graph.node for a in n.attribute):
        return False
    for value in list(graph.input) + list(graph.output):
        if value.type.tensor_type.elem_type == onnx.TensorProto.DOUBLE:
            value.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    for tensor in graph.initializer:
        if tensor.data_type == onnx.TensorProto.DOUBLE:
            tensor.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(tensor).astype(np.float32), tensor.name))
    return True


def with_params(model, values):
    """A copy of `model` whose float initializers hold `values` (same sizes, so
    the same byte layout)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for tensor in copy.graph.initializer:
        if tensor.name in values:
            tensor.CopyFrom(numpy_helper.from_array(values[tensor.name], tensor.name))
    return copy


def check_one(pipe_opt, pipe_run, test_dir, scratch):
    """None when the values agree; else ("skip"|"fail", reason)."""
    rng = np.random.default_rng(len(os.path.basename(test_dir)))
    if RANDOM.match(os.path.basename(test_dir)):
        return ("skip", "random outputs")
    if os.path.basename(test_dir) in WRONG_REFERENCES:
        return ("skip", WRONG_REFERENCES[os.path.basename(test_dir)])
    try:
        model, params, references = training_model(test_dir, rng)
    except Skip as skip:
        return ("skip", str(skip))
    path = os.path.join(scratch, "model.onnx")
    onnx.save(model, path)
    out = os.path.join(scratch, "out")

    def loss_and_grads(values, grads=False):
        onnx.save(with_params(model, values), os.path.join(scratch, "variant.onnx"))
        args = [pipe_run, out, "--steps", "1", "--model", "variant.onnx", "--summary", "s.json"]
        if grads:
            args += ["--save-grads", "g.npz"]
        run(args, scratch)
        with open(os.path.join(scratch, "s.json")) as f:
            loss = json.load(f)["loss"][0]
        loss = float("nan") if loss is None else loss  # JSON has no NaN
        if not grads:
            return loss, None
        with np.load(os.path.join(scratch, "g.npz")) as npz:
            return loss, {k: npz[k].astype(np.float64) for k in npz.files}

    try:
        run([pipe_opt, "model.onnx", "--loss=output", "--pipeline-stages=1",
             "--allow-inference-export", "-o", "out"], scratch)
        _, grads = loss_and_grads(params, grads=True)
    except RuntimeError as error:
        for message, reason in REFUSALS.items():
            if message in str(error):
                return ("skip", reason)
        return ("fail", str(error))
    for name, reference, weight in references:
        got = grads.get(name)
        if got is None or got.shape != reference.shape:
            return ("fail", f"output {name[8:]}: no value of shape {reference.shape}")
        error = np.abs(got - reference)
        bound = FORWARD_TOLERANCE * (np.abs(reference) + np.abs(reference).mean() + 1e-6)
        if np.any(error > bound):
            k = np.unravel_index(np.argmax(error - bound), error.shape)
            return ("fail", f"output {name[8:]} at {tuple(int(i) for i in k)}: "
                    f"{got[k]:.7g}, reference {reference[k]:.7g}")
    # The gradient in the trainable inputs (not batch-norm's statistics), at a
    # jittered point along a random direction.
    with open(os.path.join(out, "program.json")) as f:
        trainable = {p["name"] for p in json.load(f)["parameters"] if p["trainable"]}
    params = {k: v for k, v in params.items() if k in trainable}
    if not params:
        return None
    point, direction = {}, {}
    for name, value in params.items():
        scale = max(float(np.sqrt(np.mean(value.astype(np.float64) ** 2))), 1e-3)
        point[name] = (value + JITTER * scale * rng.standard_normal(value.shape)).astype(np.float32)
        direction[name] = scale * rng.standard_normal(value.shape)
    try:
        base, grads = loss_and_grads(point, grads=True)

        def difference(t):
            plus = {k: (point[k] + t * direction[k]).astype(np.float32) for k in point}
            minus = {k: (point[k] - t * direction[k]).astype(np.float32) for k in point}
            return (loss_and_grads(plus)[0] - loss_and_grads(minus)[0]) / (2 * t)
        coarse, fine = difference(STEP), difference(STEP / 4)
    except RuntimeError as error:
        return ("fail", str(error))
    # An input the loss does not depend on (Shape's) has no gradient saved.
    analytic = sum(float(np.sum(grads[k] * direction[k])) for k in params if k in grads)
    scale = abs(analytic) + abs(coarse) + 1e-3 * (abs(base) + 1)
    if not (np.isfinite(coarse) and np.isfinite(fine)) or \
            abs(coarse - fine) > GRADIENT_TOLERANCE * scale:
        return ("forward only", "the loss is not smooth there")
    if abs(analytic - fine) > GRADIENT_TOLERANCE * scale:
        return ("fail", f"gradient along a random direction {analytic:.7g}, "
                f"central differences {fine:.7g} (t={STEP / 4:g}) and {coarse:.7g} (t={STEP:g})")
    return None


def main():
    pipe_opt, pipe_run, node_dir = (os.path.abspath(a) for a in sys.argv[1:4])
    verbose = "--verbose" in sys.argv
    every = types.option("--every", 1)
    only = types.option("--only", None, re.compile)
    min_checked = types.option("--min-checked", 0)
    chosen = [name for name in types.supported_tests(pipe_opt, node_dir)
              if types.expected_unsupported(name) is None and (not only or only.search(name))]
    chosen = chosen[::every]
    results = types.run_each(
        chosen, node_dir, lambda test_dir, folder: check_one(pipe_opt, pipe_run, test_dir, folder))
    counts = {"checked": 0, "forward only": 0, "skip": 0, "fail": 0}
    skips = {}
    for name, result in zip(chosen, results):
        kind = "checked" if result is None else result[0]
        counts[kind] += 1
        if kind == "skip":
            skips[result[1]] = skips.get(result[1], 0) + 1
        if kind == "fail" or (verbose and result is not None):
            print(f"{kind.upper()} {name}: {result[1]}")
        elif verbose:
            print(f"CHECKED {name}")
    for reason, count in sorted(skips.items(), key=lambda item: -item[1]):
        print(f"  not checked, {reason}: {count}")
    sampled = f" (one in {every})" if every > 1 else ""
    print(f"onnx node values: {counts['checked']} outputs and gradients agree, "
          f"{counts['forward only']} outputs agree (gradient not smooth there), "
          f"{counts['fail']} failed, {counts['skip']} not checked{sampled}")
    checked = counts["checked"] + counts["forward only"]
    if checked < min_checked:
        print(f"onnx node values: {checked} checked, fewer than the {min_checked} expected")
        return 1
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
