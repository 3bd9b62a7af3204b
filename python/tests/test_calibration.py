"""Tests of pipe_opt.calibration: the fit recovers known coefficients, pipe-opt
evaluates a calibration exactly as the fit's formula does, and the shared
PipeDream/DAPPLE profiles map onto the ONNX exports of the same models.

pipe-opt is found through $PIPE_OPT or build/bin/pipe-opt; the profiles in
../shared/data/profiles (or $PIPE_PROFILES). Tests that need either, or
torch to export a model, skip without them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import random
import tempfile
import unittest

from pipe_opt import calibration as cal

PYTHON_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO_ROOT = os.path.dirname(PYTHON_DIR)
FIXTURE_DIR = os.path.join(REPO_ROOT, "test", "Fixtures", "models")
PROFILES = os.environ.get("PIPE_PROFILES",
                          os.path.join(REPO_ROOT, "..", "shared", "data", "profiles"))
HAVE_TORCH = (importlib.util.find_spec("onnx") is not None
              and importlib.util.find_spec("torch") is not None)
HAVE_NUMPY = importlib.util.find_spec("numpy") is not None


from tool_paths import find_tool  # noqa: E402

PIPE_OPT = find_tool("PIPE_OPT", "pipe-opt")

# Known coefficients the synthetic tests fit back, per (family, pass).
TRUE_MODELS = {
    ("conv_3x3s1", "forward"): cal.FamilyModel(4e-6, (1.2, -0.05, -0.03, 0.02, -0.2, 0.01, -0.005, 0.0)),
    ("conv_3x3s1", "backward_data"): cal.FamilyModel(4e-6, (0.4, 0.03, -0.02, 0.01, 0.1, 0.0, 0.0, -0.01)),
    ("conv_3x3s1", "backward_weight"): cal.FamilyModel(4e-6, (-0.3, 0.08, 0.01, -0.04, 0.0, 0.0, 0.0, 0.0)),
    # The families share their size terms (RIDGE_FAMILY): the GEMMs differ
    # from the convolutions by their intercept.
    ("gemm", "forward"): cal.FamilyModel(4e-6, (-0.6, -0.05, -0.03, 0.02, -0.2, 0.01, -0.005, 0.0)),
    ("normalization", "forward"): cal.FamilyModel(4e-6, memory_efficiency=0.45),
    ("pooling", "backward"): cal.FamilyModel(4e-6, memory_efficiency=0.6, flop_efficiency=0.05,
                                             memory_slope=-0.1),
    ("elementwise", "backward"): cal.FamilyModel(4e-6, memory_efficiency=0.8),
}
TRUE_LAYER_OVERHEAD = (60e-6, 30e-6)  # forward, backward; on the fit's grid


def synthetic_samples(rng: random.Random, count: int, gemms: int = 12) -> list:
    """Times from TRUE_MODELS plus a profiler cost per layer; `gemms` GEMM
    layers, `count` of every other family."""
    samples = []
    keys = [("conv_3x3s1", 0), ("conv_3x3s1", 1), ("gemm", 0), ("normalization", 0),
            ("pooling", 1), ("elementwise", 1)]
    for family, direction in keys:
        n = count if family != "gemm" else gemms
        for _ in range(n):
            shape = (1.0, float(rng.choice([49, 196, 784, 3136]) * rng.choice([32, 64, 128])),
                     float(rng.choice([32, 64, 128, 256, 512])),
                     float(rng.choice([27, 288, 576, 1152, 2304, 4608])),
                     float(rng.choice([1, 1, 4])))
            flops = 2 * shape[1] * shape[2] * shape[3]
            if family in cal.COMPUTE_FAMILIES and direction == 0:
                parts = [cal.Part("forward", flops, 1, cal.kernel_dims(shape, "forward"))]
            elif family in cal.COMPUTE_FAMILIES:
                parts = [cal.Part("backward_weight", flops, 1,
                                  cal.kernel_dims(shape, "backward_weight"))]
                if rng.random() < 0.8:  # a first layer has no data gradient
                    parts.append(cal.Part("backward_data", flops, 1,
                                          cal.kernel_dims(shape, "backward_data")))
            else:
                work = rng.uniform(1e5, 5e8)
                parts = [cal.Part(cal.PASSES[direction], work, rng.choice([1, 2]),
                                  flops=work * rng.choice([0.25, 1, 4]))]
            seconds = sum(cal.predict(TRUE_MODELS[(family, part.name)], family, cal.V100_FP32,
                                      part) for part in parts)
            samples.append(cal.Sample(family, direction, parts,
                                      seconds + TRUE_LAYER_OVERHEAD[direction],
                                      per_layer_overhead=True))
    return samples


@unittest.skipUnless(HAVE_NUMPY, "needs numpy")
class FitTest(unittest.TestCase):
    def test_recovers_known_coefficients(self):
        samples = synthetic_samples(random.Random(7), 60)
        fitted = cal.fit(samples, cal.V100_FP32)
        self.assertEqual(set(fitted.models), set(TRUE_MODELS))
        for direction in (0, 1):
            self.assertAlmostEqual(fitted.layer_overhead_s[direction],
                                   TRUE_LAYER_OVERHEAD[direction], delta=1e-9)
        for key, true in TRUE_MODELS.items():
            got = fitted.models[key]
            with self.subTest(key=key):
                self.assertAlmostEqual(got.overhead_s, true.overhead_s, delta=1e-9)
                if key[0] == "gemm":
                    # Few samples: its times come back.
                    for s in samples:
                        if s.family == "gemm":
                            self.assertAlmostEqual(fitted.measured_prediction(s) / s.seconds,
                                                   1.0, delta=0.02)
                elif key[0] in cal.COMPUTE_FAMILIES:
                    for g, t in zip(got.log_efficiency, true.log_efficiency):
                        self.assertAlmostEqual(g, t, delta=0.02)
                else:
                    self.assertAlmostEqual(got.memory_efficiency, true.memory_efficiency,
                                           delta=0.005 * true.memory_efficiency)
                    self.assertEqual(got.flop_efficiency, true.flop_efficiency)
                    self.assertAlmostEqual(got.memory_slope, true.memory_slope, delta=1e-9)

    def test_a_family_with_few_samples_keeps_the_roofline(self):
        few = cal.MIN_FAMILY_SAMPLES - 1
        samples = synthetic_samples(random.Random(7), 60, gemms=few)
        fitted = cal.fit(samples, cal.V100_FP32)
        self.assertEqual(set(fitted.models), set(TRUE_MODELS) - {("gemm", "forward")})
        # The families that keep their models are fitted as before.
        for key in (("conv_3x3s1", "forward"), ("conv_3x3s1", "backward_data")):
            for g, t in zip(fitted.models[key].log_efficiency, TRUE_MODELS[key].log_efficiency):
                self.assertAlmostEqual(g, t, delta=0.02)

    def test_noisy_times_give_unbiased_medians(self):
        rng = random.Random(3)
        samples = synthetic_samples(rng, 80)
        for s in samples:
            s.seconds *= math.exp(rng.gauss(0, 0.1))
        fitted = cal.fit(samples, cal.V100_FP32)
        for key in {(s.family, s.direction) for s in samples}:
            ratios = sorted(fitted.measured_prediction(s) / s.seconds
                            for s in samples if (s.family, s.direction) == key)
            with self.subTest(key=key):
                self.assertLess(abs(math.log(ratios[len(ratios) // 2])), 0.05)

    def test_json_round_trip(self):
        fitted = TRUE_MODELS
        back = cal.models_from_json(json.loads(json.dumps(cal.calibration_json(fitted, "x"))))
        self.assertEqual(set(back), set(fitted))
        for key, model in fitted.items():
            self.assertAlmostEqual(back[key].memory_efficiency, model.memory_efficiency, 5)
            for a, b in zip(back[key].log_efficiency, model.log_efficiency):
                self.assertAlmostEqual(a, b, 5)


class ProfileTest(unittest.TestCase):
    TEXT = ("node1 -- Input0 -- forward_compute_time=0.000, backward_compute_time=0.000, "
            "activation_size=100.0, parameter_size=0.000\n"
            "node2 -- Conv2d(3, 8, kernel_size=(3, 3), stride=(1, 1)) -- "
            "forward_compute_time=1.500, backward_compute_time=2.250, "
            "activation_size=2048.0, parameter_size=864.000\n"
            "\tnode1 -- node2\n")

    def test_reads_layers_and_rewrites_times(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(self.TEXT)
        try:
            profile = cal.read_profile(f.name)
            self.assertEqual(profile.topological_order(), ["node1", "node2"])
            conv = profile.layers["node2"]
            self.assertEqual((conv.kind, conv.forward_ms, conv.backward_ms),
                             ("Conv2d", 1.5, 2.25))
            self.assertFalse(profile.layers["node1"].timed)
            text = profile.with_times({"node2": (0.125, 4.0)})
            with open(f.name, "w") as out:
                out.write(text)
            again = cal.read_profile(f.name)
            self.assertEqual((again.layers["node2"].forward_ms,
                              again.layers["node2"].backward_ms), (0.125, 4.0))
            self.assertEqual(again.edges, [("node1", "node2")])
        finally:
            os.unlink(f.name)

    def test_rejects_a_line_that_is_neither(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(self.TEXT + "node3 -- garbage\n")
        try:
            with self.assertRaisesRegex(ValueError, ":4: neither a layer nor an edge"):
                cal.read_profile(f.name)
        finally:
            os.unlink(f.name)


class AbsorptionTest(unittest.TestCase):
    """PipeDream times modules by hooks: an untimed Add's kernels are in the
    time of the timed layer that consumes it; an untimed Concat's are not
    charged; the profile's 0 stays 0."""

    TEXT = ("node1 -- Conv2d(3, 8, kernel_size=(1, 1)) -- forward_compute_time=1.0, "
            "backward_compute_time=2.0, activation_size=4.0, parameter_size=96.0\n"
            "node2 -- Add(inplace) -- forward_compute_time=0.000, backward_compute_time=0.000, "
            "activation_size=4.0, parameter_size=0.0\n"
            "node3 -- ReLU(inplace) -- forward_compute_time=0.5, backward_compute_time=0.5, "
            "activation_size=4.0, parameter_size=0.0\n"
            "node4 -- Concat(1) -- forward_compute_time=0.000, backward_compute_time=0.000, "
            "activation_size=8.0, parameter_size=0.0\n"
            "node5 -- ReLU(inplace) -- forward_compute_time=0.5, backward_compute_time=0.5, "
            "activation_size=8.0, parameter_size=0.0\n"
            "node1 -- node2\nnode2 -- node3\nnode3 -- node4\nnode1 -- node4\nnode4 -- node5\n")

    @staticmethod
    def record(name, family, us):
        return cal.CostRecord(name, "nn.x", "elementwise", family, (1e3, 1e3), 0.0,
                              (1e6, 2e6), (1, 1), (0.0, 0.0, 0.0, 0.0, 1.0),
                              (us * 1e-6, 2 * us * 1e-6))

    def test_add_goes_to_its_consumer(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(self.TEXT)
        try:
            profile = cal.read_profile(f.name)
        finally:
            os.unlink(f.name)
        mapping = cal.Mapping({"node1": ["conv"], "node2": ["add"], "node3": ["relu"],
                               "node4": ["cat"], "node5": ["relu2"]}, [])
        records = {"conv": [self.record("conv", "conv_1x1", 100)],
                   "add": [self.record("add", "elementwise", 10)],
                   "relu": [self.record("relu", "elementwise", 20)],
                   "cat": [self.record("cat", "data_movement", 30)],
                   "relu2": [self.record("relu2", "elementwise", 40)]}
        layers = {ml.layer.id: ml for ml in cal.mapped_layers(profile, mapping, records)}
        self.assertAlmostEqual(layers["node3"].predicted_ms(0), 0.030)  # relu + add
        self.assertAlmostEqual(layers["node3"].predicted_ms(1), 0.060)
        self.assertEqual(layers["node3"].family, "elementwise")
        self.assertEqual(layers["node2"].predicted_ms(0), 0.0)  # untimed stays 0
        self.assertAlmostEqual(layers["node5"].predicted_ms(0), 0.040)  # no concat
        # The ReLU + Add sample sums the two element-wise ops' bytes and kernels.
        samples = [s for s in cal.samples_of(layers.values(), "t")
                   if s.label == "t/node3" and s.direction == 0]
        self.assertEqual(len(samples), 1)
        self.assertEqual(sum(p.work for p in samples[0].parts), 2e6)
        self.assertEqual(sum(p.kernels for p in samples[0].parts), 2)


@unittest.skipUnless(PIPE_OPT, "pipe-opt is not built")
class PipeOptAgreesTest(unittest.TestCase):
    """pipe-opt's calibrated times equal the fit's formula on every op of a
    CNN and a transformer (random coefficients for every family)."""

    def test_calibrated_times_match_the_formula(self):
        rng = random.Random(11)
        models = {}
        for family in cal.FAMILIES:
            compute = family in cal.COMPUTE_FAMILIES
            for name in (cal.COMPUTE_PASSES if compute else cal.MEMORY_PASSES)[0] + \
                    (cal.COMPUTE_PASSES if compute else cal.MEMORY_PASSES)[1]:
                if compute:
                    # Narrow shape ranges, so that the clamping is exercised.
                    models[(family, name)] = cal.FamilyModel(
                        rng.uniform(0, 20e-6), (rng.uniform(-1, 0.5), rng.uniform(-0.1, 0.1),
                                                rng.uniform(-0.1, 0.1), rng.uniform(-0.1, 0.1),
                                                rng.uniform(-0.3, 0.3), rng.uniform(-0.01, 0.01),
                                                rng.uniform(-0.01, 0.01),
                                                rng.uniform(-0.01, 0.01)),
                        shape_min=(rng.uniform(1, 64), rng.uniform(1, 256), rng.uniform(1, 16),
                                   1.0),
                        shape_max=(rng.uniform(64, 512), rng.uniform(256, 4096),
                                   rng.uniform(16, 128), rng.uniform(1, 4)))
                else:
                    models[(family, name)] = cal.FamilyModel(
                        rng.uniform(0, 20e-6), memory_efficiency=rng.uniform(0.2, 1.5),
                        flop_efficiency=rng.choice([0.0, rng.uniform(0.01, 1)]),
                        memory_slope=rng.uniform(-0.3, 0.3))
        calibration = cal.calibration_json(models, "test", fuse_elementwise=False)
        with tempfile.TemporaryDirectory() as tmp:
            target = os.path.join(tmp, "target.json")
            with open(target, "w") as f:
                json.dump({"base": "v100", "name": "v100-test", "calibration": calibration}, f)
            back = cal.models_from_json(calibration)
            checked = set()
            for fixture in ("resnet50.onnx", "inception_v3.onnx", "gpt2.onnx"):
                records = cal.cost_records(PIPE_OPT, os.path.join(FIXTURE_DIR, fixture), 4,
                                           target)
                for r in records:
                    if not r.family:
                        continue
                    for direction in (0, 1):
                        parts = cal.parts_of(r, direction)
                        if not parts:
                            continue
                        expected = sum(cal.predict(back[(r.family, part.name)], r.family,
                                                   cal.V100_FP32, part) for part in parts)
                        with self.subTest(op=r.name, direction=direction):
                            # fwd_us/bwd_us print with 3 decimals
                            self.assertAlmostEqual(r.seconds[direction] * 1e6, expected * 1e6,
                                                   delta=1.5e-3 + 1e-6 * expected * 1e6)
                        checked.add(r.family)
            self.assertTrue({"conv_1x1", "conv_3x3s1", "conv_other", "gemm", "elementwise",
                             "normalization", "pooling", "data_movement"} <= checked, checked)


@unittest.skipUnless(HAVE_TORCH and PIPE_OPT, "needs torch, onnx and pipe-opt")
@unittest.skipUnless(os.path.isdir(PROFILES), "the shared profiles are absent")
class MappingTest(unittest.TestCase):
    """Every computation layer of the shared profiles maps to an ONNX node of
    the same op type, signature and output size."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def check(self, name: str, **overrides):
        import dataclasses
        import onnx
        spec = cal.MEASURED_MODELS[name]
        if overrides:  # a narrower variant: the same layers and names, a faster export
            spec = dataclasses.replace(spec, overrides=tuple(
                {**dict(spec.overrides), **overrides}.items()))
        profile = cal.read_profile(os.path.join(PROFILES, spec.profile))
        path = cal.export_measured_model(spec, self.tmp.name)
        mapping = cal.map_profile(profile, path, spec.mapping)
        self.assertEqual(mapping.unmapped, [])
        model = onnx.load(path, load_external_data=False)
        # Output sizes of mapped nodes equal the profile's activation sizes.
        inferred = onnx.shape_inference.infer_shapes(model)
        dims = {}
        for v in list(inferred.graph.value_info) + list(inferred.graph.output):
            dims[v.name] = [d.dim_value if d.HasField("dim_value") else spec.batch
                            for d in v.type.tensor_type.shape.dim]
        output_of = {n.name: n.output[0] for n in model.graph.node}
        compared = 0
        for lid, names in mapping.nodes.items():
            layer = profile.layers[lid]
            if spec.mapping != "signature" or layer.activation_bytes <= 0:
                continue
            shape = dims.get(output_of[names[0]])
            if shape is None:
                continue
            self.assertEqual(4 * math.prod(shape), layer.activation_bytes,
                             f"{name} {lid} {layer.description} -> {names[0]} {shape}")
            compared += 1
        computations = [lid for lid, layer in profile.layers.items()
                        if layer.kind in cal._ONNX_TYPES]
        if spec.mapping == "signature":
            # Every timed computation maps; the others are untimed concatenations.
            timed = [lid for lid in computations if profile.layers[lid].timed]
            self.assertEqual(sorted(set(timed) - set(mapping.nodes)), [])
            for lid in set(computations) - set(mapping.nodes):
                self.assertEqual(profile.layers[lid].kind, "Concat")
            self.assertGreater(compared, 0.9 * len(computations))
        return mapping

    def test_resnet50(self):
        self.check("resnet50")

    def test_inception_v3(self):
        self.check("inception_v3")

    def test_bert_large_layers(self):
        mapping = self.check("bert_large", hidden=64, heads=4, intermediate=128)
        profile = cal.read_profile(os.path.join(PROFILES, "dapple/bert-24-pbs-6.txt"))
        by_name = {layer.description: lid for lid, layer in profile.layers.items()}
        for i in range(24):
            names = mapping.nodes[by_name[f"layer_{i}"]]
            self.assertTrue(all(n.startswith(f"/layers.{i}/") for n in names))
            self.assertGreater(len(names), 20)


if __name__ == "__main__":
    unittest.main()
