"""Tests of pipe_opt.plan_model and pipe_opt.plan_problem, the Python bindings of
the main job and of the partitioner (python/native, python/pipe_opt/plan.py).

Each binding is checked against its command-line tool, an independent path to
the same planner: plan_model against `pipe-opt MODEL --pipeline-stages=N -o DIR`
($PIPE_OPT, else build/bin/pipe-opt), plan_problem against `pipe-plan`
($PIPE_PLAN, else build/bin/pipe-plan). The tests skip, with the reason, when
the compiled module pipe_opt._native or a tool is not built. Run from the
repository root with the package and the module importable, e.g.
    PYTHONPATH=python:build/python python3 -m pytest python/tests/test_plan_model.py
(scripts/run-tests.sh does this; docs/python.md).
"""

from __future__ import annotations

import concurrent.futures
import importlib
import importlib.util
import json
import os
import re
import subprocess
import tempfile
import unittest
import warnings

import pipe_opt
from pipe_opt import Plan, PlanError, plan_model, plan_problem
from pipe_opt.plan import module_names_of_nodes

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(REPO_ROOT, "test", "Fixtures", "models")

try:
    importlib.import_module("pipe_opt._native")
    NATIVE_MISSING = None
except ImportError as error:
    NATIVE_MISSING = (f"pipe_opt._native is not built or not on the path ({error}): build it "
                      "with scripts/setup.sh (needs pybind11-dev) and run with "
                      "PYTHONPATH=python:build/python, or pip install ./python")

HAVE_TORCH = (importlib.util.find_spec("torch") is not None
              and importlib.util.find_spec("onnx") is not None)
if HAVE_TORCH:
    import onnx
    import torch

    from pipe_opt import models

    torch.set_num_threads(1)


from tool_paths import find_tool  # noqa: E402

PIPE_OPT = find_tool("PIPE_OPT", "pipe-opt")
PIPE_PLAN = find_tool("PIPE_PLAN", "pipe-plan")


def run_pipe_opt(model: str, out: str, stages: int, micro_batch_size: int = 0,
                 memory: str = "80GB", target: str = "h100", **options):
    """The CLI with the arguments plan_model would pass for the same call."""
    command = [PIPE_OPT, model, f"--pipeline-stages={stages}", f"--memory={memory}",
               f"--target={target}", "--no-progress", "-o", out]
    if micro_batch_size:
        command.append(f"--micro-batch-size={micro_batch_size}")
    for name, value in options.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        command.append(f"--{name.replace('_', '-')}={value}")
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


