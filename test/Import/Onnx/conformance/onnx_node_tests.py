#!/usr/bin/python3
"""Imports every ONNX backend node test whose ops pipe-opt supports and checks
that the inferred output shapes and element types equal the reference outputs'.

Integer-typed graph inputs (shapes, indices, axes, bounds) are turned into
initializers holding the test's own input values, as a user binds such values
before planning; float inputs stay function arguments.

  onnx_node_tests.py PIPE_OPT NODE_TEST_DIR [--verbose] [--every N] [--min-passed N]
Tests with ops that are not imported are listed by reason (UNSUPPORTED_OPS);
an op without a reason fails the run.
Exit status 0 when every supported test imports with the right shapes, and at
least --min-passed of them pass (the count the plain lit run expects, so that
losing an op fails). --every N runs one supported test in N (in name order; the
sanitizer run, where each import costs ten times more, uses it); without it,
every one.
"""
import concurrent.futures
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import numpy_helper

# Tests whose models use a supported op in a form the importer rejects on
# purpose, with the reason. Any other failure fails this test.
EXPECTED_UNSUPPORTED = {
    # Softmax/LogSoftmax before opset 13 flatten the input at `axis`.
    r"test_(log)?softmax_(axis_0|axis_1|default_axis)_expanded$": "opset < 13 flattening",
    r"test_(log)?softmax_(axis_0|axis_1|default_axis)$": "opset < 13 flattening",
    # Only bool/int/float element types; strings have no place in training graphs.
    r".*string.*": "string tensors",
    # Sequences and optionals are outside a graph of tensors.
    r"(?!test_(gru|rnn)_seq_length).*_seq.*|.*sequence.*|.*optional.*|test_identity_opt$":
        "sequence/optional types",
    # Float bounds given as graph inputs make the length data-dependent.
    r"test_range_float_type_positive_delta$": "data-dependent output length",
    # OneHot's depth is a float graph input there: the output shape would depend on it.
    r"test_onehot_": "data-dependent output shape (depth is a graph input)",
    # The expanded Range computes its Loop's trip count in floating point; the
    # importer folds integer shape arithmetic only, so the count stays unknown.
    r"test_range_.*_expanded$": "trip count computed in floating point",
    # An input without elements (a dim of 0) cannot be trained on.
    r"test_reshape_allowzero_reordered$|test_split_zero_size_splits$": "empty input tensor",
}

# Why each op the node tests use is not imported. A new test with an op that
# is in no entry fails the run: every unsupported test is accounted for.
UNSUPPORTED_OPS = {
    "strings: no place in a training graph of tensors": (
        "StringNormalizer", "TfIdfVectorizer"),
    "sequences and optionals: outside a graph of tensors": (
        "SequenceEmpty", "SequenceInsert", "SequenceLength", "SequenceMap",
        "SequenceAt", "SequenceConstruct", "Optional", "OptionalGetElement",
        "OptionalHasElement"),
    "quantized integer arithmetic: an inference format, not trained": (
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "ConvInteger",
        "MatMulInteger", "QLinearConv", "QLinearMatMul"),
    "optimizer steps inside the graph: pipe-opt adds its own optimizer": (
        "Adagrad", "Adam", "Momentum", "ai.onnx.preview.training.Adagrad",
        "ai.onnx.preview.training.Adam", "ai.onnx.preview.training.Momentum"),
    "random draws besides Dropout's mask (the one a training graph uses): not imported": (
        "Bernoulli", "RandomUniformLike"),
    "output shape depends on the values (detections, unique elements)": (
        "NonMaxSuppression", "Unique"),
}

INT_TYPES = {onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT8,
             onnx.TensorProto.INT16, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
             onnx.TensorProto.UINT32, onnx.TensorProto.UINT64, onnx.TensorProto.BOOL}

MLIR_TYPES = {
    onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64",
    onnx.TensorProto.FLOAT16: "f16", onnx.TensorProto.BFLOAT16: "bf16",
    onnx.TensorProto.INT8: "i8", onnx.TensorProto.INT16: "i16",
    onnx.TensorProto.INT32: "i32", onnx.TensorProto.INT64: "i64",
    onnx.TensorProto.UINT8: "ui8", onnx.TensorProto.UINT16: "ui16",
    onnx.TensorProto.UINT32: "ui32", onnx.TensorProto.UINT64: "ui64",
    onnx.TensorProto.BOOL: "i1",
}


def expected_unsupported(name):
    for pattern, reason in EXPECTED_UNSUPPORTED.items():
        if re.match(pattern, name, re.I):
            return reason
    return None


def load_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return tensor


def result_types(mlir_text):
    """The result types of @main, in order."""
    match = re.search(r"func\.func @main\(.*?\)\s*->\s*(.*?)\s*\{\s*$", mlir_text, re.M)
    if not match:
        return []
    text = match.group(1).strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return re.findall(r"tensor<([^>]*)>", text)


def reference_type(tensor, declared_element):
    """Shape from the reference data, element type from the model's output
    declaration (ONNX 1.12's test data stores bfloat16 outputs as uint16)."""
    dims = "x".join(str(d) for d in tensor.dims)
    element = MLIR_TYPES.get(declared_element, "?")
    return f"{dims}x{element}" if dims else element


# Float operands that say how to compute rather than what: the user's export
# holds them as constants (torch writes Resize's scales, Clip's bounds, Pad's
# value and Dropout's ratio as Constant nodes).
ATTRIBUTE_OPERANDS = {"Resize": (1, 2, 3), "Upsample": (1,), "Clip": (1, 2), "Pad": (2,),
                      "Dropout": (1,), "MelWeightMatrix": (3, 4)}


def graph_inputs(model):
    """The graph inputs that are not initializers, in order."""
    initializers = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in initializers]


