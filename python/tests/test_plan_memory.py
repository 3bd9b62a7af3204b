"""The plan's memory meets the measurement: pipe-opt plans a fixture under a
memory limit, pipe-run trains it for two steps, and each rank's measured peak
(of the sum of its categories) stays within the plan's memory for that GPU,
hence within the limit. Where the per-layer model is exact (the VGG-16
fixture's convolutions, one stage per GPU, no recomputation) the measured
workspace and saved peaks equal the plan's, category by category.

A plan that leaves a GPU idle runs too: that rank only takes part in the
optimizer step, and holds nothing.

pipe-opt and pipe-run are found as in test_training_equality.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_DIR)
FIXTURES = os.path.join(REPO_ROOT, "test", "Fixtures", "models")
SCRIPT = os.path.join(PYTHON_DIR, "scripts", "check_training.py")

spec = importlib.util.spec_from_file_location("check_training_tools", SCRIPT)
HAVE_SCRIPT_DEPS = all(importlib.util.find_spec(m) is not None for m in ("onnx", "numpy"))
if HAVE_SCRIPT_DEPS:
    tools = importlib.util.module_from_spec(spec)
    sys.modules["check_training_tools"] = tools  # dataclasses look their module up
    spec.loader.exec_module(tools)


@unittest.skipUnless(HAVE_SCRIPT_DEPS, "onnx and numpy are not importable")
class PlanMemoryTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.pipe_opt = tools.find_pipe_opt()
        cls.pipe_run = tools.find_pipe_run()
        if not cls.pipe_opt or not cls.pipe_run:
            raise unittest.SkipTest("pipe-opt or pipe-run is not built")

    def plan_and_train(self, model, memory, *extra, micro_batch_size=2, stages=2):
        work = tempfile.mkdtemp(prefix="plan-memory-")
        self.addCleanup(subprocess.run, ["rm", "-rf", work])
        out = os.path.join(work, "out")
        path = model if model.endswith(".onnx") else os.path.join(FIXTURES, model + ".onnx")
        subprocess.run([self.pipe_opt, path,
                        f"--micro-batch-size={micro_batch_size}", f"--pipeline-stages={stages}",
                        f"--memory={memory}", "--disable-dropout", "--no-progress", "-o", out,
                        *extra], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([self.pipe_run, out, "--steps", "2", "--timeout", "300"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        plan = json.load(open(os.path.join(out, "plan.json")))
        measured = json.load(open(os.path.join(out, "measured.json")))
        return plan, measured

    def assert_fits(self, plan, measured, limit):
        planned = {m["gpu"]: m["memory_bytes"] for m in plan["stage_metrics"]}
        for rank in measured["ranks"]:
            total = rank["memory"]["total"]["measured_bytes"]
            self.assertLessEqual(total, planned.get(rank["rank"], 0), f"rank {rank['rank']}")
            self.assertLessEqual(total, limit, f"rank {rank['rank']}")

    def test_vgg16_workspace_and_saved_are_exact(self):
        plan, measured = self.plan_and_train("vgg16", "2.5MB")
        self.assert_fits(plan, measured, 2.5e6)
        for rank in measured["ranks"]:
            for category in ("saved", "workspace"):
                cell = rank["memory"][category]
                self.assertAlmostEqual(cell["measured_bytes"] / cell["predicted_bytes"], 1.0,
                                       delta=0.01, msg=f"rank {rank['rank']} {category}")

    def test_gelu_chains_workspace_is_exact(self):
        # GELU as exported (erf, and tanh with x^3): elementwise chains whose
        # backward sums the gradient of x from several parts, each added to the
        # sum as its rule gives it, and frees each result gradient after its
        # last read. The plan's workspace is the program's, to the byte.
        import numpy as np
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        def scalar(name, value):
            return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
                np.array(value, dtype=np.float32), name))

        chains = {
            "erf": [scalar("r2", 1.4142135), scalar("one", 1.0), scalar("half", 0.5),
                    ("Div", ["a", "r2"], "d"), ("Erf", ["d"], "e"), ("Add", ["e", "one"], "p"),
                    ("Mul", ["a", "p"], "q"), ("Mul", ["q", "half"], "y")],
            "tanh": [scalar("c", 0.044715), scalar("s", 0.7978846), scalar("one", 1.0),
                     scalar("half", 0.5), ("Mul", ["a", "a"], "a2"), ("Mul", ["a", "a2"], "a3"),
                     ("Mul", ["c", "a3"], "ca3"), ("Add", ["a", "ca3"], "in"),
                     ("Mul", ["s", "in"], "si"), ("Tanh", ["si"], "t"),
                     ("Add", ["one", "t"], "p"), ("Mul", ["a", "p"], "q"),
                     ("Mul", ["half", "q"], "y")],
        }
        work = tempfile.mkdtemp(prefix="plan-memory-gelu-")
        self.addCleanup(subprocess.run, ["rm", "-rf", work])
        for name, chain in chains.items():
            nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="bias")]
            for item in chain:
                nodes.append(item if not isinstance(item, tuple) else
                             helper.make_node(item[0], item[1], [item[2]], name=item[2]))
            graph = helper.make_graph(
                nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 48])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 48])],
                [numpy_helper.from_array(np.linspace(-1, 1, 48, dtype=np.float32), "b")])
            path = os.path.join(work, name + ".onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
            plan, measured = self.plan_and_train(
                path, "1GB", "--loss=mse",
                f"--target={os.path.join(REPO_ROOT, 'bench', 'cpu-core.json')}", stages=1)
            cell = measured["ranks"][0]["memory"]["workspace"]
            self.assertAlmostEqual(cell["measured_bytes"] / cell["predicted_bytes"], 1.0,
                                   delta=0.01, msg=name)

    def test_vgg16_recomputing_stage_fits(self):
        plan, measured = self.plan_and_train("vgg16", "1.8MB", "--recompute=auto")
        self.assertEqual(plan["allocation"]["recompute_stages"], [0])
        self.assert_fits(plan, measured, 1.8e6)

    def test_a_plan_with_an_idle_gpu_runs(self):
        # On the CPU target the tiny MLP is fastest on one GPU of the two.
        plan, measured = self.plan_and_train(
            "mlp", "1GB", f"--target={os.path.join(REPO_ROOT, 'bench', 'cpu-core.json')}",
            micro_batch_size=4)
        self.assertEqual(plan["gpus_used"], 1)
        self.assertEqual(len(measured["ranks"]), 2)
        idle = [r for r in measured["ranks"] if r["memory"]["total"]["measured_bytes"] == 0]
        self.assertEqual(len(idle), 1)
        self.assert_fits(plan, measured, 1e9)

    def test_gpt2_fits(self):
        plan, measured = self.plan_and_train("gpt2", "3MB", micro_batch_size=4)
        self.assert_fits(plan, measured, 3e6)


if __name__ == "__main__":
    unittest.main()
