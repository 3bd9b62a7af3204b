#!/usr/bin/env python3
"""Lists the ONNX operator types (with counts) and the opset of ONNX files.

    list_ops.py MODEL.onnx...            op types and counts per file
    list_ops.py --union MODEL.onnx...    also the union over all files
    list_ops.py --forms MODEL.onnx...    also the distinct forms of each op type
                                         (input/output counts, attributes that
                                         change semantics), for importer work

Needs only the onnx package; weights are not loaded.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Dict, List, Set, Tuple

import onnx

try:
    from pipe_opt.export import onnx_opset, op_counts
except ModuleNotFoundError as error:  # neither installed nor on PYTHONPATH
    if error.name != "pipe_opt":
        raise
    sys.exit(f"{error}: pip install ./python, or run with PYTHONPATH=python (docs/python.md)")

# Ops taking any number of inputs: their input count is not a form.
VARIADIC_OPS = {"Concat", "Sum", "Max", "Min", "Mean"}
# Attributes that only size an operation; their values are not listed.
SHAPE_ATTRIBUTES = {"kernel_shape", "pads", "strides", "dilations", "value", "split"}


def _attribute_form(attribute: onnx.AttributeProto) -> str:
    name = attribute.name
    if name in SHAPE_ATTRIBUTES:
        return name
    if name == "group":
        return "group=1" if attribute.i == 1 else "group>1"
    if attribute.type == onnx.AttributeProto.INT:
        return f"{name}={attribute.i}"
    if attribute.type == onnx.AttributeProto.FLOAT:
        return f"{name}={attribute.f:g}"
    if attribute.type == onnx.AttributeProto.STRING:
        return f"{name}={attribute.s.decode()}"
    if attribute.type == onnx.AttributeProto.INTS and len(attribute.ints) <= 4:
        return f"{name}={list(attribute.ints)}"
    return name


def _constant_form(node: onnx.NodeProto) -> str:
    """Constant nodes: the element type and rank of the value."""
    for attribute in node.attribute:
        if attribute.name == "value":
            tensor = attribute.t
            type_name = onnx.TensorProto.DataType.Name(tensor.data_type).lower()
            return f"value:{type_name}[rank {len(tensor.dims)}]"
    return ",".join(a.name for a in node.attribute)


def op_forms(model: onnx.ModelProto) -> Dict[str, Set[str]]:
    """Op type -> distinct 'inputs=N outputs=M (K used) attrs' descriptions."""
    graph = model.graph
    used = {name for node in graph.node for name in node.input}
    used |= {value.name for value in graph.output}
    forms: Dict[str, Set[str]] = collections.defaultdict(set)
    for node in graph.node:
        inputs = sum(1 for name in node.input if name)
        outputs = [name for name in node.output if name]
        used_outputs = sum(1 for name in outputs if name in used)
        parts = ["in=N" if node.op_type in VARIADIC_OPS else f"in={inputs}",
                 f"out={len(outputs)}"]
        if used_outputs != len(outputs):
            parts[-1] += f"({used_outputs} used)"
        if node.op_type == "Constant":
            parts.append(_constant_form(node))
        else:
            parts += sorted(_attribute_form(a) for a in node.attribute)
        forms[node.op_type].add(" ".join(parts))
    return forms


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="ONNX files")
    parser.add_argument("--union", action="store_true", help="print the union of op types")
    parser.add_argument("--forms", action="store_true", help="print the forms of each op type")
    args = parser.parse_args(argv)

    union: Dict[str, int] = collections.Counter()
    all_forms: Dict[str, Set[str]] = collections.defaultdict(set)
    opsets: Set[Tuple[str, int]] = set()
    for path in args.models:
        model = onnx.load_model(path, load_external_data=False)
        counts = op_counts(model)
        opset = onnx_opset(model)
        opsets.add((os.path.basename(path), opset))
        union.update(counts)
        nodes = sum(counts.values())
        print(f"{path}: opset {opset}, {nodes} nodes, {len(counts)} op types")
        print("  " + ", ".join(f"{op} {count}" for op, count in counts.items()))
        if args.forms:
            for op, forms in sorted(op_forms(model).items()):
                for form in sorted(forms):
                    all_forms[op].add(form)
                    print(f"    {op}: {form}")
    if args.union:
        print(f"union over {len(args.models)} files ({len(union)} op types, "
              f"opsets {sorted(set(o for _, o in opsets))}):")
        print("  " + ", ".join(sorted(union)))
        if args.forms:
            for op in sorted(all_forms):
                for form in sorted(all_forms[op]):
                    print(f"    {op}: {form}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
