#!/usr/bin/python3
"""Checks the outputs of `pipe-opt MODEL --pipeline-stages=S -o DIR`:

  check_plan.py DIR MODEL S [--onnx-with-plan FILE]

plan.json has the documented fields; every stage fits its memory limit; the
period is not below the lower bound; stage_of maps ONNX node names of MODEL to
stages in range; model.parameters equals the trainable parameters of MODEL
(float initializers that are not batch-norm running statistics); the trace,
the SVG and one MLIR file per stage exist. With --onnx-with-plan, every node
of stage_of carries its stage as node metadata. Prints one summary line.
"""
import json
import os
import sys

import numpy as np
import onnx


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def main():
    out_dir, model_path, gpus = sys.argv[1], sys.argv[2], int(sys.argv[3])
    plan = json.load(open(os.path.join(out_dir, "plan.json")))
    for key in ["algorithm", "schedule", "stages", "period_ms", "iteration_ms",
                "lower_bound_ms", "stage_of", "stage_metrics", "model"]:
        if key not in plan:
            fail(f"plan.json has no '{key}'")
    stages = plan["stages"]
    if plan["period_ms"] < plan["lower_bound_ms"] * (1 - 1e-9):
        fail(f"period {plan['period_ms']} is below the lower bound {plan['lower_bound_ms']}")
    for index, metrics in enumerate(plan["stage_metrics"]):
        if metrics["memory_bytes"] > metrics["memory_limit_bytes"]:
            fail(f"stage {index} needs {metrics['memory_bytes']} bytes, "
                 f"limit {metrics['memory_limit_bytes']}")
    model = onnx.load(model_path)
    # Unnamed nodes are known by OpType_index, as the importer names them.
    names = {n.name or f"{n.op_type}_{i}" for i, n in enumerate(model.graph.node)}
    for node, stage in plan["stage_of"].items():
        if node.startswith("pipe."):
            continue  # a node the compiler added, such as the training loss
        if node not in names and not node.startswith(tuple(i.name for i in model.graph.initializer)):
            fail(f"stage_of names '{node}', which is not a node of the model")
        if not 0 <= stage < stages:
            fail(f"node '{node}' is on stage {stage} of {stages}")
    used_stages = set(plan["stage_of"].values())
    if used_stages != set(range(stages)):
        fail(f"stages used {sorted(used_stages)}, expected 0..{stages - 1}")
    bn_stats = set()
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            bn_stats.update(node.input[3:5])
    used = {i for n in model.graph.node for i in n.input}
    params = sum(int(np.prod(t.dims)) for t in model.graph.initializer
                 if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                                    onnx.TensorProto.BFLOAT16)
                 and t.name not in bn_stats and t.name in used)
    if int(round(plan["model"]["parameters"])) != params:
        fail(f"model.parameters {plan['model']['parameters']} != {params} in the model")
    if plan["model"]["forward_flops"] <= 0:
        fail("model.forward_flops is not positive")
    for name in ["schedule.trace.json", "schedule.svg", "report.txt", "problem.json",
                 "pipeline.mlir"] + [f"stage{s}.mlir" for s in range(stages)]:
        if not os.path.exists(os.path.join(out_dir, name)):
            fail(f"{name} was not written")
    json.load(open(os.path.join(out_dir, "schedule.trace.json")))
    if "--onnx-with-plan" in sys.argv:
        annotated = onnx.load(sys.argv[sys.argv.index("--onnx-with-plan") + 1])
        meta = {p.key: p.value for p in annotated.metadata_props}
        if "pipe.plan" not in meta:
            fail("the annotated model has no pipe.plan metadata")
        placed = 0
        for index, node in enumerate(annotated.graph.node):
            name = node.name or f"{node.op_type}_{index}"
            if name in plan["stage_of"]:
                placed += 1
                stage = str(plan["stage_of"][name]).encode()
                expected = b"pipe.stage" + bytes([0x12, len(stage)]) + stage
                if expected not in node.SerializeToString():
                    fail(f"node '{name}' carries no pipe.stage metadata")
        if placed == 0:
            fail("no node of the annotated model is in stage_of")
    print(f"plan ok: {stages} stages on {gpus} GPUs, {len(plan['stage_of'])} nodes placed, "
          f"{params} parameters")


if __name__ == "__main__":
    main()