@unittest.skipIf(NATIVE_MISSING, NATIVE_MISSING)
@unittest.skipIf(PIPE_OPT is None, "pipe-opt is not built (build/bin/pipe-opt or $PIPE_OPT)")
class PlanModelOnnxTest(unittest.TestCase):
    """plan_model on the shipped ONNX fixtures, against the pipe-opt CLI."""

    def setUp(self):
        self.work = tempfile.TemporaryDirectory(prefix="pipe-opt-test-")
        self.addCleanup(self.work.cleanup)

    def path(self, name: str) -> str:
        return os.path.join(self.work.name, name)

    def assert_same_plan(self, plan: Plan, cli_dir: str):
        cli = json.loads(read(os.path.join(cli_dir, "plan.json")))
        self.assertEqual(plan.period_ms, cli["period_ms"])
        self.assertEqual(plan.iteration_ms, cli["iteration_ms"])
        self.assertEqual(plan.stage_of, cli["stage_of"])
        self.assertEqual(plan.gpu_of_stage, cli["gpu_of_stage"])
        self.assertEqual(len(plan.stages), len(cli["stage_metrics"]))
        for stage, metrics in zip(plan.stages, cli["stage_metrics"]):
            self.assertEqual(stage.gpu, metrics["gpu"])
            self.assertEqual(stage.forward_ms, metrics["forward_ms"])
            self.assertEqual(stage.backward_ms, metrics["backward_ms"])
            self.assertEqual(stage.memory_bytes, metrics["memory_bytes"])
        # The rest of the document too: the same planner on the same input.
        self.assertEqual(plan.data, cli)

    def test_matches_cli(self):
        model = fixture("gpt2.onnx")
        cli = run_pipe_opt(model, self.path("cli"), stages=4, micro_batch_size=4)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        plan = plan_model(model, stages=4, micro_batch_size=4, output_dir=self.path("py"))
        self.assert_same_plan(plan, self.path("cli"))
        self.assertEqual(plan.report, cli.stdout)
        self.assertEqual(plan.to_json(), read(self.path("cli/plan.json")))
        self.assertEqual(plan.to_svg(), read(self.path("cli/schedule.svg")))
        self.assertIn("<svg", plan.to_svg())
        # The directory holds the main job's outputs, the plan the same files.
        self.assertEqual(plan.output_dir, self.path("py"))
        self.assertEqual(sorted(os.listdir(self.path("py"))), sorted(os.listdir(self.path("cli"))))
        for name, text in plan.files().items():
            self.assertEqual(text, read(self.path(os.path.join("py", name))), name)
        saved = plan.save(self.path("saved"))
        self.assertEqual(sorted(os.path.basename(p) for p in saved), sorted(plan.files()))
        self.assertEqual(read(self.path("saved/plan.json")), read(self.path("cli/plan.json")))
        # Figures a user reads: every node has a stage, every stage a GPU.
        self.assertEqual(plan.gpus, 4)
        self.assertEqual(sorted(set(plan.stage_of.values())), list(range(plan.num_stages)))
        self.assertEqual(len(plan.gpu_of_stage), plan.num_stages)
        self.assertGreater(plan.period_ms, 0)
        self.assertGreaterEqual(plan.iteration_ms, plan.period_ms)

    def test_options_pass_through(self):
        model = fixture("resnet50.onnx")
        options = dict(microbatches=8, schedule="1f1b", dtype="bf16", optimizer="sgd",
                       objective="period", time_limit=60, lr=0.01, train=False)
        cli = run_pipe_opt(model, self.path("cli"), stages=3, micro_batch_size=2,
                           memory="40GiB", target="a100-80gb", **options)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        plan = plan_model(model, stages=3, micro_batch_size=2, memory="40GiB",
                          target="a100-80gb", **options)
        self.assert_same_plan(plan, self.path("cli"))
        self.assertIsNone(plan.output_dir)  # a temporary directory, removed
        settings = plan.settings
        self.assertEqual(settings["microbatches"], 8)
        self.assertEqual(settings["dtype"], "bf16")
        self.assertEqual(settings["optimizer"], "sgd")
        self.assertEqual(settings["objective"], "period")
        self.assertEqual(settings["micro_batch_size"], 2)
        self.assertEqual(plan.schedule, "1f1b")
        self.assertEqual(plan.microbatches, 8)

    def test_gpus_split_into_replicas_as_the_cli_does(self):
        # --gpus without --pipeline-stages: the planner chooses replicas x stages.
        model = fixture("gpt2.onnx")
        command = [PIPE_OPT, model, "--gpus=4", "--microbatches=4", "--memory=80GB",
                   "--target=h100", "--micro-batch-size=2", "--no-progress", "-o",
                   self.path("cli")]
        cli = subprocess.run(command, capture_output=True, text=True, timeout=300)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        plan = plan_model(model, stages=None, micro_batch_size=2, gpus=4, microbatches=4,
                          output_dir=self.path("py"))
        self.assert_same_plan(plan, self.path("cli"))
        settings = plan.settings
        self.assertEqual(settings["gpus_in_all"], 4)
        self.assertEqual(settings["microbatches_per_step"], 4)
        self.assertTrue(settings["stages_chosen"])
        self.assertEqual(settings["replicas"] * settings["gpus"], 4)
        self.assertEqual(settings["replicas"] * settings["microbatches"], 4)
        self.assertEqual(plan.microbatches, settings["microbatches"])
        program = json.loads(read(os.path.join(self.path("py"), "program.json")))
        self.assertEqual(program["replicas"], settings["replicas"])
        self.assertEqual(program["ranks"], settings["gpus"])
        self.assertIn("<- chosen", plan.report)
        # program.json predicts the report's iteration with the all-reduces, and
        # each rank's all-reduce (0 for one replica: nothing to reduce with).
        chosen = re.search(r"^ +(\d+) x (\d+): iteration ([0-9.]+) ms .*<- chosen$",
                           plan.report, re.M)
        self.assertIsNotNone(chosen, plan.report)
        self.assertEqual((int(chosen[1]), int(chosen[2])),
                         (settings["replicas"], settings["gpus"]))
        self.assertAlmostEqual(program["predicted"]["iteration_ms"], float(chosen[3]), places=3)
        for rank in program["predicted"]["ranks"]:
            if settings["replicas"] > 1:
                self.assertGreater(rank["all_reduce_ms"], 0)
            else:
                self.assertEqual(rank.get("all_reduce_ms", 0), 0)
        # A fixed split, and the refusals: no GPUs at all, a split that is not whole.
        fixed = plan_model(model, stages=2, micro_batch_size=2, gpus=4, microbatches=4)
        self.assertEqual((fixed.settings["replicas"], fixed.settings["gpus"]), (2, 2))
        with self.assertRaises(ValueError):
            plan_model(model, stages=None, micro_batch_size=2)
        with self.assertRaises(ValueError) as caught:
            plan_model(model, stages=3, micro_batch_size=2, gpus=4)
        self.assertIn("whole number of replicas", str(caught.exception))

    def test_unknown_option_is_a_value_error_naming_it(self):
        cli = run_pipe_opt(fixture("mlp.onnx"), self.path("cli"), stages=2, micro_batch_size=4,
                           bogus_setting=3)
        self.assertEqual(cli.returncode, 2)
        with self.assertRaises(ValueError) as caught:
            plan_model(fixture("mlp.onnx"), stages=2, micro_batch_size=4, bogus_setting=3)
        self.assertIn("bogus-setting", str(caught.exception))

    def test_inference_export_is_refused_unless_allowed(self):
        # An eval-mode export (BatchNorm with running statistics) plans another network
        # than the one trained: a PlanError with the CLI's notes, or, allowed, a plan.
        model = fixture("resnet50_eval_opset13.onnx")
        cli = run_pipe_opt(model, self.path("cli"), stages=2, micro_batch_size=2)
        self.assertEqual(cli.returncode, 1)
        with self.assertRaises(PlanError) as caught:
            plan_model(model, stages=2, micro_batch_size=2)
        self.assertIn("exported for inference", str(caught.exception))
        self.assertIn("export_for_pipeline", str(caught.exception))
        plan = plan_model(model, stages=2, micro_batch_size=2, allow_inference_export=True,
                          train=False)
        self.assertGreater(plan.period_ms, 0)

    def test_bad_option_value_is_a_value_error(self):
        cli = run_pipe_opt(fixture("mlp.onnx"), self.path("cli"), stages=2, micro_batch_size=4,
                           memory="80")
        self.assertEqual(cli.returncode, 2)
        with self.assertRaises(ValueError) as caught:
            plan_model(fixture("mlp.onnx"), stages=2, micro_batch_size=4, memory="80")
        self.assertIn("80", str(caught.exception))
        self.assertIn("unit", str(caught.exception))
        with self.assertRaises(ValueError):
            plan_model(fixture("mlp.onnx"), stages=0, micro_batch_size=4)

    def test_memory_too_small_is_a_plan_error(self):
        model = fixture("gpt2.onnx")
        cli = run_pipe_opt(model, self.path("cli"), stages=2, micro_batch_size=4, memory="1MB")
        self.assertEqual(cli.returncode, 1)
        with self.assertRaises(PlanError) as caught:
            plan_model(model, stages=2, micro_batch_size=4, memory="1MB",
                       output_dir=self.path("py"))
        error = caught.exception
        self.assertNotIsInstance(error, ValueError)
        # The same diagnostics as the CLI's, but for the output directory they name.
        cli_lines = [line.replace(self.path("cli"), "DIR").replace(model, "MODEL")
                     for line in cli.stderr.splitlines() if line.strip()]
        py_lines = [line.replace(self.path("py"), "DIR").replace(model, "MODEL")
                    for line in error.diagnostics]
        self.assertEqual(py_lines, cli_lines)
        self.assertIn("no plan fits 2 GPUs", error.diagnostics[0])
        self.assertIn(error.diagnostics[0], str(error))
        # The output directory keeps the problem, for pipe-plan.
        self.assertEqual(error.output_dir, self.path("py"))
        self.assertEqual(read(self.path("py/problem.json")), read(self.path("cli/problem.json")))

    def test_symbolic_batch_needs_micro_batch_size(self):
        cli = run_pipe_opt(fixture("mlp.onnx"), self.path("cli"), stages=2)
        self.assertEqual(cli.returncode, 1)
        with self.assertRaises(PlanError) as caught:
            plan_model(fixture("mlp.onnx"), stages=2)
        self.assertIn("--micro-batch-size", str(caught.exception))

    def test_concurrent_calls(self):
        # The GIL is released while planning and each call has its own MLIR context:
        # calls from two threads give the plans they give one after the other.
        calls = [dict(model=fixture("gpt2.onnx"), stages=4, micro_batch_size=4),
                 dict(model=fixture("mlp.onnx"), stages=2, micro_batch_size=8),
                 dict(model=fixture("bert.onnx"), stages=3, micro_batch_size=2),
                 dict(model=fixture("mlp.onnx"), stages=3, micro_batch_size=2)]
        one_by_one = [plan_model(**call).to_json() for call in calls]
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            together = list(pool.map(lambda call: plan_model(**call).to_json(), calls))
        self.assertEqual(together, one_by_one)

    def test_bad_arguments(self):
        with self.assertRaises(FileNotFoundError):
            plan_model(self.path("missing.onnx"), stages=2, micro_batch_size=4)
        with self.assertRaises(TypeError):
            plan_model(42, stages=2)
        with self.assertRaises(ValueError):
            plan_model(fixture("mlp.onnx"), stages=2, micro_batch_size=0)
        with self.assertRaises(ValueError):
            plan_model(fixture("mlp.onnx"), example_inputs=[1], stages=2, micro_batch_size=4)
        with self.assertRaises(ValueError):
            plan_model(fixture("mlp.onnx"), stages=2, micro_batch_size=4, lr={"a": 1})


