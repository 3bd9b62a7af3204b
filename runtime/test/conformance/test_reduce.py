"""Conformance of pipe_k_reduce (sum, mean, max, min, prod over sorted axes)
against torch in float64; integer reductions exactly."""

from __future__ import annotations

import unittest

import numpy as np
import torch

from piperun import F32, I32, I64, NUMPY_OF, REDUCE, KernelTest, add_cases, ints

torch.set_num_threads(1)


def torch_reduce(fn, x, axes):
    if not axes:
        return x.clone()
    if fn == "sum":
        return torch.sum(x, dim=axes)
    if fn == "mean":
        return torch.mean(x, dim=axes)
    if fn == "max":
        return torch.amax(x, dim=axes)
    if fn == "min":
        return torch.amin(x, dim=axes)
    for axis in sorted(axes, reverse=True):
        x = torch.prod(x, dim=axis)
    return x


SHAPES = [
    ("3d_axis0", (3, 4, 5), [0]),
    ("3d_axis1", (3, 4, 5), [1]),
    ("3d_axis2", (3, 4, 5), [2]),
    ("3d_outer_inner", (3, 4, 5), [0, 2]),
    ("3d_all", (3, 4, 5), [0, 1, 2]),
    ("3d_none", (3, 4, 5), []),
    ("vector", (13,), [0]),
    ("unit_axis", (2, 1, 3), [1]),
    ("columns", (7, 6), [0]),
    ("alternating", (2, 3, 4, 5), [1, 3]),
    ("leading_two", (2, 3, 4, 5), [0, 1]),
    ("scalar", (), []),
    ("large_rows", (64, 300, 5), [1]),
    ("large_columns", (300, 257), [0]),
]


class ReduceTest(KernelTest):
    def run_reduce(self, fn, shape, axes, dtype=F32, seed=0):
        g = np.random.default_rng(seed)
        if dtype in (I64, I32):
            x = g.integers(-20, 20, shape).astype(NUMPY_OF[dtype])
            if fn == "prod":
                x = g.integers(-2, 3, shape).astype(NUMPY_OF[dtype])
        elif fn == "prod":
            x = np.asarray(g.uniform(0.8, 1.25, shape) * g.choice([-1, 1], shape)).astype(np.float32)
        else:
            x = np.asarray(g.normal(0, 1, shape)).astype(np.float32)
        ref = torch_reduce(fn, torch.from_numpy(x) if dtype != F32 else torch.from_numpy(x).double(),
                           axes).numpy()
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_reduce", REDUCE[fn], self.rank.tensor(x), y, ints(axes))
        if dtype == F32:
            self.check("reduce", self.rank.array(y), ref)
        else:
            self.check_exact("reduce", self.rank.array(y), ref.astype(NUMPY_OF[dtype]))

    def test_reduce__keepdims_shape(self):
        # Only the element count of y matters: keepdims [3, 1, 5] is accepted.
        x = np.random.default_rng(1).normal(0, 1, (3, 4, 5)).astype(np.float32)
        y = self.rank.empty((3, 1, 5))
        self.rank.call("pipe_k_reduce", REDUCE["sum"], self.rank.tensor(x), y, ints([1]))
        self.check("reduce", self.rank.array(y), x.astype(np.float64).sum(1, keepdims=True))

    def test_reduce__nan_propagates(self):
        x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]], np.float32)
        for fn in ("max", "min", "sum"):
            y = self.rank.empty((2,))
            self.rank.call("pipe_k_reduce", REDUCE[fn], self.rank.tensor(x), y, ints([1]))
            ref = torch_reduce(fn, torch.from_numpy(x), [1]).numpy()
            self.check_exact("reduce", self.rank.array(y), ref)

    def test_reduce__empty_axis(self):
        # Reducing a zero-size axis gives the identity (0 for sum, 1 for prod, NaN for mean).
        x = np.zeros((0, 3), np.float32)
        for fn, value in (("sum", 0.0), ("prod", 1.0), ("mean", np.nan)):
            y = self.rank.empty((3,))
            self.rank.call("pipe_k_reduce", REDUCE[fn], self.rank.tensor(x), y, ints([0]))
            ref = torch_reduce(fn, torch.from_numpy(x), [0]).numpy()
            self.check_exact("reduce", self.rank.array(y), ref)
            self.assertTrue(np.array_equal(ref, np.full(3, value, np.float32), equal_nan=True))


CASES = []
for _fn in REDUCE:
    for _name, _shape, _axes in SHAPES:
        CASES.append(("%s_%s" % (_fn, _name), dict(fn=_fn, shape=_shape, axes=_axes)))
for _fn in ("sum", "max", "min", "prod"):
    for _name, _shape, _axes in (SHAPES[3], SHAPES[8], SHAPES[9]):
        CASES.append(("%s_i64_%s" % (_fn, _name), dict(fn=_fn, shape=_shape, axes=_axes, dtype=I64)))
    CASES.append(("%s_i32_columns" % _fn, dict(fn=_fn, shape=(7, 6), axes=[0], dtype=I32)))
# Seeded random shapes (ranks 1-5, unit dims) and axis sets, every function.
_random = np.random.default_rng(4)
for _i in range(20):
    _shape = tuple(int(d) for d in _random.integers(1, 6, int(_random.integers(1, 6))))
    _axes = sorted(int(a) for a in _random.choice(len(_shape), int(_random.integers(0, len(_shape) + 1)),
                                                  replace=False))
    _fn = list(REDUCE)[_i % len(REDUCE)]
    _dtype = (F32, F32, I64, I32)[_i % 4] if _fn != "mean" else F32
    CASES.append(("%s_random_%d" % (_fn, _i), dict(fn=_fn, shape=_shape, axes=_axes, dtype=_dtype,
                                                   seed=_i)))
add_cases(ReduceTest, "reduce", CASES, ReduceTest.run_reduce)


if __name__ == "__main__":
    unittest.main()
