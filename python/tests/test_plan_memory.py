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

    def plan_and_train(self, model, memory, *extra, micro_batch_size=2):
        work = tempfile.mkdtemp(prefix="plan-memory-")
        self.addCleanup(subprocess.run, ["rm", "-rf", work])
        out = os.path.join(work, "out")
        subprocess.run([self.pipe_opt, os.path.join(FIXTURES, model + ".onnx"),
                        f"--micro-batch-size={micro_batch_size}", "--pipeline-stages=2",
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