class ModuleNamesTest(unittest.TestCase):
    """The mapping from torch's ONNX node names to module names (pure Python)."""

    def test_scopes(self):
        modules = ["", "layer1", "layer1.0", "layer1.0.conv1", "layer1.1", "layer1.1.conv1",
                   "relu", "h", "h.0", "h.0.attn", "0", "2", "2.0"]
        nodes = ["/layer1/layer1.0/conv1/Conv", "/layer1/layer1.1/conv1/Conv_3", "/relu/Relu",
                 "/relu_1/Relu", "/h.0/attn/MatMul", "/Flatten", "pipe.loss", "/2/2.0/Gemm",
                 "/0/Gemm", "/unknown/Add"]
        self.assertEqual(module_names_of_nodes(nodes, modules), {
            "/layer1/layer1.0/conv1/Conv": "layer1.0.conv1",
            "/layer1/layer1.1/conv1/Conv_3": "layer1.1.conv1",
            "/relu/Relu": "relu",
            "/relu_1/Relu": "relu",
            "/h.0/attn/MatMul": "h.0.attn",
            "/Flatten": "",
            "pipe.loss": "",
            "/2/2.0/Gemm": "2.0",
            "/0/Gemm": "0",
            "/unknown/Add": "",
        })


@unittest.skipIf(NATIVE_MISSING, NATIVE_MISSING)
@unittest.skipIf(PIPE_OPT is None, "pipe-opt is not built (build/bin/pipe-opt or $PIPE_OPT)")
@unittest.skipUnless(HAVE_TORCH, "torch and onnx are not installed")
class PlanModelTorchTest(unittest.TestCase):
    """plan_model on torch.nn.Modules: exported, planned, nodes mapped to modules."""

    def setUp(self):
        self.work = tempfile.TemporaryDirectory(prefix="pipe-opt-test-")
        self.addCleanup(self.work.cleanup)

    def path(self, name: str) -> str:
        return os.path.join(self.work.name, name)

    def test_sequential_on_two_stages(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 10))
        inputs = torch.randn(8, 64)
        plan = plan_model(model, inputs, stages=2, output_dir=self.path("py"))
        # The export stays beside the outputs (pipe-run reads the weights from it).
        export = self.path("py.onnx")
        self.assertTrue(os.path.isfile(export))
        # The CLI on the same export with the same arguments gives the same plan
        # (the batch of the example inputs is the micro-batch size).
        cli = run_pipe_opt(export, self.path("cli"), stages=2, micro_batch_size=8)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertEqual(plan.data, json.loads(read(self.path("cli/plan.json"))))
        self.assertEqual(plan.settings["micro_batch_size"], 8)
        # Every module of the Sequential has a stage: that of its nodes, which
        # torch names /<index>/<Op>.
        names = [name for name, _ in model.named_modules() if name]
        self.assertEqual(sorted(plan.stage_of_module), sorted(names))
        self.assertEqual(sorted(plan.stages_of_module), sorted(names))
        for name in names:
            stages = {stage for node, stage in plan.stage_of.items()
                      if node.startswith(f"/{name}/")}
            self.assertEqual(stages, {plan.stage_of_module[name]}, name)
            self.assertEqual(plan.stages_of_module[name], [plan.stage_of_module[name]])
        for node, module in plan.module_of_node.items():
            if node.startswith("/"):
                self.assertEqual(node.split("/")[1], module, node)

    def test_nested_modules_match_their_ops(self):
        built = models.build("resnet50", "tiny", training=True)
        export = self.path("resnet.onnx")
        with warnings.catch_warnings():  # the trace's, on BatchNorm's size check
            warnings.simplefilter("ignore", torch.jit.TracerWarning)
            plan = plan_model(built.model, built.example_inputs, stages=4, export_path=export,
                              train=False)
        self.assertIsNone(plan.output_dir)
        graph = onnx.load(export, load_external_data=False).graph
        op_type = {node.name: node.op_type for node in graph.node}
        modules = dict(built.model.named_modules())
        kinds = {"Conv": torch.nn.Conv2d, "BatchNormalization": torch.nn.BatchNorm2d,
                 "Gemm": torch.nn.Linear}
        checked = set()
        for node, module in plan.module_of_node.items():
            if op_type.get(node) in kinds:
                # The module a Conv node maps to is a Conv2d, and so on.
                self.assertIsInstance(modules[module], kinds[op_type[node]], node)
                self.assertEqual(plan.stage_of_module[module], plan.stage_of[node])
                checked.add(module)
        # Every Conv2d, BatchNorm2d and Linear of the model was found.
        expected = {name for name, m in modules.items() if isinstance(m, tuple(kinds.values()))}
        self.assertEqual(checked, expected)
        # A block spanning stages lists them all; one on a single stage has it.
        for module, stages in plan.stages_of_module.items():
            if len(stages) == 1:
                self.assertEqual(plan.stage_of_module[module], stages[0])
            else:
                self.assertNotIn(module, plan.stage_of_module)
        self.assertEqual(len(set(plan.stage_of.values())), plan.num_stages)

    def test_module_needs_example_inputs(self):
        with self.assertRaises(ValueError) as caught:
            plan_model(torch.nn.Linear(4, 4), stages=2)
        self.assertIn("example_inputs", str(caught.exception))


