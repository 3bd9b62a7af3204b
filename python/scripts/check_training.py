#!/usr/bin/env python3
"""Checks that pipelined training equals PyTorch.

Plans and generates the rank programs with pipe-opt (--disable-dropout),
trains them with pipe-run on seeded data for N steps, trains the same ONNX
model with the same micro-batches in torch (pipe_opt.reference: one
micro-batch at a time, gradients accumulated, per-micro-batch BatchNorm
statistics, torch.optim), and compares:

- the loss of every step;
- the gradients of the last step (pipe-run --save-grads writes each
  trainable parameter's accumulated gradient of the last step, before the
  update), every trainable parameter;
- the weights after the last step (--save-weights: every parameter,
  BatchNorm running statistics included).

The reference is torch in float64 by default (its rounding is ~1e-9 of
float32's; --reference float32 compares with torch's own float32 training).
--baseline also trains torch in float32 and reports how far that is from the
reference: the error that rounding alone causes on the case, which a badly
conditioned model (deep BatchNorm networks at small micro-batches, ReLU
inputs within rounding of 0) makes larger than the tolerance.

Relative error of a tensor: max_i |ours_i - ref_i| / max_i |ref_i|, the
largest difference over the largest reference magnitude of that tensor. A
tensor whose reference is zero up to float64 rounding (max |ref| below 1e-12
of the largest |ref| of its kind: every gradient, or every weight) is
divided by that largest one instead: its true value is 0 (e.g. the gradient
of an attention key bias, since softmax ignores a shift), so any float32
program gives rounding noise there, to be judged against the scale of the
model's gradients. Of a loss:
|ours - ref| / |ref|; pipe-run prints the loss with 6 decimals, which bounds
what this can show for small losses. Exit 0 when every error is at most
--tolerance (1e-5), 1 when one is larger, 2 when a tool fails.

    check_training.py test/Fixtures/models/gpt2.onnx --ranks 2 --schedule 1f1b --eps 1e-3
    check_training.py model.onnx --ranks 4 --optimizer sgd --lr 0.1 --transport mpi
    check_training.py test/Fixtures/models/mlp.onnx --ranks 2 --replicas 2 --eps 1e-3
    check_training.py test/Fixtures/models/resnet50.onnx --loss mse \
        --output /layer1/layer1.2/relu_2/Relu_output_0 --baseline

With --replicas R, pipe-run trains R data-parallel copies of the pipeline,
each on --microbatches micro-batches of the step, and torch one model on all
R times as many: averaging the replicas' gradients must give its step.

With Adam's default eps (1e-8) the weights of parameters whose gradient is
(nearly) zero follow the rounding noise of that gradient in any float32
program; docs/runtime.md ("Training equals PyTorch") explains this and the
models that float32 cannot train reproducibly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
import onnx.shape_inference
import onnx.utils
import torch

try:
    from pipe_opt.reference import OptimizerConfig, ReferenceTrainer
except ModuleNotFoundError as error:  # neither installed nor on PYTHONPATH
    if error.name != "pipe_opt":
        raise
    sys.exit(f"{error}: pip install ./python, or run with PYTHONPATH=python (docs/python.md)")

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(SCRIPT_DIR))

DEFAULT_TOLERANCE = 1e-5


class ToolError(RuntimeError):
    """pipe-opt or pipe-run failed or was not found."""


def _executable(path: Optional[str]) -> Optional[str]:
    if path and os.path.isfile(path) and os.access(path, os.X_OK):
        return os.path.abspath(path)
    return None


def find_pipe_opt() -> Optional[str]:
    """$PIPE_OPT, else build/bin/pipe-opt."""
    for candidate in (os.environ.get("PIPE_OPT"),
                      os.path.join(REPO_ROOT, "build", "bin", "pipe-opt")):
        if _executable(candidate):
            return _executable(candidate)
    return None


def find_pipe_run() -> Optional[str]:
    """$PIPE_RUN, else the newer of build-runtime/bin/pipe-run (the runtime's
    own build) and build/bin/pipe-run (the top-level build)."""
    if _executable(os.environ.get("PIPE_RUN")):
        return _executable(os.environ.get("PIPE_RUN"))
    built = [p for p in (os.path.join(REPO_ROOT, "build-runtime", "bin", "pipe-run"),
                         os.path.join(REPO_ROOT, "build", "bin", "pipe-run")) if _executable(p)]
    return _executable(max(built, key=os.path.getmtime)) if built else None


def find_mpirun() -> Optional[str]:
    """$MPIRUN, else mpirun on the PATH."""
    return _executable(os.environ.get("MPIRUN")) or shutil.which("mpirun")


@dataclasses.dataclass
class Case:
    """One comparison: a model, a plan and a training configuration."""

    model: str
    ranks: int = 2
    schedule: str = ""           # "" lets the partitioner pick
    algo: str = ""               # "" is pipe-opt's default (best)
    micro_batch_size: int = 2
    microbatches: int = 4
    optimizer: str = "adam"
    lr: float = 1e-3
    momentum: float = 0.9
    eps: float = 1e-8            # Adam's
    weight_decay: float = 0.0
    loss: str = "cross-entropy"
    transport: str = "threads"
    steps: int = 3
    seed: int = 0
    extra: Tuple[str, ...] = ()  # more pipe-opt options
    output: str = ""             # train the sub-model that ends at this tensor
    backend: str = "cpu"         # pipe-run's --backend: cpu, emulated or cuda
    replicas: int = 1            # pipe-run's --replicas: data-parallel copies of the pipeline


@dataclasses.dataclass
class TensorError:
    name: str
    error: float


@dataclasses.dataclass
class Comparison:
    """One training run (pipe-run, or torch fp32 for the baseline) against the reference."""

    losses: List[Tuple[float, float]]        # per step: (this run, reference)
    loss_errors: List[float]
    gradients: List[TensorError]             # last step, worst first
    weights: List[TensorError]               # after the last step, worst first
    problems: List[str]                      # missing or extra tensors, shape mismatches

    @property
    def worst_loss(self) -> float:
        return max(self.loss_errors, default=0.0)

    @property
    def worst_gradient(self) -> TensorError:
        return self.gradients[0] if self.gradients else TensorError("-", 0.0)

    @property
    def worst_weight(self) -> TensorError:
        return self.weights[0] if self.weights else TensorError("-", 0.0)

    def within(self, tolerance: float) -> bool:
        return (not self.problems and self.worst_loss <= tolerance
                and self.worst_gradient.error <= tolerance
                and self.worst_weight.error <= tolerance)

    def summary(self) -> Dict[str, object]:
        return {"losses": self.losses, "loss_error": self.worst_loss,
                "gradient_error": self.worst_gradient.error,
                "gradient_worst": self.worst_gradient.name,
                "weight_error": self.worst_weight.error, "weight_worst": self.worst_weight.name,
                "problems": self.problems}


@dataclasses.dataclass
class Result:
    case: Case
    plan: Dict[str, object]                  # algorithm, schedule, stages, rank_of_stage
    ours: Comparison                         # pipe-run against the reference
    baseline: Optional[Comparison]           # torch fp32 against the reference
    reference: str                           # "float64" or "float32"
    tolerance: float
    seconds: Dict[str, float]

    @property
    def ok(self) -> bool:
        return self.ours.within(self.tolerance)

    def summary(self) -> Dict[str, object]:
        return {"case": dataclasses.asdict(self.case), "plan": self.plan,
                "reference": self.reference, "ours": self.ours.summary(),
                "baseline": self.baseline.summary() if self.baseline else None,
                "ok": self.ok, "seconds": self.seconds}


# A reference tensor below this fraction of the largest one of its kind is zero.
ZERO = 1e-12


def relative_error(ours: np.ndarray, reference: np.ndarray, largest: float = 0.0) -> float:
    """max |ours - reference| / max |reference|; over `largest` instead when
    the reference is zero (max |reference| <= ZERO * largest); absolute when
    both are 0."""
    ours = np.asarray(ours, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    if ours.size == 0:
        return 0.0
    difference = float(np.max(np.abs(ours - reference)))
    if not np.isfinite(difference):
        return float("inf")
    scale = float(np.max(np.abs(reference)))
    if scale <= ZERO * largest:
        scale = largest
    return difference / scale if scale > 0 else difference


def compare_tensors(ours: Dict[str, np.ndarray], reference: Dict[str, np.ndarray], what: str,
                    problems: List[str]) -> List["TensorError"]:
    """Every reference tensor's relative error (worst first); missing, extra
    or misshapen tensors go to `problems`."""
    magnitudes = [float(np.max(np.abs(r))) for r in reference.values() if np.size(r)]
    largest = max(magnitudes, default=0.0)
    errors = []
    for name, expected in reference.items():
        if name not in ours:
            problems.append(f"no {what} of {name}")
            continue
        got = ours[name]
        if got.shape != expected.shape:
            problems.append(f"{what} of {name}: shape {list(got.shape)}, the reference's "
                            f"{list(expected.shape)}")
            continue
        errors.append(TensorError(name, relative_error(got, expected, largest)))
    for name in ours:
        if name not in reference:
            problems.append(f"a {what} of {name}, which the reference does not have")
    errors.sort(key=lambda e: -e.error if e.error == e.error else float("-inf"))
    return errors


def truncate_model(path: str, output: str, out_path: str) -> str:
    """Writes the sub-model of `path` that computes tensor `output` from the
    graph inputs it needs (output 0, batch dim symbolic, as the exporter
    writes them) to out_path; returns out_path."""
    model = onnx.shape_inference.infer_shapes(onnx.load(path))
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v.name for v in model.graph.input if v.name not in initializers]
    if output not in {o for node in model.graph.node for o in node.output}:
        raise ToolError(f"{path}: no node computes a tensor named '{output}'")
    sub = onnx.utils.Extractor(model).extract_model(inputs, [output])
    used = {name for node in sub.graph.node for name in node.input}
    kept = [v for v in sub.graph.input if v.name in used or v.name in initializers]
    del sub.graph.input[:]
    sub.graph.input.extend(kept)
    for value in sub.graph.output:
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_param = "batch"
    del sub.graph.value_info[:]
    onnx.checker.check_model(sub)
    onnx.save(sub, out_path)
    return out_path


def make_data(program: Dict[str, object], seed: int, replicas: int = 1) -> Dict[str, np.ndarray]:
    """One mini-batch for every input and label of program.json (and each of
    `replicas` copies of the pipeline): integers uniform in [0, range) (range
    0: 0 or 1, e.g. an attention mask), floats standard normal, booleans fair
    coins."""
    rng = np.random.default_rng(seed)
    rows = replicas * int(program["microbatches"]) * int(program["micro_batch_size"])
    data = {}
    for role in ("inputs", "labels"):
        for entry in program[role]:
            shape = [rows] + list(entry["shape"][1:])
            dtype = entry["dtype"]
            if dtype == "f32":
                array = rng.standard_normal(shape).astype(np.float32)
            elif dtype == "f64":
                array = rng.standard_normal(shape)
            elif dtype in ("i64", "i32"):
                bound = int(entry.get("range", 0)) or 2
                array = rng.integers(0, bound, size=shape).astype(
                    np.int64 if dtype == "i64" else np.int32)
            elif dtype == "i1":
                array = rng.integers(0, 2, size=shape).astype(np.bool_)
            else:
                raise ToolError(f"{role[:-1]} '{entry['name']}': dtype {dtype} is not supported")
            data[f"{role[:-1]}_{entry['index']}"] = array
    if program.get("output_grads"):
        raise ToolError("a model without a loss (output gradients) is not supported here")
    return data


def _run(command: List[str], what: str, timeout: float) -> str:
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        raise ToolError(f"{what} took more than {timeout:.0f} s: {' '.join(command)}") from expired
    if done.returncode != 0:
        raise ToolError(f"{what} exited with {done.returncode}: {' '.join(command)}\n"
                        f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return done.stdout


def pipe_opt_command(case: Case, pipe_opt: str, out_dir: str) -> List[str]:
    command = [pipe_opt, os.path.abspath(case.model), f"--pipeline-stages={case.ranks}",
               f"--micro-batch-size={case.micro_batch_size}",
               f"--microbatches={case.microbatches}", f"--optimizer={case.optimizer}",
               f"--lr={case.lr!r}", f"--momentum={case.momentum!r}", f"--eps={case.eps!r}",
               f"--weight-decay={case.weight_decay!r}", f"--loss={case.loss}",
               "--disable-dropout", "--allow-inference-export", "--no-progress", "-o", out_dir]
    if case.schedule:
        command.append(f"--schedule={case.schedule}")
    if case.algo:
        command.append(f"--algo={case.algo}")
    return command + list(case.extra)


def pipe_run_command(case: Case, pipe_run: str, out_dir: str, data: str, grads: str,
                     weights: str, mpirun: Optional[str]) -> List[str]:
    command = [pipe_run, out_dir, "--steps", str(case.steps), "--data", data,
               "--model", os.path.abspath(case.model),
               "--save-grads", grads, "--save-weights", weights, "--timeout", "120",
               "--backend", case.backend, "--replicas", str(case.replicas)]
    if case.transport == "mpi":
        if not mpirun:
            raise ToolError("--transport mpi needs mpirun")
        return [mpirun, "-q", "--allow-run-as-root", "--oversubscribe", "-np",
                str(case.ranks * case.replicas)] + command + ["--transport", "mpi"]
    return command + ["--transport", case.transport]


def plan_summary(out_dir: str, program: Dict[str, object]) -> Dict[str, object]:
    with open(os.path.join(out_dir, "plan.json")) as f:
        plan = json.load(f)
    return {"algorithm": plan.get("algorithm"), "schedule": plan.get("schedule"),
            "stages": int(program.get("stages", plan.get("stages", 0))),
            "rank_of_stage": list(program.get("rank_of_stage", plan.get("gpu_of_stage", []))),
            "recompute_stages": list((plan.get("allocation") or {}).get("recompute_stages", []))}


def compile_case(case: Case, work_dir: str, out_dir: str,
                 pipe_opt: Optional[str] = None) -> Case:
    """Runs pipe-opt for `case` into out_dir; the case with the model it compiled
    (the truncated one when case.output is set)."""
    pipe_opt = pipe_opt or find_pipe_opt()
    if not pipe_opt:
        raise ToolError("pipe-opt not found (build it, or set $PIPE_OPT)")
    if case.output:
        case = dataclasses.replace(case, model=truncate_model(
            case.model, case.output, os.path.join(work_dir, "truncated.onnx")))
    _run(pipe_opt_command(case, pipe_opt, out_dir), "pipe-opt", 300)
    return case


def run_case(case: Case, work_dir: str, tolerance: float = DEFAULT_TOLERANCE,
             pipe_opt: Optional[str] = None, pipe_run: Optional[str] = None,
             mpirun: Optional[str] = None, reference_dtype: torch.dtype = torch.float64,
             baseline: bool = False, compiled: Optional[str] = None) -> Result:
    """`compiled`: pipe-opt's output for this case made earlier (--compile-only),
    where pipe-opt is not at hand (a GPU machine)."""
    pipe_run = pipe_run or find_pipe_run()
    if not pipe_run:
        raise ToolError("pipe-run not found (build the runtime, or set $PIPE_RUN)")
    if case.transport == "mpi":
        mpirun = mpirun or find_mpirun()
    seconds: Dict[str, float] = {}
    out_dir = os.path.join(work_dir, "out")
    original = case
    start = time.perf_counter()
    if compiled:
        shutil.copytree(compiled, out_dir)
        if case.output:
            case = dataclasses.replace(case, model=truncate_model(
                case.model, case.output, os.path.join(work_dir, "truncated.onnx")))
    else:
        case = compile_case(case, work_dir, out_dir, pipe_opt)
    seconds["pipe-opt"] = time.perf_counter() - start
    with open(os.path.join(out_dir, "program.json")) as f:
        program = json.load(f)

    data = make_data(program, case.seed, case.replicas)
    data_path = os.path.join(work_dir, "data.npz")
    np.savez(data_path, **data)
    grads_path = os.path.join(work_dir, "grads.npz")
    weights_path = os.path.join(work_dir, "weights.npz")
    start = time.perf_counter()
    stdout = _run(pipe_run_command(case, pipe_run, out_dir, data_path, grads_path, weights_path,
                                   mpirun), "pipe-run", 600)
    seconds["pipe-run"] = time.perf_counter() - start
    printed = [float(v) for v in re.findall(r"^step \d+/\d+: loss (\S+)", stdout, re.M)]
    if len(printed) != case.steps:
        raise ToolError(f"pipe-run printed {len(printed)} losses for {case.steps} steps:\n"
                        + stdout[-2000:])

    start = time.perf_counter()
    reference = train_reference(case.model, program, data, case.steps, reference_dtype,
                                case.replicas)
    seconds["torch"] = time.perf_counter() - start
    ours = compare(printed, dict(np.load(grads_path)), dict(np.load(weights_path)), reference,
                   case.steps)
    comparison_baseline = None
    if baseline:
        start = time.perf_counter()
        fp32 = train_reference(case.model, program, data, case.steps, torch.float32,
                               case.replicas)
        seconds["torch fp32"] = time.perf_counter() - start
        comparison_baseline = compare([loss for loss, _, _ in fp32], fp32[-1][1], fp32[-1][2],
                                      reference, case.steps)
    return Result(original, plan_summary(out_dir, program), ours, comparison_baseline,
                  "float64" if reference_dtype == torch.float64 else "float32", tolerance,
                  seconds)


def train_reference(model: str, program: Dict[str, object], data: Dict[str, np.ndarray],
                    steps: int, dtype: torch.dtype, replicas: int = 1
                    ) -> List[Tuple[float, Dict[str, np.ndarray], Dict[str, np.ndarray]]]:
    """Per step: (loss, gradients, weights after the update) of torch's training:
    one model on every micro-batch of the step, those of all `replicas`."""
    parameters = program["parameters"]
    trainer = ReferenceTrainer(
        onnx.load(model), int(program["micro_batch_size"]),
        replicas * int(program["microbatches"]),
        loss=str(program["loss"]), optimizer=OptimizerConfig.from_program(program),
        trainable=[p["name"] for p in parameters if p["trainable"]], dtype=dtype)
    inputs = {entry["name"]: data[f"input_{entry['index']}"] for entry in program["inputs"]}
    labels = [data[f"label_{entry['index']}"] for entry in program["labels"]]
    names = [p["name"] for p in parameters]
    result = []
    for _ in range(steps):
        step = trainer.step(inputs, labels)
        weights = trainer.weights()
        result.append((step.loss, step.gradients,
                       {name: weights[name] for name in names if name in weights}))
    return result


def compare(losses: Sequence[float], gradients: Dict[str, np.ndarray],
            weights: Dict[str, np.ndarray],
            reference: List[Tuple[float, Dict[str, np.ndarray], Dict[str, np.ndarray]]],
            steps: int) -> Comparison:
    """Losses of every step, gradients of the last step, weights after it."""
    problems: List[str] = []
    if len(losses) != steps:
        problems.append(f"{len(losses)} losses for {steps} steps")
    pairs = [(float(ours), ref[0]) for ours, ref in zip(losses, reference)]
    loss_errors = [abs(ours - ref) / abs(ref) if ref else abs(ours) for ours, ref in pairs]
    last_gradients = reference[-1][1] if reference else {}
    last_weights = reference[-1][2] if reference else {}
    return Comparison(pairs, loss_errors,
                      compare_tensors(gradients, last_gradients, "gradient", problems),
                      compare_tensors(weights, last_weights, "weight", problems), problems)


def format_result(result: Result) -> str:
    case, plan, ours, base = result.case, result.plan, result.ours, result.baseline
    what = f"{case.model} up to {case.output}" if case.output else case.model
    replicas = f" x {case.replicas} replicas" if case.replicas > 1 else ""
    lines = [f"model {what}: {case.ranks} rank(s){replicas}, {plan['stages']} stage(s) "
             f"{plan['rank_of_stage']}, schedule {plan['schedule']}, algorithm "
             f"{plan['algorithm']}, micro-batch {case.micro_batch_size} x {case.microbatches}, "
             f"{case.optimizer} lr {case.lr:g}"
             + (f" eps {case.eps:g}" if case.optimizer in ("adam", "adamw") else "")
             + f", {case.loss}, {case.transport}, backend {case.backend}; reference torch "
               f"{result.reference}"]
    header = f"{'step':>4}  {'pipe-run':>12}  {'torch':>12}  {'rel. error':>10}"
    if base:
        header += f"  {'torch fp32':>12}  {'rel. error':>10}"
    lines.append(header)
    for i, ((mine, ref), error) in enumerate(zip(ours.losses, ours.loss_errors)):
        line = f"{i + 1:>4}  {mine:>12.6f}  {ref:>12.6f}  {error:>10.2e}"
        if base and i < len(base.losses):
            line += f"  {base.losses[i][0]:>12.6f}  {base.loss_errors[i]:>10.2e}"
        lines.append(line)
    for who, comparison in (("pipe-run", ours), ("torch fp32", base)):
        if comparison is None:
            continue
        g, w = comparison.worst_gradient, comparison.worst_weight
        lines.append(f"{who}: gradients of step {case.steps}: worst relative error "
                     f"{g.error:.2e} ({g.name}, {len(comparison.gradients)} parameters); "
                     f"weights after it: {w.error:.2e} ({w.name}, {len(comparison.weights)})")
        for problem in comparison.problems:
            lines.append(f"{who}: problem: {problem}")
    lines.append(f"{'PASS' if result.ok else 'FAIL'} (tolerance {result.tolerance:g}; "
                 + ", ".join(f"{k} {v:.1f} s" for k, v in result.seconds.items()) + ")")
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="ONNX model")
    parser.add_argument("--ranks", type=int, default=2, help="ranks (pipe-opt --pipeline-stages)")
    parser.add_argument("--schedule", default="", help="pipe-opt --schedule (default: its pick)")
    parser.add_argument("--algo", default="", help="pipe-opt --algo (default: best)")
    parser.add_argument("--micro-batch-size", type=int, default=2)
    parser.add_argument("--microbatches", type=int, default=4)
    parser.add_argument("--optimizer", default="adam", choices=["sgd", "momentum", "adam", "adamw"])
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--eps", type=float, default=1e-8, help="Adam's epsilon")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--loss", default="cross-entropy", choices=["cross-entropy", "mse", "output"])
    parser.add_argument("--transport", default="threads", choices=["threads", "mpi"])
    parser.add_argument("--backend", default="cpu", choices=["cpu", "emulated", "cuda"],
                        help="pipe-run's backend (default cpu)")
    parser.add_argument("--replicas", type=int, default=1,
                        help="data-parallel replicas of the pipeline (pipe-run --replicas): "
                             "--microbatches each, torch trains on all of them")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="seed of the data")
    parser.add_argument("--tolerance", type=float, default=DEFAULT_TOLERANCE)
    parser.add_argument("--reference", choices=["float32", "float64"], default="float64",
                        help="torch's precision (default float64)")
    parser.add_argument("--baseline", action="store_true",
                        help="also train torch in float32 and compare it with the reference")
    parser.add_argument("--output", default="",
                        help="train the sub-model that ends at this ONNX tensor (its loss "
                             "applies to it)")
    parser.add_argument("--pipe-opt-arg", action="append", default=[],
                        help="another pipe-opt option (repeatable)")
    parser.add_argument("--keep", metavar="DIR",
                        help="work in DIR and keep it (default: a temporary directory)")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    parser.add_argument("--compile-only", metavar="DIR",
                        help="only run pipe-opt for the case into DIR (for --compiled elsewhere)")
    parser.add_argument("--compiled", metavar="DIR",
                        help="use DIR, made by --compile-only with the same options, instead of "
                             "running pipe-opt")
    parser.add_argument("--all-tensors", action="store_true",
                        help="print every tensor's error, not only the worst")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(1)
    case = Case(args.model, args.ranks, args.schedule, args.algo, args.micro_batch_size,
                args.microbatches, args.optimizer, args.lr, args.momentum, args.eps,
                args.weight_decay,
                args.loss, args.transport, args.steps, args.seed, tuple(args.pipe_opt_arg),
                args.output, args.backend, args.replicas)
    dtype = torch.float64 if args.reference == "float64" else torch.float32
    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        os.makedirs(args.keep)
        work = args.keep
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="check-training-")
        work = cleanup.name
    try:
        if args.compile_only:
            target = os.path.abspath(args.compile_only)
            shutil.rmtree(target, ignore_errors=True)
            compile_case(case, work, target)
            print(f"compiled: {args.compile_only}")
            return 0
        result = run_case(case, work, args.tolerance, reference_dtype=dtype,
                          baseline=args.baseline, compiled=args.compiled)
    except ToolError as error:
        print(f"check_training: error: {error}", file=sys.stderr)
        return 2
    finally:
        if cleanup:
            cleanup.cleanup()
    print(format_result(result))
    if args.all_tensors:
        base = {("gradient", e.name): e.error for e in
                (result.baseline.gradients if result.baseline else [])}
        base.update({("weight", e.name): e.error for e in
                     (result.baseline.weights if result.baseline else [])})
        for what, errors in (("gradient", result.ours.gradients),
                             ("weight", result.ours.weights)):
            for e in errors:
                extra = f"  (torch fp32 {base[(what, e.name)]:.2e})" if base else ""
                print(f"  {what} {e.name}: {e.error:.2e}{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.summary(), f, indent=1)
            f.write("\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
