#!/usr/bin/python3
"""Fits the V100 kernel models to the shared measured profiles and reports the fit.

    scripts/cost-fit-report.py                       report (leave-one-model-out)
    scripts/cost-fit-report.py --write data/calibration/v100-32gb.json
                                                     and write the fit on every model

For each model the profiles measured (PipeDream's ResNet-50/101, VGG-16,
Inception-v3 and DenseNet-121 in PyTorch, DAPPLE's BERT-large; all on V100, fp32)
it exports the same architecture to ONNX (cached in --models-dir), maps profile
layers to ONNX nodes (pipe_opt.calibration), reads pipe-opt's per-op FLOPs,
bytes and shapes, and fits the kernel families. Every figure printed for a
model comes from a fit that did not see that model; predicted times are
pipe-opt's own (a target file carrying the fitted calibration). It prints:

- per model and kernel family: the median, 10th and 90th percentile of
  predicted / measured over the layers the profiler timed;
- per model: total forward and backward, predicted / measured;
- the plan regret at --stages GPUs, --memory, --microbatches (the profiles'
  reference model): the period, under the measured times, of the plan made
  from the predicted times, over the period of the best plan made from the
  measured ones, for the datasheet roofline and for the calibrated model.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))

from pipe_opt import calibration as cal  # noqa: E402

BASE_TARGET = "v100"


def parse_args(argv: List[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pipe-opt", default=os.path.join(REPO, "build/bin/pipe-opt"))
    p.add_argument("--pipe-plan", default=os.path.join(REPO, "build/bin/pipe-plan"))
    p.add_argument("--profiles", default=os.path.join(REPO, "../shared/data/profiles"),
                   help="directory with pipedream/ and dapple/ profiles")
    p.add_argument("--models-dir", default=os.path.join(REPO, "build/calibration-models"),
                   help="ONNX exports of the measured models (made when missing)")
    p.add_argument("--models", default=",".join(cal.MEASURED_MODELS),
                   help="comma list of " + ", ".join(cal.MEASURED_MODELS))
    p.add_argument("--write", metavar="FILE",
                   help="write the calibration fitted on every model to FILE")
    p.add_argument("--stages", type=int, default=8)
    p.add_argument("--memory", default="16GB")
    p.add_argument("--microbatches", type=int, default=32)
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    return p.parse_args(argv)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Model:
    """One measured model: its profile, ONNX export, mapping and samples."""

    def __init__(self, spec: cal.MeasuredModel, args: argparse.Namespace):
        self.spec = spec
        self.profile_path = os.path.join(args.profiles, spec.profile)
        self.profile = cal.read_profile(self.profile_path)
        self.onnx = os.path.join(args.models_dir, f"{spec.name}.onnx")
        if not os.path.exists(self.onnx):
            log(f"  exporting {spec.name} to {self.onnx}...")
            os.makedirs(args.models_dir, exist_ok=True)
            cal.export_measured_model(spec, args.models_dir)
        self.mapping = cal.map_profile(self.profile, self.onnx, spec.mapping)
        if self.mapping.unmapped:
            raise SystemExit(f"{spec.name}: profile layers with no ONNX node: "
                             f"{', '.join(self.mapping.unmapped)}")
        # The work of each op, unfused: the profiles timed one kernel per op.
        self.features = cal.cost_records(args.pipe_opt, self.onnx, spec.batch, BASE_TARGET,
                                         fuse=False)
        self.layers = cal.mapped_layers(self.profile, self.mapping,
                                        cal.records_by_node(self.features))
        self.samples = cal.samples_of(self.layers, spec.name, spec.per_layer_overhead)
        self.best_period_ms: Optional[float] = None  # pipe-plan's on the measured times

    def predicted_layers(self, args: argparse.Namespace, target: str) -> List[cal.MappedLayer]:
        records = cal.cost_records(args.pipe_opt, self.onnx, self.spec.batch, target)
        return cal.mapped_layers(self.profile, self.mapping, cal.records_by_node(records))


def as_measured(layers: List[cal.MappedLayer], overhead_ms: Tuple[float, float]
                ) -> Dict[str, Tuple[float, float]]:
    """What the profiler would report per layer: pipe-opt's prediction plus
    its cost per timed layer; 0 for layers it did not time (PipeDream
    reports 0 for Add and Concat)."""
    return {ml.layer.id: (ml.predicted_ms(0) + overhead_ms[0], ml.predicted_ms(1) +
                          overhead_ms[1]) if ml.layer.timed else (0.0, 0.0)
            for ml in layers}


def ratios(layers: List[cal.MappedLayer], predicted: Dict[str, Tuple[float, float]]
           ) -> Dict[str, List[float]]:
    """predicted / measured per family and direction, over timed layers."""
    out: Dict[str, List[float]] = {}
    for ml in layers:
        for direction in (0, 1):
            measured = ml.measured_ms(direction)
            if measured > 0:
                key = f"{ml.family} {'bwd' if direction else 'fwd'}"
                out.setdefault(key, []).append(predicted[ml.layer.id][direction] / measured)
    return out


def totals(layers: List[cal.MappedLayer], predicted: Dict[str, Tuple[float, float]]
           ) -> Tuple[float, float]:
    """Total predicted / measured, forward and backward, over timed layers."""
    result = []
    for direction in (0, 1):
        timed = [ml for ml in layers if ml.layer.timed]
        total = sum(predicted[ml.layer.id][direction] for ml in timed)
        measured = sum(ml.measured_ms(direction) for ml in timed)
        result.append(total / measured if measured > 0 else float("nan"))
    return result[0], result[1]


def quantile(values: List[float], q: float) -> float:
    values = sorted(values)
    position = q * (len(values) - 1)
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def plan_period(args: argparse.Namespace, profile_path: str, plan_json: str = "",
                replay: str = "") -> float:
    """The period (ms) of pipe-plan's best plan on `profile_path`, written to
    `plan_json`, or of the plan `replay` re-simulated on it."""
    command = [args.pipe_plan, profile_path, "--stages", str(args.stages), "--memory",
               args.memory, "--microbatches", str(args.microbatches), "--reference-model",
               "--quiet"]
    if replay:
        command += ["--replay", replay]
    if plan_json:
        command += ["--json", plan_json]
    done = subprocess.run(command, capture_output=True, text=True)
    # A replay on other times differs from the period the plan was made for
    # (the point here), which pipe-plan reports with a non-zero status.
    if replay:
        m = re.search(r"replayed .*: period ([\d.eE+-]+) ms", done.stdout)
        if m:
            return float(m.group(1))
    elif done.returncode == 0:
        with open(plan_json) as f:
            return float(json.load(f)["period_ms"])
    raise RuntimeError(f"{' '.join(command)}: {done.stdout}{done.stderr}")


def plan_regret(args: argparse.Namespace, model: Model, times: Dict[str, Tuple[float, float]],
                workdir: str, tag: str) -> Dict[str, float]:
    predicted_profile = os.path.join(workdir, f"{model.spec.name}.{tag}.txt")
    with open(predicted_profile, "w") as f:
        f.write(model.profile.with_times(times))
    predicted_plan = os.path.join(workdir, f"{model.spec.name}.{tag}.plan.json")
    plan_period(args, predicted_profile, plan_json=predicted_plan)
    replayed = plan_period(args, model.profile_path, replay=predicted_plan)
    if model.best_period_ms is None:
        model.best_period_ms = plan_period(
            args, model.profile_path, plan_json=os.path.join(workdir, f"{model.spec.name}.json"))
    best = model.best_period_ms
    return {"period_ms": replayed, "best_ms": best, "regret": replayed / best}


def identical_layers_averaged(model: Model) -> Dict[str, Tuple[float, float]]:
    """The measured times with every group of identical layers (same module
    description, activation and parameter sizes) given its mean: the best
    any model can do that predicts equal layers equally. Its regret is the
    floor the profile's own noise sets."""
    groups: Dict[tuple, List[cal.ProfileLayer]] = {}
    for layer in model.profile.layers.values():
        key = (layer.description, layer.activation_bytes, layer.parameter_bytes)
        groups.setdefault(key, []).append(layer)
    out = {}
    for members in groups.values():
        f = statistics.mean(layer.forward_ms for layer in members)
        b = statistics.mean(layer.backward_ms for layer in members)
        for layer in members:
            out[layer.id] = (f, b)
    return out


