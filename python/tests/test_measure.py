"""Tests of pipe_opt.measure (per-node times with PyTorch), its profile
format as pipe-opt reads it, and compare_cost_model.py.

The executor's op implementations are checked against torch itself: the
whole tiny GPT-2, BERT and ResNet-50 graphs reproduce the outputs and the
parameter gradients of the torch models they were exported from, and a few
ops with less common attributes are compared with hand-written
torch.nn.functional calls. Timing runs on the CPU (one run per node).

pipe-opt is found through $PIPE_OPT or build/bin/pipe-opt; tests that need it
skip without it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_DIR)
FIXTURE_DIR = os.path.join(REPO_ROOT, "test", "Fixtures", "models")
COMPARE = os.path.join(PYTHON_DIR, "scripts", "compare_cost_model.py")

HAVE_TORCH = (importlib.util.find_spec("onnx") is not None
              and importlib.util.find_spec("torch") is not None)
if HAVE_TORCH:
    import onnx
    import torch
    import torch.nn.functional as F

    from pipe_opt import models
    from pipe_opt.measure import OPS, GraphExecutor, MeasureError, measure_model, write_profile

    torch.set_num_threads(1)


from tool_paths import find_tool  # noqa: E402

PIPE_OPT = find_tool("PIPE_OPT", "pipe-opt")
_TIMES = {}


def fixture(name):
    return os.path.join(FIXTURE_DIR, name + ".onnx")


def measured(name):
    """Times of a tiny fixture at micro-batch 2, one run per node (cached)."""
    if name not in _TIMES:
        _TIMES[name] = measure_model(onnx.load(fixture(name)), micro_batch_size=2,
                                     device="cpu", repeat=1, warmup=0)
    return _TIMES[name]


@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not importable")
class MeasureTest(unittest.TestCase):
    def test_gemm_and_conv_nodes_are_timed(self):
        for name in ("gpt2", "resnet50"):
            model = onnx.load(fixture(name))
            times = measured(name)
            heavy = [n.name for n in model.graph.node if n.op_type in ("Conv", "MatMul", "Gemm")]
            self.assertTrue(heavy)
            for node in heavy:
                self.assertIn(node, times, f"{name}: {node}")
                self.assertGreater(times[node]["forward_ms"], 0, node)
                self.assertGreater(times[node]["backward_ms"], 0, node)

    def test_shape_nodes_are_not_timed(self):
        model = onnx.load(fixture("gpt2"))
        times = measured("gpt2")
        for node in model.graph.node:
            if node.op_type in ("Shape", "Constant", "ConstantOfShape", "Range", "Equal",
                                "Trilu", "Cast", "Unsqueeze", "Concat"):
                self.assertNotIn(node.name, times)
        # Gather on shapes is not timed; the token embedding lookup is.
        self.assertIn("/wte/Gather", times)

    def test_unsupported_op_names_node(self):
        model = onnx.load(fixture("vgg16"))
        model.graph.node[3].op_type = "Gelu"
        with self.assertRaises(MeasureError) as raised:
            GraphExecutor(model, 2)
        self.assertIn(model.graph.node[3].name, str(raised.exception))
        self.assertIn("Gelu", str(raised.exception))

    def test_unbound_dimension(self):
        model = onnx.load(fixture("gpt2"))
        model.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "seq"
        with self.assertRaises(MeasureError) as raised:
            GraphExecutor(model, 2).random_inputs()
        self.assertIn("--dim seq=", str(raised.exception))
        inputs = GraphExecutor(model, 2, dims={"seq": 5}).random_inputs()
        self.assertEqual(list(inputs["input_ids"].shape), [2, 5])
        self.assertLess(int(inputs["input_ids"].max()), 256)  # GPT-2 tiny vocabulary


@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not importable")
class ExecutorMatchesTorchTest(unittest.TestCase):
    """The executor reproduces the torch model the fixture was exported from."""

    def check(self, name, grads=True):
        built = models.build(name, "tiny", training=True, batch=2)
        model = built.model
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        executor = GraphExecutor(onnx.load(fixture(name)), 2, dropout=False)
        initializers = executor.initializers()
        params = dict(model.named_parameters())
        with torch.no_grad():
            for key, value in model.state_dict().items():
                if key in initializers:
                    value.copy_(initializers[key])
        expected = model(*built.example_inputs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        outputs, _ = executor.run(inputs=dict(zip(built.input_names, built.example_inputs)))
        # executor.run makes fresh initializer tensors; reach them through autograd.
        for out_name, want in zip(built.output_names, expected):
            got = outputs[out_name]
            self.assertEqual(got.shape, want.shape)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=f"{name} {out_name}")
        if not grads:
            return
        leaves = {}
        for out in outputs.values():
            stack, seen = [out.grad_fn], set()
            while stack:
                fn = stack.pop()
                if fn is None or fn in seen:
                    continue
                seen.add(fn)
                if hasattr(fn, "variable"):
                    leaves[id(fn.variable)] = fn.variable
                stack += [f for f, _ in fn.next_functions]
        loss = sum((o * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum()
                   for o in outputs.values())
        want_loss = sum((o * torch.linspace(-1, 1, o.numel()).reshape(o.shape)).sum()
                        for o in expected)
        got_grads = torch.autograd.grad(loss, list(leaves.values()))
        want_grads = torch.autograd.grad(want_loss, list(params.values()), allow_unused=True)
        # Match leaves to parameters by value (the executor's leaves are copies).
        by_shape = {}
        for key, g in zip(params, want_grads):
            by_shape.setdefault(tuple(params[key].shape), []).append((params[key], g))
        matched = 0
        for leaf, g in zip(leaves.values(), got_grads):
            for param, want in by_shape.get(tuple(leaf.shape), []):
                if torch.equal(param.detach(), leaf.detach()):
                    torch.testing.assert_close(g, want, rtol=1e-3, atol=1e-4)
                    matched += 1
                    break
        self.assertEqual(matched, len(params), name)

    def test_gpt2(self):
        self.check("gpt2")

    def test_bert(self):
        self.check("bert")

    def test_resnet50(self):
        self.check("resnet50")


@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not importable")
class OpTest(unittest.TestCase):
    """Ops with attributes the fixtures do not exercise, against F.*."""

    def setUp(self):
        torch.manual_seed(0)
        self.x = torch.randn(2, 3, 7, 6)

    def test_conv_asymmetric_pads(self):
        w = torch.randn(4, 3, 3, 3)
        got = OPS["Conv"]({"pads": [1, 0, 2, 1], "strides": [2, 1]}, [self.x, w], 1)[0]
        want = F.conv2d(F.pad(self.x, (0, 1, 1, 2)), w, stride=(2, 1))
        torch.testing.assert_close(got, want)

    def test_grouped_conv_with_bias(self):
        w, b = torch.randn(3, 1, 3, 3), torch.randn(3)
        got = OPS["Conv"]({"pads": [1, 1, 1, 1], "group": 3}, [self.x, w, b], 1)[0]
        torch.testing.assert_close(got, F.conv2d(self.x, w, b, padding=1, groups=3))

    def test_gemm_transposes_and_scales(self):
        a, b, c = torch.randn(4, 5), torch.randn(6, 4), torch.randn(6)
        got = OPS["Gemm"]({"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}, [a, b, c], 1)[0]
        torch.testing.assert_close(got, 0.5 * a.t() @ b.t() + 2.0 * c)

    def test_slice_negative_step_and_clamped_end(self):
        got = OPS["Slice"]({}, [self.x, [-1, 1], [-8, 2 ** 62], [2, 3], [-2, 2]], 1)[0]
        torch.testing.assert_close(got, self.x.flip(2)[:, :, ::2, 1::2])

    def test_gather_negative_index(self):
        idx = torch.tensor([[0, -1], [2, 1]])
        got = OPS["Gather"]({"axis": 2}, [self.x, idx], 1)[0]
        want = self.x[:, :, torch.tensor([[0, 6], [2, 1]])]
        torch.testing.assert_close(got, want)

    def test_pad_and_pools(self):
        got = OPS["Pad"]({"mode": b"constant"}, [self.x, [0, 0, 1, 2, 0, 0, 0, 1], 0.5], 1)[0]
        torch.testing.assert_close(got, F.pad(self.x, (2, 1, 1, 0), value=0.5))
        got = OPS["MaxPool"]({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                             [self.x], 1)[0]
        torch.testing.assert_close(got, F.max_pool2d(self.x, 3, 2, 1))
        got = OPS["AveragePool"]({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1},
                                 [self.x], 1)[0]
        torch.testing.assert_close(got, F.avg_pool2d(self.x, 2, 2, ceil_mode=True))

    def test_shape_ops(self):
        self.assertEqual(OPS["Flatten"]({"axis": 2}, [self.x], 1)[0].shape, (6, 42))
        self.assertEqual(OPS["Unsqueeze"]({}, [self.x, [-1, 0]], 1)[0].shape, (1, 2, 3, 7, 6, 1))
        self.assertEqual(OPS["Reshape"]({}, [self.x, [0, -1]], 1)[0].shape, (2, 126))
        self.assertEqual(OPS["Expand"]({}, [torch.ones(3, 1), [2, 1, 4]], 1)[0].shape, (2, 3, 4))
        parts = OPS["Split"]({"axis": 2}, [self.x], 3)
        self.assertEqual([p.shape[2] for p in parts], [3, 3, 1])

    def test_normalizations(self):
        scale, bias = torch.randn(6), torch.randn(6)
        got = OPS["LayerNormalization"]({"epsilon": 1e-5}, [self.x, scale, bias], 1)[0]
        torch.testing.assert_close(got, F.layer_norm(self.x, (6,), scale, bias, 1e-5))
        s, b = torch.randn(3), torch.randn(3)
        got = OPS["BatchNormalization"]({"training_mode": 1, "epsilon": 1e-3},
                                        [self.x, s, b, torch.zeros(3), torch.ones(3)], 3)[0]
        torch.testing.assert_close(
            got, F.batch_norm(self.x, None, None, s, b, training=True, eps=1e-3))

    def test_dropout_training_scales_kept_values(self):
        torch.manual_seed(1)
        y, mask = OPS["Dropout"]({}, [self.x, 0.25, True], 2)
        torch.testing.assert_close(y[mask], self.x[mask] / 0.75)
        self.assertTrue(bool((y[~mask] == 0).all()))


@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not importable")
@unittest.skipUnless(PIPE_OPT, "pipe-opt is not built (set PIPE_OPT)")
class PipeOptProfileTest(unittest.TestCase):
    def test_profile_is_accepted(self):
        for name in ("gpt2", "resnet50"):
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "times.json")
                write_profile(measured(name), path, {"device": "cpu"})
                done = subprocess.run(
                    [PIPE_OPT, fixture(name), "--micro-batch-size=2", "--pipeline-stages=2",
                     f"--profile={path}", "-o", os.path.join(tmp, "plan")],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self.assertEqual(done.returncode, 0, done.stderr)
                cost = subprocess.run(
                    [PIPE_OPT, fixture(name), "--micro-batch-size=2", "-o", os.devnull,
                     f"--test-print-pipe-cost=profile={path}"],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
                profiled = [line for line in cost.stdout.splitlines()
                            if re.search(r" profiled( |$)", line)]
                # Every timed node the analysis knows takes the measured times.
                self.assertGreaterEqual(len(profiled), len(measured(name)) - 4, name)

    def test_compare_script(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "times.json")
            write_profile(measured("gpt2"), path, {"device": "cpu", "micro_batch_size": 2})
            report = os.path.join(tmp, "compare.json")
            done = subprocess.run(
                [sys.executable, COMPARE, fixture("gpt2"), "--times", path, "--target", "h200",
                 "--micro-batch-size", "2", "--pipe-opt", PIPE_OPT, "--markdown",
                 "--json", report],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn("| gemm |", done.stdout)
            self.assertIn("| all |", done.stdout)
            with open(report) as f:
                kernels = {k["name"]: k for k in json.load(f)["kernels"]}
            # The GELU chain is one kernel: its measured time sums its ops.
            act = kernels["/h.0/mlp/act/Mul"]
            self.assertGreater(len(act["members"]), 5)
            times = measured("gpt2")
            want = sum(times[m]["forward_ms"] for m in act["members"] if m in times)
            self.assertAlmostEqual(act["meas_f"], want, places=6)
            summary = subprocess.run([sys.executable, COMPARE, "--summarize", report],
                                     stdout=subprocess.PIPE, text=True, check=True)
            self.assertIn("all", summary.stdout)


if __name__ == "__main__":
    unittest.main()
