#!/usr/bin/python3
"""Random chain problem generator (problem JSON on stdout).

  gen_chain.py LAYERS [--seed N] [--gpus P] [--memory BYTES]

Layers look like a mix of transformer blocks and convolutions: forward 0.2-4 ms,
backward 1.5-2.5x forward, parameters 0-20 MB, saved activations 1-24 MB (larger
early), output 1-20 MB. Deterministic for a given seed.
"""
import argparse
import json
import random
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("layers", type=int)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gpus", type=int, default=64)
    parser.add_argument("--memory", type=float, default=16e9)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    layers = []
    for i in range(args.layers):
        forward = rng.uniform(0.2, 4.0)
        early = 1.0 + 3.0 * (1 - i / max(1, args.layers - 1))
        layers.append({
            "name": f"layer{i}",
            "forward_ms": round(forward, 4),
            "backward_ms": round(forward * rng.uniform(1.5, 2.5), 4),
            "parameter_bytes": round(rng.uniform(0, 20e6)),
            "saved_bytes": round(rng.uniform(1e6, 6e6) * early),
            "output_bytes": round(rng.uniform(1e6, 20e6)),
        })
    problem = {
        "name": f"random-chain-{args.layers}-seed{args.seed}",
        "layers": layers,
        "platform": {"gpus": args.gpus, "memory_bytes_per_gpu": args.memory},
        "training": {"microbatches": 2 * args.gpus},
    }
    json.dump(problem, sys.stdout)


if __name__ == "__main__":
    main()
