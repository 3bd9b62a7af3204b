#!/usr/bin/env python3
"""Writes model.bin, the weights of the mlp2 test program: fc1.weight [16, 8],
fc1.bias [16], fc2.weight [4, 16], fc2.bias [4], float32 little-endian, one after
the other (the offsets rank0.cpp and rank1.cpp declare: 0, 512, 576, 832).

    /usr/bin/python3 runtime/test/programs/mlp2/make_model.py
"""
import os

import numpy as np

SHAPES = [("fc1.weight", (16, 8)), ("fc1.bias", (16,)), ("fc2.weight", (4, 16)),
          ("fc2.bias", (4,))]


def weights():
    rng = np.random.default_rng(20240611)
    return {name: (rng.standard_normal(shape) * 0.4).astype("<f4") for name, shape in SHAPES}


if __name__ == "__main__":
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.bin")
    with open(path, "wb") as out:
        for name, _ in SHAPES:
            out.write(weights()[name].tobytes())
