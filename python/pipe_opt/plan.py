"""Plan pipelined training from Python.

`plan_model` runs the main job, what `pipe-opt MODEL --pipeline-stages=N -o DIR`
does, on a torch.nn.Module (exported with `export_for_pipeline` first) or an
ONNX file; `plan_problem` runs the partitioner alone on a problem JSON, what
`pipe-plan problem.json --json plan.json --svg schedule.svg` does. Both return a
`Plan`. They call the planners in-process through the compiled extension
`pipe_opt._native` (python/native; docs/python.md says how it is built).
"""

from __future__ import annotations

import dataclasses
import json
import operator
import os
import re
import shutil
import sys
import tempfile
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

PathLike = Union[str, "os.PathLike[str]"]

# The files of an output directory a Plan keeps in memory (and writes back with
# Plan.save): the plan, the problem it solves, the report and the schedule.
PLAN_FILES = ("plan.json", "problem.json", "report.txt", "schedule.svg", "schedule.trace.json")


class PlanError(RuntimeError):
    """No plan: the model could not be imported or no plan fits (pipe-opt's exit
    status 1), or no plan of a problem JSON is valid.

    `diagnostics` holds the planner's diagnostic lines (the error, then the notes
    per algorithm and the advice); `output_dir` the directory that received
    problem.json, when the caller chose one.
    """

    def __init__(self, message: str, diagnostics: Sequence[str] = (),
                 output_dir: Optional[str] = None):
        super().__init__(message)
        self.diagnostics = list(diagnostics)
        self.output_dir = output_dir


def _native():
    try:
        from pipe_opt import _native  # noqa: PLC0415 (built separately, loaded on use)
    except ImportError as error:
        raise ImportError(
            "pipe_opt._native, the compiled bindings of pipe-opt's planners, cannot be "
            f"imported ({error}). Build it with scripts/setup.sh (CMake builds it when "
            "pybind11 is installed: apt-get install pybind11-dev python3-pybind11), then "
            "`pip install ./python`; or run from the checkout with "
            "PYTHONPATH=python:build/python (docs/python.md)") from error
    return _native


def native_available() -> bool:
    """True when the compiled planners (`pipe_opt._native`) can be imported."""
    try:
        _native()
    except ImportError:
        return False
    return True


def list_algorithms() -> List[Tuple[str, str]]:
    """The partitioner's algorithms as (name, summary), as `pipe-plan
    --list-algorithms` lists them; `best` and `all` are accepted as well."""
    return [tuple(item) for item in _native().list_algorithms()]


@dataclasses.dataclass(frozen=True)
class StageInfo:
    """One stage of a plan (plan.json's `stage_metrics`)."""

    index: int
    gpu: int
    layers: int
    forward_ms: float
    backward_ms: float
    time_ms: float
    in_flight: int
    in_bytes: float
    out_bytes: float
    # The peak memory of the stage's GPU (every stage on that GPU together) and
    # its limit (None: unlimited).
    memory_bytes: float
    memory_limit_bytes: Optional[float]
    memory_breakdown: Dict[str, float]


