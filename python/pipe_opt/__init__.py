"""pipe-opt: plan pipelined model-parallel training of an ONNX model on N GPUs.

This package is the user-facing Python side (docs/python.md):

- `plan_model(module_or_onnx_path, example_inputs, stages=8, ...)` plans training
  with pipe-opt's main job and returns a `Plan` (stage of each node and module,
  period, per-stage time and memory, `to_json()`, `to_svg()`);
- `plan_problem(problem_json, ...)` runs the partitioner alone on a problem JSON;
- `export_for_pipeline(module, example_inputs, path)` exports a torch model to
  ONNX in the form the pipe-opt importer expects (see `export`).

The planners are a compiled extension, `pipe_opt._native`; torch is imported only
when a torch model is exported or planned.
"""

from pkgutil import extend_path

# The package may be split across directories: from a checkout, the sources in
# python/pipe_opt and the built extension in <build>/python/pipe_opt, both found
# with PYTHONPATH=python:build/python.
__path__ = extend_path(__path__, __name__)

from pipe_opt.plan import (  # noqa: E402
    Plan,
    PlanError,
    StageInfo,
    list_algorithms,
    native_available,
    plan_model,
    plan_problem,
)

__all__ = [
    "ExportReport",
    "Plan",
    "PlanError",
    "StageInfo",
    "export_for_pipeline",
    "list_algorithms",
    "native_available",
    "plan_model",
    "plan_problem",
]

# Imported on first use: the exporter needs torch, planning an ONNX file does not.
_LAZY = {"ExportReport": "pipe_opt.export", "export_for_pipeline": "pipe_opt.export"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pipe_opt' has no attribute '{name}'")
