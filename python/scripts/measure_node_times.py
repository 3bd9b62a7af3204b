#!/usr/bin/env python3
"""Measures per-node forward/backward times of an ONNX model with PyTorch.

    measure_node_times.py MODEL.onnx --micro-batch-size 8 --device cuda \
        --repeat 5 --out times.json [--dim NAME=VALUE ...] [--tf32]

Writes {"meta": {...}, "ops": {"<node>": {"forward_ms": f, "backward_ms": b}}},
the profile format of `pipe-opt --profile=FILE` (see docs/cost-model.md,
"Calibration on a GPU"). Shape-only nodes get no entry.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import onnx
import torch

try:
    from pipe_opt.measure import MeasureError, measure_model, write_profile
except ModuleNotFoundError as error:  # neither installed nor on PYTHONPATH
    if error.name != "pipe_opt":
        raise
    sys.exit(f"{error}: pip install ./python, or run with PYTHONPATH=python (docs/python.md)")


def parse_dim(text: str):
    name, sep, value = text.partition("=")
    if not sep or not value.isdigit():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got '{text}'")
    return name, int(value)


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--micro-batch-size", type=int, default=1,
                        help="value of the symbolic 'batch' dimension")
    parser.add_argument("--dim", type=parse_dim, action="append", default=[],
                        help="bind another symbolic input dimension: NAME=VALUE")
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per node (median)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs per node first")
    parser.add_argument("--tf32", action="store_true",
                        help="allow TF32 in GEMMs and convolutions (default: strict fp32)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="profile JSON to write")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every node's times")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("error: --device cuda but torch sees no CUDA device "
                  f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})",
                  file=sys.stderr)
            return 2
        torch.backends.cuda.matmul.allow_tf32 = args.tf32
        torch.backends.cudnn.allow_tf32 = args.tf32
        torch.backends.cudnn.benchmark = False
    start = time.perf_counter()
    model = onnx.load(args.model)
    try:
        times = measure_model(model, args.micro_batch_size, dict(args.dim), args.device,
                              args.repeat, args.warmup, args.seed,
                              progress=print if args.verbose else None)
    except MeasureError as error:
        print(f"error: {args.model}: {error}", file=sys.stderr)
        return 1
    device_name = torch.cuda.get_device_name() if args.device == "cuda" else "cpu"
    meta = {"model": os.path.basename(args.model), "device": device_name,
            "micro_batch_size": args.micro_batch_size, "dims": dict(args.dim),
            "repeat": args.repeat, "warmup": args.warmup,
            "precision": "tf32" if args.tf32 else "fp32", "torch": torch.__version__}
    write_profile(times, args.out, meta)
    total_f = sum(t["forward_ms"] for t in times.values())
    total_b = sum(t["backward_ms"] for t in times.values())
    print(f"{os.path.basename(args.model)}: {len(times)} nodes timed on {device_name}, "
          f"forward {total_f:.3f} ms, backward {total_b:.3f} ms "
          f"({time.perf_counter() - start:.1f} s) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
