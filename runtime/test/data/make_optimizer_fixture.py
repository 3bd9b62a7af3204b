#!/usr/bin/env python3
"""Writes optimizer_fixture.json: parameter values after each of 4 steps of
torch.optim.SGD / SGD(momentum) / Adam / AdamW from fixed starting values and
gradients, the reference OptimizerTest.cpp checks pipe_update against.

    /usr/bin/python3 runtime/test/data/make_optimizer_fixture.py
"""
import json
import os

import torch

STEPS = 4
SIZE = 7


def case(name, kind, make, lr, momentum=0.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
    generator = torch.Generator().manual_seed(sum(ord(c) for c in name))
    start = torch.randn(SIZE, generator=generator, dtype=torch.float32)
    grads = [torch.randn(SIZE, generator=generator, dtype=torch.float32) * 0.5
             for _ in range(STEPS)]
    param = torch.nn.Parameter(start.clone())
    optimizer = make([param])
    expected = []
    for g in grads:
        optimizer.zero_grad()
        param.grad = g.clone()
        optimizer.step()
        expected.append([float(v) for v in param.detach()])
    return {"name": name, "kind": kind, "lr": lr, "momentum": momentum, "beta1": betas[0],
            "beta2": betas[1], "eps": eps, "weight_decay": weight_decay,
            "start": [float(v) for v in start], "grads": [[float(v) for v in g] for g in grads],
            "expected": expected}


def main():
    cases = [
        case("sgd", 0, lambda p: torch.optim.SGD(p, lr=0.1), 0.1),
        case("sgd_decay", 0, lambda p: torch.optim.SGD(p, lr=0.05, weight_decay=0.01), 0.05,
             weight_decay=0.01),
        case("momentum", 1, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9), 0.1, momentum=0.9),
        case("momentum_decay", 1,
             lambda p: torch.optim.SGD(p, lr=0.02, momentum=0.8, weight_decay=0.1), 0.02,
             momentum=0.8, weight_decay=0.1),
        case("adam", 2, lambda p: torch.optim.Adam(p, lr=0.01), 0.01),
        case("adam_decay", 2,
             lambda p: torch.optim.Adam(p, lr=0.003, betas=(0.8, 0.99), eps=1e-6,
                                        weight_decay=0.05), 0.003, betas=(0.8, 0.99), eps=1e-6,
             weight_decay=0.05),
        case("adamw", 3, lambda p: torch.optim.AdamW(p, lr=0.01), 0.01, weight_decay=0.01),
        case("adamw_decay", 3,
             lambda p: torch.optim.AdamW(p, lr=0.02, betas=(0.85, 0.995), weight_decay=0.3), 0.02,
             betas=(0.85, 0.995), weight_decay=0.3),
    ]
    document = {"generator": "make_optimizer_fixture.py", "torch": torch.__version__,
                "cases": cases}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optimizer_fixture.json")
    with open(path, "w") as out:
        json.dump(document, out, indent=1)
        out.write("\n")


if __name__ == "__main__":
    main()