class Plan:
    """A plan: the stage of each node, the schedule's period and iteration time,
    per-stage time and memory, and the files the planner wrote.

    `stage_of` maps each ONNX node name to its stage and `gpu_of_stage` each
    stage to its GPU (a plan may run several stages on one GPU). For a plan made
    from a torch.nn.Module, `module_of_node` maps each node to the module (its
    `named_modules()` name) whose forward created it, `stage_of_module` gives the
    stage of each module whose nodes are all on one stage and `stages_of_module`
    the stages of every module that has nodes.
    """

    def __init__(self, plan_json: str, files: Optional[Mapping[str, str]] = None,
                 report: Optional[str] = None, output_dir: Optional[str] = None,
                 module_of_node: Optional[Mapping[str, str]] = None):
        self._plan_json = plan_json
        self.data: Dict[str, Any] = json.loads(plan_json)
        if "error" in self.data:
            raise PlanError(self.data["error"], [self.data["error"]], output_dir)
        self._files: Dict[str, str] = dict(files or {})
        self._files["plan.json"] = plan_json
        if report is not None:
            self._files["report.txt"] = report
        self.output_dir = output_dir
        self.stage_of: Dict[str, int] = dict(self.data["stage_of"])
        self.gpu_of_stage: List[int] = list(self.data["gpu_of_stage"])
        self.stages: List[StageInfo] = [
            StageInfo(index=k, gpu=s["gpu"], layers=s["layers"], forward_ms=s["forward_ms"],
                      backward_ms=s["backward_ms"], time_ms=s["time_ms"],
                      in_flight=s["in_flight"], in_bytes=s["in_bytes"],
                      out_bytes=s["out_bytes"], memory_bytes=s["memory_bytes"],
                      memory_limit_bytes=s.get("memory_limit_bytes"),
                      memory_breakdown=dict(s.get("memory_breakdown", {})))
            for k, s in enumerate(self.data["stage_metrics"])]
        self.module_of_node: Optional[Dict[str, str]] = None
        self.stage_of_module: Optional[Dict[str, int]] = None
        self.stages_of_module: Optional[Dict[str, List[int]]] = None
        if module_of_node is not None:
            self._set_modules(module_of_node)

    def _set_modules(self, module_of_node: Mapping[str, str]) -> None:
        self.module_of_node = {node: module_of_node[node] for node in self.stage_of
                               if node in module_of_node}
        stages: Dict[str, set] = {}
        for node, module in self.module_of_node.items():
            # A module holds the nodes of its submodules too; "" (the root) holds all.
            parts = module.split(".") if module else []
            for depth in range(1, len(parts) + 1):
                stages.setdefault(".".join(parts[:depth]), set()).add(self.stage_of[node])
        self.stages_of_module = {m: sorted(s) for m, s in sorted(stages.items())}
        self.stage_of_module = {m: s[0] for m, s in self.stages_of_module.items()
                                if len(s) == 1}

    # plan.json's figures.
    @property
    def period_ms(self) -> float:
        """The steady-state period: time between two micro-batches."""
        return self.data["period_ms"]

    @property
    def iteration_ms(self) -> float:
        """One iteration of `microbatches` micro-batches, fill and drain included."""
        return self.data["iteration_ms"]

    @property
    def algorithm(self) -> str:
        return self.data["algorithm"]

    @property
    def schedule(self) -> str:
        return self.data["schedule"]

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    @property
    def gpus(self) -> int:
        return self.data["gpus"]

    @property
    def microbatches(self) -> int:
        return self.data["microbatches"]

    @property
    def settings(self) -> Dict[str, Any]:
        """The plan's assumptions (target, dtype, memory, ...); empty for a plan
        made by plan_problem."""
        return dict(self.data.get("settings", {}))

    @property
    def report(self) -> str:
        """The report pipe-opt prints (for plan_problem: pipe-plan's table)."""
        return self._files.get("report.txt", "")

    def nodes_of_stage(self, stage: int) -> List[str]:
        return sorted(node for node, s in self.stage_of.items() if s == stage)

    def to_json(self) -> str:
        """plan.json's text, as the planner wrote it."""
        return self._plan_json

    def to_svg(self) -> str:
        """schedule.svg's text: a Gantt chart of one simulated iteration."""
        return self._files.get("schedule.svg", "")

    def files(self) -> Dict[str, str]:
        """The files the plan holds, by name (plan.json, report.txt, schedule.svg,
        and for plan_model problem.json and schedule.trace.json)."""
        return dict(self._files)

    def save(self, directory: PathLike) -> List[str]:
        """Writes the files the plan holds into `directory` (created if needed);
        returns their paths."""
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        paths = []
        for name, text in sorted(self._files.items()):
            path = os.path.join(directory, name)
            with open(path, "w", encoding="utf-8") as out:
                out.write(text)
            paths.append(path)
        return paths

    def __repr__(self) -> str:
        return (f"Plan({self.algorithm}, {self.schedule}: {self.num_stages} stages on "
                f"{self.gpus} GPUs, period {self.period_ms:.4g} ms, iteration "
                f"{self.iteration_ms:.4g} ms)")


# --- plan_model --------------------------------------------------------------

def _option_text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return ",".join(_option_text(name, item) for item in value)
    raise ValueError(f"option {name}: cannot pass a {type(value).__name__} "
                     f"({value!r}); give a str, a number, a bool or a list")


