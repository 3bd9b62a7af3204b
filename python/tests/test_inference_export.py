"""A user's eval-mode export of torchvision's ResNet-18, as torch.onnx.export
writes it by default (eval mode, constant folding on: every BatchNorm folded
into the convolution before it, the folded weights named onnx::Conv_N), is
refused by pipe-opt with what it means for training and the export that fixes
it; that export then plans.

Needs torch, torchvision and onnx (python3-torchvision) and pipe-opt
($PIPE_OPT, else build/bin/pipe-opt).
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import tempfile
import unittest
import warnings

from tool_paths import find_tool  # noqa: E402

HAVE_TORCHVISION = all(importlib.util.find_spec(m) is not None
                       for m in ("torch", "torchvision", "onnx"))


def pipe_opt():
    return find_tool("PIPE_OPT", "pipe-opt")


@unittest.skipUnless(HAVE_TORCHVISION, "torchvision is not installed (python3-torchvision)")
@unittest.skipUnless(pipe_opt(), "pipe-opt is not built")
class Resnet18EvalExportTest(unittest.TestCase):
    def setUp(self):
        import torch
        import torchvision

        torch.manual_seed(0)
        torch.set_num_threads(1)
        self.torch = torch
        self.model = torchvision.models.resnet18(weights=None)
        self.image = torch.randn(1, 3, 224, 224)
        self.work = tempfile.TemporaryDirectory(prefix="resnet18-")
        self.addCleanup(self.work.cleanup)

    def plan(self, path, *extra):
        return subprocess.run([pipe_opt(), path, "--pipeline-stages=2", "--micro-batch-size=2",
                               "--no-codegen", "--no-progress", "-o",
                               os.path.join(self.work.name, "out"), *extra],
                              capture_output=True, text=True, timeout=300)

    def test_default_eval_export_is_refused_with_the_fix(self):
        path = os.path.join(self.work.name, "resnet18_eval.onnx")
        self.model.eval()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.torch.onnx.export(self.model, self.image, path)  # torch's defaults
        result = self.plan(path)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("looks exported for inference, not for training", result.stderr)
        self.assertIn("20 convolutions read a weight and a bias the exporter computed, and the "
                      "graph has no BatchNormalization: BatchNorm was folded into the "
                      "convolutions", result.stderr)
        self.assertIn("names the exporter made up (onnx::Conv_", result.stderr)
        self.assertIn("pipe_opt.export_for_pipeline(model, example_inputs, path)", result.stderr)
        self.assertIn("training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False",
                      result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.work.name, "out", "plan.json")))

    def test_the_export_it_names_plans(self):
        from pipe_opt.export import export_for_pipeline

        path = os.path.join(self.work.name, "resnet18.onnx")
        export_for_pipeline(self.model, (self.image,), path, ["input"], ["logits"])
        result = self.plan(path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("exported for inference", result.stderr)
        self.assertTrue(os.path.exists(os.path.join(self.work.name, "out", "plan.json")))


if __name__ == "__main__":
    unittest.main()
