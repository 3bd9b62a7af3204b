#!/usr/bin/env python3
"""Exports the test model families to ONNX with pipe_opt.export_for_pipeline.

    export_models.py --size tiny --out test/Fixtures/models   the committed fixtures
    export_models.py --size real --out DIR       real-size exports (not committed)
    export_models.py --size real --out DIR --only gpt2 --opset 14 --eval

With neither --opset nor --eval, `--size tiny` writes the whole fixture set:
every family in training mode at opset 17 plus a few variants at other
opsets and in eval mode. Given either flag, it writes exactly that variant.
Weights and inputs come from fixed seeds, so reruns give the same models.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import warnings
from typing import List, NamedTuple

import torch

try:
    from pipe_opt import export_for_pipeline, models
except ModuleNotFoundError as error:  # neither installed nor on PYTHONPATH
    if error.name != "pipe_opt":
        raise
    sys.exit(f"{error}: pip install ./python, or run with PYTHONPATH=python (docs/python.md)")

DEFAULT_OPSET = 17


class Variant(NamedTuple):
    name: str
    training: bool = True
    opset: int = DEFAULT_OPSET

    @property
    def file_stem(self) -> str:
        stem = self.name if self.training else f"{self.name}_eval"
        return stem if self.opset == DEFAULT_OPSET else f"{stem}_opset{self.opset}"


# Besides every family in training mode at opset 17, the importer sees eval
# graphs (BatchNormalization/Dropout in inference form, Inception-v3 without
# its auxiliary head) and older opsets (LayerNormalization decomposed below
# 17; training BatchNormalization with 5 outputs and no training_mode below 14).
FIXTURE_EXTRA_VARIANTS = (
    Variant("resnet50", training=False, opset=13),
    Variant("mobilenet_v2", training=True, opset=13),
    Variant("gpt2", training=True, opset=14),
    Variant("bert", training=False, opset=13),
    Variant("inception_v3", training=False, opset=17),
)


def parse_args(argv: List[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=models.SIZES, default="tiny")
    parser.add_argument("--out", required=True,
                        help="output directory (test/Fixtures/models for the committed fixtures)")
    parser.add_argument("--opset", type=int, help=f"ONNX opset (default {DEFAULT_OPSET})")
    parser.add_argument("--eval", action="store_true", help="export eval-mode graphs")
    parser.add_argument("--only", action="append", choices=list(models.FAMILIES),
                        help="export only this family (repeatable)")
    parser.add_argument("--batch", type=int, default=2,
                        help="batch size of the example inputs (the exported batch is symbolic)")
    parser.add_argument("--external-data", action="store_true",
                        help="write weights to <model>.onnx.data next to each model")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1),
                        help="torch CPU threads (default: 2, or 1 on one core); the files "
                        "are the same with any count")
    return parser.parse_args(argv)


def variants_to_export(args: argparse.Namespace) -> List[Variant]:
    names = args.only or list(models.FAMILIES)
    if args.opset is None and not args.eval and args.size == "tiny":
        chosen = [Variant(name) for name in names]
        chosen += [v for v in FIXTURE_EXTRA_VARIANTS if v.name in names]
        return chosen
    opset = args.opset or DEFAULT_OPSET
    return [Variant(name, training=not args.eval, opset=opset) for name in names]


def peak_rss_gb() -> float:
    """The process' peak resident memory so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def export_variant(variant: Variant, args: argparse.Namespace, out_dir: str) -> int:
    start = time.perf_counter()
    built = models.build(variant.name, args.size, training=variant.training, batch=args.batch)
    build_seconds = time.perf_counter() - start
    path = os.path.join(out_dir, variant.file_stem + ".onnx")
    report = export_for_pipeline(
        built.model, built.example_inputs, path,
        input_names=built.input_names, output_names=built.output_names,
        opset=variant.opset, training=variant.training,
        external_data=True if args.external_data else None,
    )
    family = models.FAMILIES[variant.name]
    check = ""
    if args.size == "real":
        expected = family.real_parameters
        if variant.name == "inception_v3" and not variant.training:
            expected = models.INCEPTION_V3_WITHOUT_AUX_PARAMETERS
        check = " (as expected)" if report.num_parameters == expected else \
            f" (EXPECTED {expected:,})"
    mode = "train" if variant.training else "eval"
    print(f"{variant.file_stem:28s} {mode:5s} opset {report.opset}  "
          f"params {report.num_parameters:>11,}{check}  nodes {report.num_nodes:5d}  "
          f"op types {len(report.op_counts):2d}  bytes {report.bytes:>11,}  "
          f"build {build_seconds:6.1f} s  export {report.seconds:6.1f} s  "
          f"peak RSS {peak_rss_gb():4.1f} GiB", flush=True)
    return report.bytes


def main(argv: List[str]) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    # Tracing warnings about Python values becoming constants are expected
    # here (shapes are static apart from the batch).
    warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
    out_dir = args.out
    os.makedirs(out_dir, exist_ok=True)
    total_start = time.perf_counter()
    total_bytes = 0
    failed = []
    chosen = variants_to_export(args)
    for index, variant in enumerate(chosen):
        mode = "train" if variant.training else "eval"
        print(f"[{index + 1}/{len(chosen)} {time.perf_counter() - total_start:6.1f} s] "
              f"{variant.file_stem} ({args.size}, {mode}, opset {variant.opset})...", flush=True)
        try:
            total_bytes += export_variant(variant, args, out_dir)
        except Exception as error:  # report every model, then fail
            failed.append(variant.file_stem)
            print(f"{variant.file_stem:28s} FAILED: {type(error).__name__}: {error}", flush=True)
    print(f"total {total_bytes:,} bytes in {time.perf_counter() - total_start:.1f} s, "
          f"peak RSS {peak_rss_gb():.1f} GiB (torch {torch.__version__})")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