def feeds_attribute(model, name):
    """Whether some node reads `name` as one of ATTRIBUTE_OPERANDS."""
    for node in model.graph.node:
        for position in ATTRIBUTE_OPERANDS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position] == name:
                return True
    return False


def bind(model, info, tensor):
    """Replaces graph input `info` by `tensor`: a Constant node when it feeds an
    attribute-like operand, else an initializer."""
    tensor.name = info.name
    model.graph.input.remove(info)
    if feeds_attribute(model, info.name):
        tensor.name = ""
        model.graph.node.insert(0, onnx.helper.make_node("Constant", [], [info.name],
                                                         value=tensor))
    else:
        model.graph.initializer.append(tensor)


def run_one(pipe_opt, test_dir, scratch):
    model = onnx.load(os.path.join(test_dir, "model.onnx"))
    data_dir = os.path.join(test_dir, "test_data_set_0")
    for index, info in enumerate(graph_inputs(model)):
        path = os.path.join(data_dir, f"input_{index}.pb")
        elem = info.type.tensor_type.elem_type
        if (elem in INT_TYPES or feeds_attribute(model, info.name)) and os.path.exists(path):
            bind(model, info, load_tensor(path))
    out_path = os.path.join(scratch, "model.onnx")
    onnx.save(model, out_path)
    proc = subprocess.run([pipe_opt, out_path], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return "import failed: " + (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
    got = result_types(proc.stdout)
    want = []
    for index in range(len(model.graph.output)):
        path = os.path.join(data_dir, f"output_{index}.pb")
        if not os.path.exists(path):
            return None
        declared = model.graph.output[index].type.tensor_type.elem_type
        want.append(reference_type(load_tensor(path), declared))
    if got != want:
        return f"output types {got} != reference {want}"
    return None


def all_nodes(graph):
    """The graph's nodes and those of its subgraphs (If's branches, Loop's and
    Scan's bodies)."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from all_nodes(sub)


def _classify(pipe_opt, node_dir):
    """(supported, unsupported): test names whose ops are all supported, and
    (name, unsupported ops) for the others, in name order."""
    supported_ops = set(subprocess.run([pipe_opt, "--print-onnx-ops"], capture_output=True,
                                       text=True, check=True).stdout.split())
    supported, unsupported = [], []
    for name in sorted(os.listdir(node_dir)):
        model_path = os.path.join(node_dir, name, "model.onnx")
        if not os.path.exists(model_path):
            continue
        model = onnx.load(model_path, load_external_data=False)
        nodes = list(all_nodes(model.graph))
        ops = {n.op_type for n in nodes}
        missing = sorted(ops - supported_ops) + sorted(
            {f"{n.domain}.{n.op_type}" for n in nodes if n.domain not in ("", "ai.onnx")})
        if not ops or missing:
            unsupported.append((name, missing))
        else:
            supported.append(name)
    return supported, unsupported


def supported_tests(pipe_opt, node_dir):
    return _classify(pipe_opt, node_dir)[0]


def option(name, default, convert=int):
    """The value after `name` on the command line, converted, else `default`."""
    return convert(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default


def run_each(names, node_dir, check):
    """check(test_dir, scratch_folder) for each test name, one per core at a
    time, each in its own scratch folder; the results in the names' order."""
    with tempfile.TemporaryDirectory() as scratch, \
            concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        def one(index_and_name):
            index, name = index_and_name
            folder = os.path.join(scratch, str(index))
            os.mkdir(folder)
            return check(os.path.join(node_dir, name), folder)
        return list(pool.map(one, enumerate(names)))


def main():
    pipe_opt, node_dir = sys.argv[1], sys.argv[2]
    verbose = "--verbose" in sys.argv
    every = option("--every", 1)
    # The count this commit reaches: fewer passes is a regression.
    min_passed = option("--min-passed", 0)
    tests, unsupported = _classify(pipe_opt, node_dir)
    skipped = len(unsupported)
    candidates = len(tests)
    chosen = tests[::every]
    passed, failed, expected = 0, [], 0
    problems = run_each(chosen, node_dir,
                        lambda test_dir, folder: run_one(pipe_opt, test_dir, folder))
    for name, problem in zip(chosen, problems):
        reason = expected_unsupported(name)
        if problem is None:
            passed += 1
            if verbose:
                print(f"PASS {name}")
        elif reason:
            expected += 1
            if verbose:
                print(f"EXPECTED {name}: {reason}: {problem}")
        else:
            failed.append((name, problem))
    for name, problem in failed:
        print(f"FAIL {name}: {problem}")
    # Every unsupported test, by reason: its ops and how many tests.
    reason_of = {op: reason for reason, ops in UNSUPPORTED_OPS.items() for op in ops}
    by_reason = {}
    for name, missing in unsupported:
        unknown = [op for op in missing if op not in reason_of]
        if unknown:
            failed.append((name, f"unsupported op(s) {', '.join(unknown)} with no reason given"))
            print(f"FAIL {name}: unsupported op(s) {', '.join(unknown)} with no reason given")
            continue
        reason = reason_of[missing[0]]
        tests, ops = by_reason.setdefault(reason, [0, set()])
        by_reason[reason][0] += 1
        ops.update(missing)
    for reason, (count, ops) in sorted(by_reason.items(), key=lambda item: -item[1][0]):
        print(f"  unsupported, {reason}: {count} tests ({', '.join(sorted(ops))})")
    sampled = f" (one in {every} of {candidates} supported)" if every > 1 else ""
    print(f"onnx node tests: {passed} passed, {len(failed)} failed, "
          f"{expected} rejected on purpose, {skipped} use unsupported ops{sampled}")
    if passed < min_passed:
        print(f"onnx node tests: {passed} passed, fewer than the {min_passed} expected")
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