def _integer(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _main_job_options(options: Mapping[str, Any]) -> List[Tuple[str, str]]:
    """Keyword arguments as the main job's options: time_limit=5 is --time-limit=5;
    None leaves an option at its default."""
    return [(name.replace("_", "-"), _option_text(name, value))
            for name, value in options.items() if value is not None]


def _is_torch_module(model: Any) -> bool:
    # A torch module exists only once torch is imported: no need to import it here.
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(model, torch.nn.Module)


def _unqualified_name(qualified: str) -> str:
    """The scope name torch's ONNX export gives a module: its name from the last
    non-numeric atom on ('layer1.0.conv1' -> 'conv1', 'h.0' -> 'h.0', '2.0' -> '2.0')."""
    atoms = qualified.split(".")
    for i in range(len(atoms) - 1, -1, -1):
        if not atoms[i].isnumeric():
            return ".".join(atoms[i:])
    return qualified


def module_names_of_nodes(node_names: Iterable[str], module_names: Iterable[str]
                          ) -> Dict[str, str]:
    """Maps ONNX node names of a torch export to the module that made each node.

    torch names a node by the scopes of the modules it was called in, then the op:
    '/layer1/layer1.0/conv1/Conv' is 'layer1.0.conv1'. Each scope is a module's
    unqualified name, so the walk follows, from the root, the nearest submodule
    of that scope name. A node outside every submodule (a functional op in the
    root's forward) maps to '' (the root), as does a name of another form. A
    module called more than once has its scope numbered from the second call on
    ('/relu_1/Relu': 'relu').
    """
    by_scope: Dict[str, List[str]] = {}
    for name in module_names:
        if name:
            by_scope.setdefault(_unqualified_name(name), []).append(name)
    result = {}
    for node in node_names:
        scopes = node.split("/")[1:-1] if node.startswith("/") else []
        current = ""
        for scope in scopes:
            candidates = []
            for name in (scope, re.sub(r"_[0-9]+$", "", scope)):
                candidates = [m for m in by_scope.get(name, ())
                              if not current or m.startswith(current + ".")]
                if candidates:
                    break
            if not candidates:
                break
            current = min(candidates, key=lambda m: (m.count("."), m))
        result[node] = current
    return result


def _read_outputs(directory: str) -> Dict[str, str]:
    files = {}
    for name in PLAN_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                files[name] = f.read()
    return files


def _run_main_job(model_path: str, output_dir: str, stages: int, micro_batch_size: int,
                  options: List[Tuple[str, str]], progress: bool, keep: bool):
    status, report, errors = _native().plan_model(
        os.path.abspath(model_path), output_dir, stages, micro_batch_size, options, progress)
    lines = [line for line in errors.splitlines() if line.strip()]
    if status == 2:
        message = "\n".join(lines) or "pipe-opt: usage error"
        if "no such option" in message:
            message += ("\n(plan_model passes keyword arguments it does not know to pipe-opt "
                        "as --NAME=VALUE, underscores as dashes; `pipe-opt --help` lists the "
                        "options)")
        raise ValueError(message)
    if status != 0:
        raise PlanError("\n".join(lines) or f"pipe-opt: planning failed (status {status})",
                        lines, output_dir if keep else None)
    return report, _read_outputs(output_dir)


def plan_model(model: Any, example_inputs: Any = None, stages: Optional[int] = 8,
               memory: Optional[str] = "80GB", target: Optional[str] = "h100",
               micro_batch_size: Optional[int] = None, *,
               output_dir: Optional[PathLike] = None, export_path: Optional[PathLike] = None,
               progress: bool = False, **options: Any) -> Plan:
    """Plans pipelined training of `model` on `stages` GPUs: the main job.

    model: a torch.nn.Module (exported with export_for_pipeline, in training mode,
      at the batch size of `example_inputs`, which it needs) or the path of an
      ONNX model (.onnx, .onnxtext) or of a module pipe-opt wrote from one.
    stages: GPUs (--pipeline-stages); with gpus=G, the GPUs of each of the
      G / stages data-parallel replicas, or None to let the planner choose the
      split of the G GPUs (--gpus without --pipeline-stages). memory: per GPU,
      with its unit (--memory; None: the target's capacity). target: the GPU
      (--target).
    micro_batch_size: binds the model's symbolic batch dim (--micro-batch-size);
      for a module it defaults to dim 0 of the first example input, for an ONNX
      file to the model's own batch (required when that is symbolic).
    output_dir: where the main job writes its outputs (the directory is replaced
      as a whole); None: a temporary directory, removed once the plan has read
      what it keeps. A module's export goes to `export_path`, by default to
      `<output_dir>.onnx` beside the outputs (pipe-run reads the parameters from
      it), or to a temporary directory with output_dir None.
    progress: print the main job's progress lines on stderr.
    options: the main job's other options as keyword arguments, underscores for
      dashes: microbatches=32, schedule="1f1b", dtype="bf16", optimizer="sgd",
      algo="best", objective="period", time_limit=10, lr=0.01, train=False,
      gpus=16 (replicas x stages; microbatches is then the step's) ...
      (`pipe-opt --help`). A list becomes a comma list.

    Raises ValueError for a bad or unknown option (pipe-opt's exit status 2) and
    PlanError when the model cannot be imported or no plan fits (status 1).
    """
    if stages is None and "gpus" not in options:
        raise ValueError("stages=None lets the planner choose how to split gpus=G into "
                         "replicas x stages: pass gpus too")
    stages = 0 if stages is None else _integer("stages", stages)
    if micro_batch_size is not None:
        micro_batch_size = _integer("micro_batch_size", micro_batch_size)
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size must be at least 1, got {micro_batch_size}")
    job_options = _main_job_options({"memory": memory, "target": target, **options})
    keep = output_dir is not None
    scratch = tempfile.mkdtemp(prefix="pipe-opt-")
    try:
        out = os.path.abspath(os.fspath(output_dir)) if keep else os.path.join(scratch, "out")
        modules: Optional[List[str]] = None
        if _is_torch_module(model):
            from pipe_opt.export import _as_tuple, export_for_pipeline

            if example_inputs is None:
                raise ValueError("example_inputs is required to plan a torch.nn.Module: "
                                 "the export traces the model on them")
            inputs = _as_tuple(example_inputs)
            if micro_batch_size is None:
                if not inputs or inputs[0].dim() == 0:
                    raise ValueError("cannot take the micro-batch size from the example "
                                     "inputs (no input with a dim 0): pass micro_batch_size")
                micro_batch_size = int(inputs[0].shape[0])
            if export_path is not None:
                model_path = os.path.abspath(os.fspath(export_path))
            elif keep:
                model_path = out.rstrip(os.sep) + ".onnx"
            else:
                model_path = os.path.join(scratch, type(model).__name__ + ".onnx")
            export_for_pipeline(model, inputs, model_path)
            modules = [name for name, _ in model.named_modules()]
        elif isinstance(model, (str, os.PathLike)):
            model_path = os.fspath(model)
            if not os.path.exists(model_path):
                raise FileNotFoundError(f"no model at '{model_path}'")
            if example_inputs is not None or export_path is not None:
                raise ValueError("example_inputs and export_path are for a torch.nn.Module; "
                                 "for an ONNX model, bind the batch dim with micro_batch_size")
        else:
            raise TypeError("plan_model expects a torch.nn.Module or the path of an ONNX "
                            f"model, got {type(model).__name__}")
        report, files = _run_main_job(model_path, out, stages, micro_batch_size or 0,
                                      job_options, progress, keep)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    module_of_node = None
    if modules is not None:
        plan_nodes = json.loads(files["plan.json"]).get("stage_of", {})
        module_of_node = module_names_of_nodes(plan_nodes, modules)
    return Plan(files["plan.json"], files, report, out if keep else None, module_of_node)


# --- plan_problem ------------------------------------------------------------

def plan_problem(problem: Union[PathLike, str, Mapping[str, Any]],
                 algorithms: Union[str, Sequence[str]] = "best", objective: str = "period",
                 time_limit: float = 10.0, *, stages: Optional[int] = None,
                 microbatches: Optional[int] = None, memory: Optional[str] = None,
                 schedule: Optional[str] = None, recompute: Optional[str] = None,
                 max_downsets: int = 20000, dag: bool = True,
                 general_bound: float = 0.0) -> Plan:
    """Plans a problem JSON with the partitioner alone, as `pipe-plan PROBLEM
    --json plan.json --svg schedule.svg` does (docs/partitioner.md).

    problem: the path of a problem JSON (such as the problem.json of a main job's
      output directory), its text, or the document as a dict.
    algorithms: "best" (default), "all", or algorithm names (a list or a comma
      list; list_algorithms() names them) (--algo). objective: "period" or
      "iteration" (--objective). time_limit: seconds for each MIP algorithm
      (--time-limit). stages, microbatches, memory ("16GB"), schedule ("1f1b"),
      recompute ("none", "auto" or "all"): override the problem's (--stages,
      --microbatches, --memory, --schedule, --recompute).
      max_downsets, dag: --max-downsets, --no-dag. general_bound: seconds CBC may
      take, after the choice, to prove a lower bound over every general allocation
      (--general-bound; 0: none); the plan JSON's lower_bounds_ms then has "general".

    Returns a Plan whose to_json() is the plan JSON pipe-plan writes, report its
    table and to_svg() its SVG. Raises ValueError for a bad option or a problem
    the partitioner refuses (with its message) and PlanError when no plan is
    valid.
    """
    if isinstance(problem, Mapping):
        text, name = json.dumps(problem), "problem.json"
    elif isinstance(problem, str) and problem.lstrip().startswith("{"):
        text, name = problem, "problem.json"
    else:
        name = os.fspath(problem)
        try:
            with open(name, encoding="utf-8") as f:
                text = f.read()
        except OSError as error:
            raise ValueError(f"cannot open '{name}': {error.strerror}") from error
    if isinstance(algorithms, str):
        algorithms = [a for a in algorithms.split(",") if a]
    result = _native().plan_problem(text, name, list(algorithms), objective, float(time_limit),
                                    max_downsets, dag, stages, microbatches, memory, schedule,
                                    recompute, float(general_bound))
    if not result["valid"]:
        raise PlanError(result["reason"], [result["reason"]])
    return Plan(result["plan_json"], {"schedule.svg": result["svg"]}, result["table"])
