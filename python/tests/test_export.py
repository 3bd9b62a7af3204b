"""Tests of pipe_opt.export_for_pipeline, the model definitions and the
committed ONNX fixtures.

Run from the repository root with the package importable (installed with
`pip install ./python`, or PYTHONPATH=python), e.g.
    PYTHONPATH=python python3 -m pytest python/tests/test_export.py
using an interpreter that has torch and onnx; without them the tests skip.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import importlib.util
import os
import tempfile
import unittest
import warnings

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_DIR)
FIXTURE_DIR = os.path.join(REPO_ROOT, "test", "Fixtures", "models")

HAVE_ONNX = importlib.util.find_spec("onnx") is not None
HAVE_TORCH = HAVE_ONNX and importlib.util.find_spec("torch") is not None

if HAVE_ONNX:
    import onnx
    from onnx import numpy_helper
if HAVE_TORCH:
    import torch

    from pipe_opt import export_for_pipeline
    from pipe_opt import models
    from pipe_opt.export import ExportError

    torch.set_num_threads(1)


def nodes_of(model, op_type):
    return [node for node in model.graph.node if node.op_type == op_type]


def attribute(node, name, default=None):
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def batch_dims(model):
    """Dim 0 of every input and output; a scalar output (a loss reduced over
    the batch) has none."""
    values = list(model.graph.input) + list(model.graph.output)
    return {v.name: v.type.tensor_type.shape.dim[0].dim_param for v in values
            if v.type.tensor_type.shape.dim}


def constant_values(model):
    return {node.output[0]: numpy_helper.to_array(attribute(node, "value"))
            for node in nodes_of(model, "Constant")}


@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not importable")
class ExportTest(unittest.TestCase):
    def setUp(self):
        self.directory = tempfile.TemporaryDirectory()
        self.addCleanup(self.directory.cleanup)
        # Tracing notes (BatchNorm's batch-size check becoming a constant) are expected.
        quiet = warnings.catch_warnings()
        quiet.__enter__()
        self.addCleanup(quiet.__exit__, None, None, None)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)

    def export(self, name, training=True, **kwargs):
        built = models.build(name, "tiny", training=training)
        self.state_before = {k: v.clone() for k, v in built.model.state_dict().items()}
        path = os.path.join(self.directory.name, f"{name}.onnx")
        report = export_for_pipeline(built.model, built.example_inputs, path,
                                     built.input_names, built.output_names,
                                     training=training, **kwargs)
        return built, report, onnx.load(path)

    def test_training_mode_batchnorm_and_names(self):
        built, report, model = self.export("resnet50")
        self.assertTrue(report.ok, report.errors)
        self.assertEqual([v.name for v in model.graph.input], ["input"])
        self.assertEqual([v.name for v in model.graph.output], ["logits"])
        self.assertEqual(batch_dims(model), {"input": "batch", "logits": "batch"})
        self.assertEqual(report.opset, 17)

        batch_norms = nodes_of(model, "BatchNormalization")
        self.assertEqual(len(batch_norms), 53)
        for node in batch_norms:
            self.assertEqual(attribute(node, "training_mode"), 1)
            self.assertEqual(len(node.output), 3)  # y, running mean, running var

        # Initializers carry the framework's names: every parameter and the
        # running statistics; num_batches_tracked is never read.
        state = self.state_before
        expected = {n for n in state if not n.endswith("num_batches_tracked")}
        self.assertEqual(set(report.initializer_names), expected)
        # Values are the model's before the export (tracing in training mode
        # runs a forward pass that updates the running statistics)...
        for tensor in model.graph.initializer:
            self.assertTrue(torch.equal(torch.from_numpy(numpy_helper.to_array(tensor).copy()),
                                        state[tensor.name]), tensor.name)
        # ...and the model keeps them.
        for name, value in built.model.state_dict().items():
            self.assertTrue(torch.equal(value, state[name]), name)

    def test_training_mode_dropout_and_tied_head(self):
        built, report, model = self.export("gpt2")
        self.assertTrue(report.ok, report.errors)
        self.assertEqual(batch_dims(model), {"input_ids": "batch", "logits": "batch"})
        # The sequence length reaches the output through Shape/Range; the
        # declared output shape is still static.
        logits_dims = model.graph.output[0].type.tensor_type.shape.dim
        self.assertEqual([d.dim_value for d in logits_dims[1:]], [32, 256])
        constants = constant_values(model)
        dropouts = nodes_of(model, "Dropout")
        self.assertEqual(len(dropouts), 1 + 3 * 2)  # embeddings; attention, residual, MLP per block
        for node in dropouts:
            self.assertEqual(len(node.input), 3)  # data, ratio, training_mode
            self.assertAlmostEqual(float(constants[node.input[1]]), 0.1, places=6)
            self.assertTrue(bool(constants[node.input[2]]))
        self.assertIn("wte.weight", report.initializer_names)
        self.assertNotIn("lm_head.weight", report.initializer_names)  # tied to wte
        self.assertEqual(len(nodes_of(model, "Trilu")), 2)  # causal mask per block
        self.assertEqual(len(nodes_of(model, "LayerNormalization")), 5)

    def test_dense_mixture_of_experts(self):
        built, report, model = self.export("moe")
        self.assertTrue(report.ok, report.errors)
        self.assertEqual(batch_dims(model), {"input_ids": "batch", "logits": "batch"})
        config = models.moe.TINY
        # Every expert of every block is in the graph, with its own weights; the
        # gate is a softmax over the experts and the mixture one sum over them.
        experts = [n for n in report.initializer_names if ".moe.experts." in n]
        self.assertEqual(len(experts), 4 * config.experts * config.layers)
        self.assertEqual(len(nodes_of(model, "ReduceSum")), config.layers)
        self.assertEqual(len(nodes_of(model, "Softmax")), 2 * config.layers)  # attention, gate
        self.assertIn("wte.weight", report.initializer_names)
        self.assertNotIn("lm_head.weight", report.initializer_names)  # tied to wte

    def test_the_exporter_needs_an_output_directory(self):
        spec = importlib.util.spec_from_file_location(
            "export_models", os.path.join(PYTHON_DIR, "scripts", "export_models.py"))
        script = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(script)
        with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):
            with self.assertRaises(SystemExit):
                script.parse_args(["--size", "tiny"])
        self.assertEqual(script.parse_args(["--size", "real", "--out", "x"]).out, "x")

    def test_eval_mode_keeps_batchnorm_unfolded(self):
        built, report, model = self.export("resnet50", training=False, opset=13)
        self.assertTrue(report.ok, report.errors)
        self.assertEqual(report.opset, 13)
        batch_norms = nodes_of(model, "BatchNormalization")
        self.assertEqual(len(batch_norms), 53)
        for node in batch_norms:
            self.assertEqual(len(node.output), 1)
            self.assertEqual(attribute(node, "training_mode", 0), 0)
        # Not folded into the convolutions (which would rename them onnx::Conv_N).
        self.assertEqual(len(nodes_of(model, "Conv")), 53)
        self.assertFalse([n for n in report.initializer_names if n.startswith("onnx::")])

    def test_export_restores_the_model_mode(self):
        built = models.build("mobilenet_v2", "tiny", training=True)
        path = os.path.join(self.directory.name, "mobilenet_v2.onnx")
        export_for_pipeline(built.model, built.example_inputs, path, built.input_names,
                            built.output_names, training=False)
        self.assertTrue(all(m.training for m in built.model.modules()))

    def test_eval_mode_has_no_dropout(self):
        _, report, model = self.export("bert", training=False)
        self.assertTrue(report.ok, report.errors)
        self.assertEqual(nodes_of(model, "Dropout"), [])
        self.assertEqual(batch_dims(model), {"input_ids": "batch", "attention_mask": "batch",
                                             "last_hidden_state": "batch",
                                             "pooler_output": "batch"})

    def test_inception_aux_output_only_in_training(self):
        _, train_report, _ = self.export("inception_v3")
        self.assertEqual(train_report.output_names, ["logits", "aux_logits"])
        _, eval_report, _ = self.export("inception_v3", training=False)
        self.assertEqual(eval_report.output_names, ["logits"])
        self.assertLess(eval_report.num_parameters, train_report.num_parameters)

    def test_static_batch_when_not_dynamic(self):
        _, report, model = self.export("vgg16", dynamic_batch=False)
        self.assertTrue(report.ok, report.errors)
        self.assertEqual(model.graph.input[0].type.tensor_type.shape.dim[0].dim_value, 2)

    def test_external_data(self):
        _, report, _ = self.export("gpt2", external_data=True)
        self.assertTrue(report.ok, report.errors)
        self.assertTrue(os.path.isfile(report.external_data_path))
        proto_only = onnx.load(report.path, load_external_data=False)
        self.assertTrue(all(t.data_location == onnx.TensorProto.EXTERNAL
                            for t in proto_only.graph.initializer))
        self.assertGreater(os.path.getsize(report.external_data_path),
                           4 * report.num_parameters - 1)

    def test_unused_parameter_is_reported(self):
        class WithUnused(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.used = torch.nn.Linear(4, 4)
                self.unused = torch.nn.Linear(4, 4)

            def forward(self, x):
                return self.used(x)

        path = os.path.join(self.directory.name, "unused.onnx")
        with self.assertRaisesRegex(ExportError, r"unused\.weight"):
            export_for_pipeline(WithUnused(), torch.zeros(2, 4), path)
        report = export_for_pipeline(WithUnused(), torch.zeros(2, 4), path, strict=False)
        self.assertEqual(report.missing_parameters, ["unused.bias", "unused.weight"])
        self.assertFalse(report.ok)

    def test_eval_merge_of_equal_parameters_is_explained(self):
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 1), torch.nn.BatchNorm2d(4),
                                    torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4))
        path = os.path.join(self.directory.name, "merged.onnx")
        # Fresh BatchNorm weights are all ones: torch's eval export merges them.
        with self.assertRaisesRegex(ExportError, r"3\.weight -> 1\.weight"):
            export_for_pipeline(model, torch.zeros(2, 3, 8, 8), path, training=False)
        report = export_for_pipeline(model, torch.zeros(2, 3, 8, 8), path, training=True)
        self.assertTrue(report.ok, report.errors)


def structure(model):
    """Module types in order, with what decides the topology (kernel, stride,
    padding, depthwise or not, residual flags) but not widths."""
    signature = []
    for module in model.modules():
        key = [type(module).__name__]
        for attr in ("kernel_size", "stride", "padding"):
            if hasattr(module, attr):
                key.append(getattr(module, attr))
        if isinstance(module, torch.nn.Conv2d):
            key.append(module.groups > 1)
        for attr, value in sorted(vars(module).items()):
            if isinstance(value, bool) and attr not in ("training", "inplace"):
                key.append((attr, value))
            if attr == "downsample":
                key.append(("downsample", value is not None))
        signature.append(tuple(key))
    return signature


@unittest.skipUnless(HAVE_TORCH, "torch is not importable")
class ModelDefinitionTest(unittest.TestCase):
    def test_real_sizes_match_published_counts_and_tiny_has_same_structure(self):
        for name, family in models.FAMILIES.items():
            with self.subTest(name=name):
                torch.manual_seed(0)
                real = family.make(family.configs["real"])
                tiny = family.make(family.configs["tiny"])
                self.assertEqual(models.count_parameters(real), family.real_parameters)
                self.assertLess(models.count_parameters(tiny), 200_000)
                del real
                # Tiny transformers are shallower; compare with a real one of equal depth.
                config = family.configs["real"]
                if hasattr(config, "layers"):
                    config = dataclasses.replace(config, layers=family.configs["tiny"].layers)
                # A tiny U-Net has fewer levels; compare with the real one's first ones.
                if hasattr(config, "widths"):
                    levels = len(family.configs["tiny"].widths)
                    config = dataclasses.replace(config, widths=config.widths[:levels])
                self.assertEqual(structure(tiny), structure(family.make(config)))

    def test_inception_without_auxiliary_head(self):
        without_aux = dataclasses.replace(models.inception.REAL, aux_logits=False)
        self.assertEqual(models.count_parameters(models.inception.InceptionV3(without_aux)),
                         models.INCEPTION_V3_WITHOUT_AUX_PARAMETERS)


@unittest.skipUnless(HAVE_ONNX, "onnx is not importable")
class FixtureTest(unittest.TestCase):
    """The committed fixtures are valid and have the form the importer expects."""

    FAMILIES = ("resnet50", "densenet121", "inception_v3", "vgg16", "mobilenet_v2", "gpt2",
                "bert", "mlp", "transformer", "moe", "moe_top2", "unet", "fcn", "lstm_lm",
                "gru_tagger", "mlp_loss")

    def test_every_family_has_a_fixture(self):
        for name in self.FAMILIES:
            self.assertTrue(os.path.isfile(os.path.join(FIXTURE_DIR, f"{name}.onnx")), name)

    def test_fixtures_are_valid_and_batch_is_symbolic(self):
        paths = sorted(glob.glob(os.path.join(FIXTURE_DIR, "*.onnx")))
        self.assertGreaterEqual(len(paths), len(self.FAMILIES))
        total = 0
        for path in paths:
            with self.subTest(path=os.path.basename(path)):
                onnx.checker.check_model(path)
                model = onnx.load(path)
                self.assertEqual(set(batch_dims(model).values()), {"batch"})
                names = [t.name for t in model.graph.initializer]
                self.assertFalse([n for n in names if n.startswith("onnx::")], names)
                training = "_eval" not in os.path.basename(path)
                opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
                for node in nodes_of(model, "BatchNormalization"):
                    if opset >= 14:
                        self.assertEqual(attribute(node, "training_mode", 0), int(training))
                        self.assertEqual(len(node.output), 3 if training else 1)
                    else:  # BatchNormalization-9: training is having 5 outputs
                        self.assertEqual(len(node.output), 5 if training else 1)
                stem = os.path.splitext(os.path.basename(path))[0]
                family = stem.split("_eval")[0].split("_opset")[0]
                has_dropout = family not in ("resnet50", "densenet121", "mlp", "unet", "fcn",
                                             "lstm_lm", "gru_tagger", "mlp_loss")
                self.assertEqual(bool(nodes_of(model, "Dropout")), training and has_dropout)
                total += os.path.getsize(path)
        self.assertLess(total, 7 * 10**6)  # fixtures stay small


if __name__ == "__main__":
    unittest.main()
