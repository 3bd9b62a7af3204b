"""pipe-opt: plan pipelined model-parallel training of an ONNX model on N GPUs.

This package is the user-facing Python side. Its first piece exports a torch
model to ONNX in the form the pipe-opt importer expects (see `export`).
"""

from pipe_opt.export import ExportReport, export_for_pipeline

__all__ = ["ExportReport", "export_for_pipeline"]