@unittest.skipIf(NATIVE_MISSING, NATIVE_MISSING)
@unittest.skipIf(PIPE_OPT is None, "pipe-opt is not built (build/bin/pipe-opt or $PIPE_OPT)")
@unittest.skipIf(PIPE_PLAN is None, "pipe-plan is not built (build/bin/pipe-plan or $PIPE_PLAN)")
class PlanProblemTest(unittest.TestCase):
    """plan_problem on a problem.json the main job wrote, against pipe-plan."""

    @classmethod
    def setUpClass(cls):
        cls.work = tempfile.TemporaryDirectory(prefix="pipe-opt-test-")
        out = os.path.join(cls.work.name, "out")
        result = run_pipe_opt(fixture("gpt2.onnx"), out, stages=4, micro_batch_size=4,
                              train="false")
        assert result.returncode == 0, result.stderr
        cls.problem = os.path.join(out, "problem.json")
        small = os.path.join(cls.work.name, "small")
        result = run_pipe_opt(fixture("mlp.onnx"), small, stages=2, micro_batch_size=8,
                              train="false")
        assert result.returncode == 0, result.stderr
        cls.small_problem = os.path.join(small, "problem.json")

    @classmethod
    def tearDownClass(cls):
        cls.work.cleanup()

    def pipe_plan(self, *args):
        json_path = os.path.join(self.work.name, "cli-plan.json")
        svg_path = os.path.join(self.work.name, "cli-schedule.svg")
        for path in (json_path, svg_path):
            if os.path.exists(path):
                os.remove(path)
        result = subprocess.run([PIPE_PLAN, self.problem, "--json", json_path, "--svg", svg_path,
                                 *args], capture_output=True, text=True, timeout=300)
        return result, json_path, svg_path

    def test_matches_pipe_plan(self):
        result, json_path, svg_path = self.pipe_plan()
        self.assertEqual(result.returncode, 0, result.stderr)
        plan = plan_problem(self.problem)
        self.assertEqual(plan.to_json(), read(json_path))
        self.assertEqual(plan.to_svg(), read(svg_path))
        self.assertEqual(plan.report, result.stdout)
        cli = json.loads(read(json_path))
        self.assertEqual(plan.period_ms, cli["period_ms"])
        self.assertEqual(plan.stage_of, cli["stage_of"])
        # The text and the dict forms of the problem plan the same.
        with open(self.problem, encoding="utf-8") as f:
            text = f.read()
        self.assertEqual(plan_problem(json.loads(text)).data, plan.data)
        self.assertEqual(plan_problem(text).data, plan.data)

    def test_options_match_pipe_plan(self):
        result, json_path, _ = self.pipe_plan("--algo", "balanced,madpipe", "--objective",
                                              "iteration", "--stages", "2", "--microbatches",
                                              "8", "--memory", "16GB", "--schedule", "gpipe")
        self.assertEqual(result.returncode, 0, result.stderr)
        plan = plan_problem(self.problem, algorithms=["balanced", "madpipe"],
                            objective="iteration", stages=2, microbatches=8, memory="16GB",
                            schedule="gpipe")
        self.assertEqual(plan.to_json(), read(json_path))
        self.assertEqual(plan.gpus, 2)
        self.assertEqual(plan.microbatches, 8)
        self.assertEqual(plan.schedule, "gpipe")
        self.assertIn(plan.algorithm, ("balanced", "madpipe"))
        self.assertEqual(plan_problem(self.problem, algorithms="balanced,madpipe",
                                      objective="iteration", stages=2, microbatches=8,
                                      memory="16GB", schedule="gpipe").to_json(), plan.to_json())

    def test_recompute_matches_pipe_plan(self):
        result, json_path, _ = self.pipe_plan("--stages", "2", "--recompute", "all")
        self.assertEqual(result.returncode, 0, result.stderr)
        plan = plan_problem(self.problem, stages=2, recompute="all")
        self.assertEqual(plan.to_json(), read(json_path))
        self.assertEqual(plan.data["allocation"]["recompute_stages"],
                         list(range(plan.data["stages"])))
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, recompute="sometimes")
        self.assertIn("none, auto or all", str(caught.exception))

    def test_general_bound_matches_pipe_plan(self):
        result, json_path, _ = self.pipe_plan("--stages", "2", "--general-bound", "5")
        self.assertEqual(result.returncode, 0, result.stderr)
        plan = plan_problem(self.problem, stages=2, general_bound=5)
        cli = json.loads(read(json_path))
        self.assertEqual(plan.data["lower_bounds_ms"], cli["lower_bounds_ms"])
        self.assertTrue(plan.data["general_bound_notes"].startswith("CBC: "))
        self.assertNotIn("general_bound_notes", plan_problem(self.problem, stages=2).data)
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, general_bound=-1)
        self.assertIn("general_bound must be in 0..86400", str(caught.exception))

    def test_infeasible_is_a_plan_error(self):
        result, json_path, _ = self.pipe_plan("--memory", "1KB")
        self.assertEqual(result.returncode, 1)
        with self.assertRaises(PlanError) as caught:
            plan_problem(self.problem, memory="1KB")
        # pipe-plan prints "pipe-plan: REASON" and writes the reason in the JSON.
        self.assertEqual(result.stderr.strip(), "pipe-plan: " + str(caught.exception))
        self.assertEqual(json.loads(read(json_path))["error"], str(caught.exception))

    def test_errors_are_value_errors_with_the_partitioners_message(self):
        result, _, _ = self.pipe_plan("--algo", "magic")
        self.assertEqual(result.returncode, 2)
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, algorithms="magic")
        self.assertIn("unknown algorithm 'magic'", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, objective="fastest")
        self.assertIn("fastest", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, time_limit=-1)
        self.assertIn("time_limit", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            plan_problem(self.problem, memory="lots")
        self.assertIn("lots", str(caught.exception))
        # A problem the partitioner refuses: the message pipe-plan prints.
        bad = os.path.join(self.work.name, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            f.write('{"layers": [{"forward_ms": "fast"}]}')
        cli = subprocess.run([PIPE_PLAN, bad], capture_output=True, text=True, timeout=60)
        self.assertEqual(cli.returncode, 1)
        with self.assertRaises(ValueError) as caught:
            plan_problem(bad)
        self.assertEqual(cli.stderr.strip(), "pipe-plan: error: " + str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            plan_problem(os.path.join(self.work.name, "missing.json"))
        self.assertIn("missing.json", str(caught.exception))

    def test_concurrent_calls(self):
        # CBC, the MIP solver of ilp and ilp-general, keeps process-wide state (two
        # solves at once in one process: about one plan in four differed); the
        # partitioner's solves take turns. Threads get the plan of a lone call.
        alone = plan_problem(self.small_problem, algorithms="ilp,ilp-general").to_json()
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            plans = list(pool.map(
                lambda _: plan_problem(self.small_problem, algorithms="ilp,ilp-general").to_json(),
                range(60)))
        self.assertEqual(sum(plan != alone for plan in plans), 0)

    def test_list_algorithms(self):
        listed = subprocess.run([PIPE_PLAN, "--list-algorithms"], capture_output=True,
                                text=True, timeout=60).stdout
        names = [line.split(":")[0] for line in listed.splitlines()]
        self.assertEqual([name for name, _ in pipe_opt.list_algorithms()],
                         [name for name in names if name != "best"])


if __name__ == "__main__":
    unittest.main()
