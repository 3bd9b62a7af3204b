#!/usr/bin/python3
"""Regenerates the committed seed corpora of the fuzz harnesses (test/fuzz/corpus):

  onnx-import/       each importer op test (test/Import/Onnx/ops/*.onnxtext) as a
                     binary model, plus a model with external data and one with
                     initializers in raw_data
  problem-reader/    the partitioner's test problems and profiles
  plan-replay/       plans of PlanReplayFuzzer's problem, written by pipe-plan
  main-job-options/  option sets of the main job
  program-json/      pipe-run's program.json: the runtime's test programs and
                     one of each loss and optimizer
  npz-reader/        .npz archives as np.savez writes them (every dtype, 0-d and
                     empty arrays, several arrays)

Run from the repository root with a built pipe-plan:
  /usr/bin/python3 test/fuzz/make_seeds.py build/bin/pipe-plan
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.parser
from onnx import helper, numpy_helper, TensorProto

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
corpus = os.path.join(root, "test", "fuzz", "corpus")
pipe_plan = sys.argv[1]


# Inputs that fuzzing found and that now are regression seeds: kept as they are.
FOUND_BY_FUZZING = {"problem-reader": ["pipedream-stash-count-zero.json"]}


def fresh(name):
    path = os.path.join(corpus, name)
    kept = {}
    for found in FOUND_BY_FUZZING.get(name, []):
        with open(os.path.join(path, found), "rb") as f:
            kept[found] = f.read()
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    for found, content in kept.items():
        with open(os.path.join(path, found), "wb") as f:
            f.write(content)
    return path


# ONNX models: the op tests, binary.
out = fresh("onnx-import")
for path in sorted(glob.glob(os.path.join(root, "test", "Import", "Onnx", "ops", "*.onnxtext"))):
    text = "\n".join(line for line in open(path) if not line.lstrip().startswith("//"))
    model = onnx.parser.parse_model(text)
    name = os.path.splitext(os.path.basename(path))[0]
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())
rng = np.random.default_rng(0)
w1 = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "fc1.weight")
w2 = numpy_helper.from_array(rng.standard_normal((4, 2)).astype(np.float32), "fc2.weight")
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "fc1.weight"], ["h"], name="fc1"),
     helper.make_node("Relu", ["h"], ["r"], name="relu"),
     helper.make_node("MatMul", ["r", "fc2.weight"], ["y"], name="fc2")],
    "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2])],
    initializer=[w1, w2])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
with open(os.path.join(out, "mlp-raw-data.onnx"), "wb") as f:
    f.write(model.SerializeToString())
for tensor in model.graph.initializer:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in [("location", "weights.bin"), ("offset", "0"), ("length", "128")]:
        tensor.external_data.append(onnx.StringStringEntryProto(key=key, value=value))
with open(os.path.join(out, "mlp-external-data.onnx"), "wb") as f:
    f.write(model.SerializeToString())

# Problems and profiles.
out = fresh("problem-reader")
for name in ["tiny_problem.json", "tiny_graph.txt", "cycle_graph.txt", "malformed_graph.txt"]:
    shutil.copy(os.path.join(root, "partitioner", "test", "data", name), out)
chain = {"name": "chain", "layers": [
    {"name": f"l{i}", "node_ids": [f"n{i}"], "forward_ms": 1 + i % 3, "backward_ms": 2 + i % 2,
     "backward_weight_ms": 1, "parameter_bytes": 1e6 * (i + 1), "saved_bytes": "2MB",
     "output_bytes": 1e5} for i in range(6)],
    "platform": {"gpus": 3, "memory_bytes_per_gpu": "1GB", "gpus_per_node": 2,
                 "intra_node": {"bandwidth_bytes_per_s": "25GB/s", "latency_ms": 0.005},
                 "inter_node": {"bandwidth_bytes_per_s": "inf", "latency_ms": 0},
                 "speed": [1, 1.5, 1]},
    "training": {"microbatches": 6, "state_multiplier": 4, "schedule": "zb-h1",
                 "weight_policy": "double", "communication_buffers": False,
                 "interleave_chunks": 2}}
with open(os.path.join(out, "chain.json"), "w") as f:
    json.dump(chain, f)
with open(os.path.join(out, "dapple-style.txt"), "w") as f:
    f.write("node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
            "activation_size=1000.0, parameter_size=0.000\n")
    for i in range(2, 7):
        f.write(f"node{i} -- Layer -- forward_compute_time={i}.5, backward_compute_time={i}.0, "
                f"activation_size=[{i}00; 50], parameter_size={i}000.0\n")
    for i in range(1, 6):
        f.write(f"\tnode{i} -- node{i + 1}\n")
    f.write("\tnode2 -- node6\n")

# Plans of the replay harness's problem (the same problem as PlanReplayFuzzer.cpp).
out = fresh("plan-replay")
source = open(os.path.join(root, "test", "fuzz", "PlanReplayFuzzer.cpp")).read()
problem = source.split('R"(')[1].split(')"')[0]
with tempfile.TemporaryDirectory() as tmp:
    problem_path = os.path.join(tmp, "problem.json")
    with open(problem_path, "w") as f:
        f.write(problem)
    for algo, schedule in [("madpipe", "1f1b"), ("interleaved", "interleaved"),
                           ("general", "1f1b"), ("uniform", "gpipe"), ("balanced", "zb-h1")]:
        plan_path = os.path.join(out, f"{algo}-{schedule}.json")
        subprocess.run([pipe_plan, problem_path, "--algo", algo, "--schedule", schedule,
                        "--quiet", "--json", plan_path], check=False)

# Main-job options.
out = fresh("main-job-options")
target = {"name": "toy", "peak_tflops": {"fp32": 10, "bf16": 40}, "memory_bandwidth_gbps": 500,
          "memory_gib": 8, "gpus_per_node": 4,
          "intra_node": {"kind": "nvlink", "bandwidth_gbps": 100, "latency_us": 5}}
seeds = {
    "default": "stages=2\n",
    "four-gpus": "stages=4\nmicrobatches=8\nmemory=16GB\nschedule=1f1b\n",
    "interleaved": "stages=2\nmicrobatches=4\nalgo=interleaved\nschedule=interleaved\n",
    "gpipe-bf16": "stages=3\nschedule=gpipe\ndtype=bf16\noptimizer=sgd\ntarget=a100-40gb\n",
    "periodic": "stages=2\nschedule=periodic\nalgo=madpipe\nmemory=1MB\n",
    "target-file": "stages=2\ntarget_json=" + json.dumps(target) + "\n",
    "profile-file": "stages=2\nprofile_json=" + json.dumps(
        {"MatMul_0": {"forward_ms": 1.0, "backward_ms": 2.0}}) + "\n",
    "too-many": "stages=2\nmicrobatches=100000000\n",
}
for name, text in seeds.items():
    with open(os.path.join(out, name), "w") as f:
        f.write(text)

# pipe-run's program.json.
out = fresh("program-json")
for program in ["relay", "mlp2"]:
    shutil.copy(os.path.join(root, "runtime", "test", "programs", program, "program.json"),
                os.path.join(out, program + ".json"))
base = json.load(open(os.path.join(root, "runtime", "test", "programs", "mlp2", "program.json")))
base.update({"stages": 4, "rank_of_stage": [0, 1, 0, 1], "loss": "mse",
             "optimizer": {"kind": "adamw", "lr": 0.001, "momentum": 0.0, "beta1": 0.9,
                           "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}})
with open(os.path.join(out, "interleaved-adamw.json"), "w") as f:
    json.dump(base, f, indent=1)
with open(os.path.join(out, "minimal.json"), "w") as f:
    f.write('{"ranks": 1}')

# .npz archives.
out = fresh("npz-reader")
arrays = {
    "f32": {"input_0": rng.standard_normal((4, 3)).astype(np.float32),
            "label_0": np.arange(4, dtype=np.int64)},
    "dtypes": {"a": np.array(2.5, dtype=np.float64), "b": np.array([1, 0, 1], dtype=np.bool_),
               "c": np.arange(6, dtype=np.int32).reshape(2, 3), "d": np.zeros((0, 2), np.float32),
               "e": np.ones((2, 1, 2), np.float16)},
    "steps": {"input_0": rng.standard_normal((2, 4, 2, 2)).astype(np.float32)},
}
for name, content in arrays.items():
    np.savez(os.path.join(out, name + ".npz"), **content)
