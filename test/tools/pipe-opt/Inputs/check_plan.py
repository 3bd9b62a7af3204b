#!/usr/bin/python3
"""Checks the outputs of `pipe-opt MODEL --pipeline-stages=S -o DIR`:

  check_plan.py DIR MODEL S [--onnx-with-plan FILE]

plan.json has the documented fields and schema version; plan.json and
problem.json record the same settings (tool version, target, dtype,
optimizer, micro-batch size, micro-batches, memory limit, link model,
objective); the plan uses at most S GPUs, numbered in pipeline order of their
first stage; every stage fits its memory limit; the period is not below the
lower bound; stage_of maps ONNX node names of MODEL to stages in range;
model.parameters equals the trainable parameters of MODEL (float initializers
that are not batch-norm running statistics); the trace (with named tracks),
the SVG (with a legend and a time axis) and one MLIR file per stage exist.
With --onnx-with-plan, every node of stage_of carries its stage as node
metadata (a control-flow node, whose unrolled ops are named after it, its
first stage and, when they span several, the list of them). Prints one summary line.
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
    for key in ["schema_version", "algorithm", "schedule", "objective", "gpus", "gpus_used",
                "stages", "period_ms", "iteration_ms", "lower_bound_ms", "stage_of",
                "gpu_of_stage", "stage_metrics", "actions", "settings", "model"]:
        if key not in plan:
            fail(f"plan.json has no '{key}'")
    if plan["schema_version"] != 2:
        fail(f"schema_version {plan['schema_version']}, expected 2")
    problem = json.load(open(os.path.join(out_dir, "problem.json")))
    for key in ["tool_version", "target", "dtype", "optimizer", "micro_batch_size",
                "microbatches", "gpus", "memory_limit", "link_model", "objective"]:
        if key not in plan["settings"]:
            fail(f"plan.json's settings have no '{key}'")
    if problem.get("settings") != plan["settings"]:
        fail("problem.json and plan.json record different settings")
    if plan["settings"]["objective"] != plan["objective"]:
        fail("the plan's objective is not the one its settings name")
    if plan["gpus"] != gpus or plan["settings"]["gpus"] != gpus:
        fail(f"the plan is for {plan['gpus']} GPUs, not {gpus}")
    first_seen = []
    for gpu in plan["gpu_of_stage"]:
        if gpu not in first_seen:
            first_seen.append(gpu)
    if first_seen != list(range(len(first_seen))) or len(first_seen) != plan["gpus_used"]:
        fail(f"GPUs are not numbered in pipeline order: gpu_of_stage {plan['gpu_of_stage']}")
    if len(plan["actions"]) > gpus:
        fail(f"{len(plan['actions'])} action lists for {gpus} GPUs")
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
        # An op of an unrolled If, Loop or Scan is named `<node>/<scope>/...`.
        if node.split("/")[0] in names and "/" in node:
            continue
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
    trace = json.load(open(os.path.join(out_dir, "schedule.trace.json")))["traceEvents"]
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace
              if e["ph"] == "M" and e["name"] == "thread_name"}
    for event in trace:
        if event["ph"] == "X" and (event["pid"], event["tid"]) not in tracks:
            fail(f"trace event {event['name']} is on an unnamed track")
    svg = open(os.path.join(out_dir, "schedule.svg")).read()
    for text in ["F forward", "B backward", "W weight gradient", "transfer", "idle",
                 "time (ms)"] + [f">GPU {g}<" for g in range(gpus)]:
        if text not in svg:
            fail(f"the SVG has no '{text}'")
    if "--onnx-with-plan" in sys.argv:
        annotated = onnx.load(sys.argv[sys.argv.index("--onnx-with-plan") + 1])
        meta = {p.key: p.value for p in annotated.metadata_props}
        if "pipe.plan" not in meta:
            fail("the annotated model has no pipe.plan metadata")
        placed = 0
        for index, node in enumerate(annotated.graph.node):
            name = node.name or f"{node.op_type}_{index}"
            # A control-flow node's unrolled ops are named `name/...`.
            on = sorted({s for key, s in plan["stage_of"].items()
                         if key == name or key.startswith(name + "/")})
            if not on:
                continue
            placed += 1
            expected = [("pipe.stage", str(on[0]))]
            if len(on) > 1:
                expected.append(("pipe.stages", ",".join(map(str, on))))
            for key, value in expected:
                entry = key.encode() + bytes([0x12, len(value)]) + value.encode()
                if entry not in node.SerializeToString():
                    fail(f"node '{name}' carries no {key} = {value} metadata")
        if placed == 0:
            fail("no node of the annotated model is in stage_of")
    print(f"plan ok: {stages} stages on {plan['gpus_used']} of {gpus} GPUs, "
          f"{len(plan['stage_of'])} nodes placed, {params} parameters")


if __name__ == "__main__":
    main()