def target_file(workdir: str, name: str, calibration: Optional[dict]) -> str:
    path = os.path.join(workdir, f"{name}.target.json")
    with open(path, "w") as f:
        json.dump({"base": BASE_TARGET, "name": name, "calibration": calibration}, f, indent=1)
    return path


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    for tool in (args.pipe_opt, args.pipe_plan):
        if not os.access(tool, os.X_OK):
            sys.exit(f"{tool}: not built (ninja -C build)")
    if not os.path.isdir(args.profiles):
        sys.exit(f"{args.profiles}: no profiles directory (--profiles DIR)")
    names = [n for n in args.models.split(",") if n]
    for n in names:
        if n not in cal.MEASURED_MODELS:
            sys.exit(f"unknown model '{n}'; known: {', '.join(cal.MEASURED_MODELS)}")
    start = time.perf_counter()
    models = []
    for index, name in enumerate(names):
        log(f"[{index + 1}/{len(names)} {time.perf_counter() - start:5.1f} s] {name}: "
            "export, map, costs...")
        models.append(Model(cal.MEASURED_MODELS[name], args))
        m = models[-1]
        mapped = sum(1 for lid in m.profile.layers if lid in m.mapping.nodes)
        log(f"  {len(m.profile.layers)} layers, {mapped} mapped, {len(m.samples)} samples")

    hw = cal.V100_FP32
    fitted_on = [m for m in models if m.samples]
    source = ("V100 per-layer profiles: " + "; ".join(m.spec.description for m in fitted_on) +
              f". Fitted on {time.strftime('%Y-%m-%d')} by scripts/cost-fit-report.py")
    report = {"models": {}}
    with tempfile.TemporaryDirectory(prefix="cost-fit-") as workdir:
        if args.write:
            fitted = cal.fit([s for m in models for s in m.samples], hw)
            note = (f" --write {os.path.relpath(args.write, REPO)}; the profiler's own cost "
                    f"per timed layer, not part of these kernel times: "
                    f"{fitted.layer_overhead_s[0] * 1e6:.0f} us forward, "
                    f"{fitted.layer_overhead_s[1] * 1e6:.0f} us backward")
            text = json.dumps(cal.calibration_json(fitted.models, source + note), indent=2)
            # One line per list of numbers.
            text = re.sub(r"\[\s+([^\[\]{}]*?)\s+\]",
                          lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
            with open(args.write, "w") as f:
                f.write(text + "\n")
            log(f"wrote {args.write} ({len(fitted.models)} family/direction models; "
                f"PipeDream's cost per layer: {fitted.layer_overhead_s[0] * 1e6:.0f} us forward, "
                f"{fitted.layer_overhead_s[1] * 1e6:.0f} us backward)")

        roofline = target_file(workdir, "v100-roofline", None)
        rows_ratio, rows_total, rows_regret = [], [], []
        for m in models:
            log(f"[{time.perf_counter() - start:5.1f} s] {m.spec.name}: held out")
            train = [s for other in models if other is not m for s in other.samples]
            held_out = cal.fit(train, hw)
            target = target_file(workdir, f"v100-without-{m.spec.name}",
                                 cal.calibration_json(held_out.models, source))
            overhead = tuple(1e3 * x for x in held_out.layer_overhead_s) \
                if m.spec.per_layer_overhead else (0.0, 0.0)
            entry = {}
            for label, path, cost in (("roofline", roofline, (0.0, 0.0)),
                                      ("calibrated", target, overhead)):
                layers = m.predicted_layers(args, path)
                predicted = as_measured(layers, cost)
                r = ratios(layers, predicted)
                fwd, bwd = totals(layers, predicted)
                regret = plan_regret(args, m, predicted, workdir, label)
                entry[label] = {"ratios": r, "forward": fwd, "backward": bwd, **regret}
            entry["noise floor"] = plan_regret(args, m, identical_layers_averaged(m), workdir,
                                               "averaged")
            report["models"][m.spec.name] = entry
            for key in sorted(entry["calibrated"]["ratios"]):
                values = entry["calibrated"]["ratios"][key]
                before = entry["roofline"]["ratios"].get(key, [])
                old = f"{statistics.median(before):.2f}" if before else "–"
                rows_ratio.append(f"| {m.spec.name} | {key} | {len(values)} | {old} | "
                                  f"{statistics.median(values):.2f} | "
                                  f"{quantile(values, 0.1):.2f} | {quantile(values, 0.9):.2f} |")
            c, b = entry["calibrated"], entry["roofline"]
            rows_total.append(f"| {m.spec.name} | {b['forward']:.2f} | {b['backward']:.2f} | "
                              f"{c['forward']:.2f} | {c['backward']:.2f} |")
            floor = entry["noise floor"]["regret"]
            rows_regret.append(f"| {m.spec.name} | {c['best_ms']:.1f} | {b['period_ms']:.1f} | "
                               f"{100 * (b['regret'] - 1):+.1f}% | {c['period_ms']:.1f} | "
                               f"{100 * (c['regret'] - 1):+.1f}% | {100 * (floor - 1):+.1f}% |")

    print(f"Leave-one-model-out on {len(models)} models "
          f"({', '.join(m.spec.name for m in models)}); V100 fp32, eager (unfused) kernels.\n")
    print("Predicted / measured per kernel family, over the layers the profiler timed "
          "(roofline: datasheet rates with the default efficiencies; calibrated: fitted "
          "without the model):\n")
    print("| model | family | layers | roofline median | calibrated median | p10 | p90 |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows_ratio))
    print("\nTotal time predicted / measured:\n")
    print("| model | roofline fwd | roofline bwd | calibrated fwd | calibrated bwd |")
    print("|---|---|---|---|---|")
    print("\n".join(rows_total))
    print(f"\nPlan regret at {args.stages} GPUs, {args.memory}, m = {args.microbatches} "
          "(the profiles' reference model): the period under the measured times of the "
          "plan made from the predicted times, against the best plan on the measured "
          "times. Noise floor: the regret of the plan made from the measured times with "
          "identical layers averaged (what a model that predicts equal layers equally "
          "cannot beat):\n")
    print("| model | best on measured (ms) | roofline plan (ms) | regret | "
          "calibrated plan (ms) | regret | noise floor |")
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows_regret))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    log(f"done in {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
