#!/usr/bin/env python3
"""PyTorch eager's training step, the baseline the CUDA backend is timed against.

Trains a model family of pipe_opt.models in torch, as pipe-run trains the
program pipe-opt made of it: `--microbatches` micro-batches of
`--micro-batch-size` samples per step, gradients accumulated over them, then
one Adam step (lr 1e-3, pipe-opt's default optimizer); cross entropy on
random labels (GPT-2: random token ids and next tokens; image models: random
images and classes); dropout on, as in training. Prints one line:

    torch eager: gpt2 real, 8 x 4 samples, cuda: step 512.3 ms (median of 4), peak 9.87 GiB

(peak: torch.cuda.max_memory_allocated, on a GPU only) and, with --json, the
same as JSON. The first --warmup steps are not timed (cuDNN and cuBLAS pick
their algorithms then).

    bench_step.py --model gpt2 --size real --micro-batch-size 4 --microbatches 8 --device cuda
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

try:
    from pipe_opt import models
except ModuleNotFoundError as error:  # neither installed nor on PYTHONPATH
    if error.name != "pipe_opt":
        raise
    sys.exit(f"{error}: pip install ./python, or run with PYTHONPATH=python (docs/python.md)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, choices=sorted(models.FAMILIES))
    parser.add_argument("--size", default="real", choices=models.SIZES)
    parser.add_argument("--micro-batch-size", type=int, default=4)
    parser.add_argument("--microbatches", type=int, default=8)
    parser.add_argument("--steps", type=int, default=4, help="timed steps")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("bench_step: no usable GPU (torch.cuda.is_available() is false)", file=sys.stderr)
        return 2

    built = models.build(args.model, args.size, training=True, batch=args.micro_batch_size)
    model = built.model.to(device)
    model.train(True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    image = args.model in models.IMAGE_FAMILIES
    with torch.no_grad():
        probe = model(built.example_inputs[0][:1].to(device))
    probe = probe[0] if isinstance(probe, (tuple, list)) else probe
    classes = probe.shape[-1]

    def micro_batch():
        example = built.example_inputs[0]
        shape = (args.micro_batch_size,) + tuple(example.shape[1:])
        if image:
            inputs = torch.randn(shape, generator=generator)
            labels = torch.randint(0, classes, (args.micro_batch_size,), generator=generator)
        else:
            inputs = torch.randint(0, classes, shape, generator=generator)
            labels = torch.randint(0, classes, shape, generator=generator)
        return inputs.to(device), labels.to(device)

    data = [micro_batch() for _ in range(args.microbatches)]

    def step():
        optimizer.zero_grad(set_to_none=False)
        for inputs, labels in data:
            output = model(inputs)
            output = output[0] if isinstance(output, (tuple, list)) else output
            loss = F.cross_entropy(output.reshape(-1, classes), labels.reshape(-1))
            (loss / args.microbatches).backward()
        optimizer.step()

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    synchronize()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        step()
        synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    result = {
        "model": args.model, "size": args.size, "device": str(device),
        "micro_batch_size": args.micro_batch_size, "microbatches": args.microbatches,
        "step_ms": statistics.median(times), "steps_ms": times,
        "peak_bytes": torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None,
    }
    peak = (f", peak {result['peak_bytes'] / 2**30:.2f} GiB"
            if result["peak_bytes"] is not None else "")
    print(f"torch eager: {args.model} {args.size}, {args.microbatches} x "
          f"{args.micro_batch_size} samples, {device.type}: step {result['step_ms']:.1f} ms "
          f"(median of {len(times)}){peak}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
