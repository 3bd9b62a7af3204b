"""Conformance of pipe_k_max_pool(_grad) and pipe_k_average_pool(_grad)
against torch.nn.functional's pooling in float64: values, ONNX-style indices
(flat into the whole input; ties keep the first maximum), ceil mode through
y's shape, count_include_pad, and asymmetric pads (x padded first)."""

from __future__ import annotations

import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import I64, KernelTest, add_cases, ints

torch.set_num_threads(1)

MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def torch_pads(pads, s):
    out = []
    for i in reversed(range(s)):
        out += [pads[i], pads[s + i]]
    return out


def symmetric(pads, s):
    return all(pads[i] == pads[s + i] for i in range(s))


def pool_input(shape, ties, seed):
    g = np.random.default_rng(seed)
    if ties:
        return g.integers(0, 3, shape).astype(np.float32)
    return g.normal(0, 1, shape).astype(np.float32)


def torch_max_pool(x, kernel, strides, pads, dilations, ceil_mode):
    """y and ONNX indices (flat into all of x) of a max pool; x float64."""
    s = x.dim() - 2
    if symmetric(pads, s):
        y, idx = MAX_POOL[s](x, tuple(kernel), tuple(strides), tuple(pads[:s]),
                             tuple(dilations), ceil_mode=ceil_mode, return_indices=True)
        in_spatial = tuple(x.shape[2:])
        coords = np.unravel_index(idx.numpy(), in_spatial)
    else:
        assert not ceil_mode
        xp = F.pad(x, torch_pads(pads, s), value=-np.inf)
        y, idx = MAX_POOL[s](xp, tuple(kernel), tuple(strides), 0, tuple(dilations),
                             return_indices=True)
        in_spatial = tuple(x.shape[2:])
        coords = np.unravel_index(idx.numpy(), tuple(xp.shape[2:]))
        coords = tuple(c - pads[i] for i, c in enumerate(coords))
    flat = np.ravel_multi_index(coords, in_spatial)
    volume = int(np.prod(in_spatial))
    planes = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1])
    planes = planes.reshape(planes.shape + (1,) * s)
    return y, (flat + planes * volume).astype(np.int64)


def torch_avg_pool(x, kernel, strides, pads, ceil_mode, count_include_pad):
    s = x.dim() - 2
    if symmetric(pads, s):
        return AVG_POOL[s](x, tuple(kernel), tuple(strides), tuple(pads[:s]),
                           ceil_mode=ceil_mode, count_include_pad=bool(count_include_pad))
    assert not ceil_mode
    pool = lambda t: AVG_POOL[s](F.pad(t, torch_pads(pads, s)), tuple(kernel), tuple(strides))
    if count_include_pad:
        return pool(x)
    return pool(x) / pool(torch.ones_like(x))


MAX_CASES = [
    ("2d_k3s2p1", dict(x=(2, 3, 9, 9), kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
    ("2d_k2s2", dict(x=(1, 2, 8, 6), kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0))),
    ("2d_ceil", dict(x=(1, 2, 8, 8), kernel=(3, 3), strides=(2, 2), pads=(0, 0, 0, 0),
                     ceil_mode=True)),
    ("2d_ceil_padded", dict(x=(2, 1, 7, 10), kernel=(3, 2), strides=(2, 3), pads=(1, 1, 1, 1),
                            ceil_mode=True)),
    ("2d_dilation", dict(x=(1, 3, 11, 9), kernel=(3, 2), strides=(1, 2), pads=(1, 0, 1, 0),
                         dilations=(2, 3))),
    ("2d_ties", dict(x=(2, 2, 7, 7), kernel=(3, 3), strides=(1, 1), pads=(1, 1, 1, 1),
                     ties=True)),
    ("2d_ties_ceil", dict(x=(1, 3, 6, 7), kernel=(2, 3), strides=(2, 2), pads=(0, 1, 0, 1),
                          ceil_mode=True, ties=True)),
    ("2d_asymmetric", dict(x=(2, 2, 7, 6), kernel=(3, 3), strides=(2, 1), pads=(0, 1, 1, 0))),
    ("2d_asymmetric_ties", dict(x=(1, 2, 5, 5), kernel=(2, 2), strides=(1, 1),
                                pads=(1, 0, 0, 1), ties=True)),
    ("2d_global", dict(x=(3, 4, 5, 5), kernel=(5, 5), strides=(1, 1), pads=(0, 0, 0, 0))),
    ("1d", dict(x=(2, 3, 13), kernel=(3,), strides=(2,), pads=(1, 1))),
    ("1d_ceil_dilation", dict(x=(1, 2, 12), kernel=(2,), strides=(3,), pads=(0, 0),
                              dilations=(2,), ceil_mode=True)),
    ("3d", dict(x=(1, 2, 5, 6, 7), kernel=(2, 3, 2), strides=(2, 1, 2), pads=(1, 1, 0, 1, 1, 0))),
    ("3d_ceil_ties", dict(x=(2, 1, 5, 5, 5), kernel=(2, 2, 2), strides=(2, 2, 2),
                          pads=(0, 0, 0, 0, 0, 0), ceil_mode=True, ties=True)),
    ("large", dict(x=(8, 16, 32, 32), kernel=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))),
]

AVG_CASES = []
for _include in (0, 1):
    _tag = "include_pad" if _include else "exclude_pad"
    AVG_CASES += [
        ("2d_k3s2p1_" + _tag, dict(x=(2, 3, 9, 9), kernel=(3, 3), strides=(2, 2),
                                   pads=(1, 1, 1, 1), count_include_pad=_include)),
        ("2d_ceil_" + _tag, dict(x=(1, 2, 8, 7), kernel=(3, 3), strides=(2, 2),
                                 pads=(1, 1, 1, 1), ceil_mode=True, count_include_pad=_include)),
        ("2d_ceil_unpadded_" + _tag, dict(x=(1, 2, 8, 8), kernel=(3, 2), strides=(2, 3),
                                          pads=(0, 0, 0, 0), ceil_mode=True,
                                          count_include_pad=_include)),
        ("2d_asymmetric_" + _tag, dict(x=(2, 2, 7, 6), kernel=(3, 2), strides=(2, 1),
                                       pads=(0, 1, 1, 0), count_include_pad=_include)),
        ("1d_" + _tag, dict(x=(2, 3, 13), kernel=(4,), strides=(3,), pads=(2, 2),
                            count_include_pad=_include)),
        ("3d_" + _tag, dict(x=(1, 2, 5, 6, 7), kernel=(2, 3, 3), strides=(1, 2, 2),
                            pads=(1, 1, 1, 1, 1, 1), ceil_mode=True,
                            count_include_pad=_include)),
    ]
AVG_CASES += [
    ("2d_global", dict(x=(3, 4, 7, 7), kernel=(7, 7), strides=(1, 1), pads=(0, 0, 0, 0),
                       count_include_pad=0)),
    ("large", dict(x=(8, 16, 32, 32), kernel=(2, 2), strides=(2, 2), pads=(0, 0, 0, 0),
                   count_include_pad=0)),
]



def random_cases(count, seed, average):
    """`count` seeded random geometries within torch's rules (x at least as
    large as the dilated kernel, each pad at most half the kernel; ceil mode
    with symmetric pads): 1-3 spatial dims, sizes 1-8, kernels 1-3, strides
    1-3, dilations 1-2 (max pooling)."""
    g = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        s = int(g.integers(1, 4))
        x, kernel, strides, dilations = [int(g.integers(1, 3)), int(g.integers(1, 4))], [], [], []
        ceil_mode = bool(g.integers(0, 2))
        begin, end, valid = [], [], True
        for _ in range(s):
            k = int(g.integers(1, 4))
            dilation = 1 if average else int(g.integers(1, 3))
            size = int(g.integers(1, 9))
            pad = int(g.integers(0, k // 2 + 1))
            begin.append(pad)
            end.append(pad if ceil_mode else int(g.integers(0, k // 2 + 1)))
            valid &= size >= dilation * (k - 1) + 1
            x.append(size)
            kernel.append(k)
            strides.append(int(g.integers(1, 4)))
            dilations.append(dilation)
        if not valid:
            continue
        case = dict(x=tuple(x), kernel=tuple(kernel), strides=tuple(strides),
                    pads=tuple(begin + end), ceil_mode=ceil_mode, seed=len(cases))
        if average:
            case["count_include_pad"] = int(g.integers(0, 2))
        else:
            case["dilations"] = tuple(dilations)
        cases.append(("random_%d" % len(cases), case))
    return cases


MAX_CASES += random_cases(16, seed=5, average=False)
AVG_CASES += random_cases(16, seed=6, average=True)


class PoolTest(KernelTest):
    def max_case(self, x, kernel, strides, pads, dilations=None, ceil_mode=False, ties=False,
                 seed=0):
        s = len(kernel)
        dilations = dilations or (1,) * s
        xa = pool_input(x, ties, seed)
        x64 = torch.from_numpy(xa).double().requires_grad_()
        y64, idx = torch_max_pool(x64, kernel, strides, pads, dilations, ceil_mode)
        attrs = (ints(kernel), ints(strides), ints(pads), ints(dilations))
        return xa, x64, y64, idx, attrs

    def run_max_pool(self, **case):
        xa, _, y64, idx, attrs = self.max_case(**case)
        y = self.rank.empty(tuple(y64.shape))
        indices = self.rank.empty(tuple(y64.shape), I64)
        self.rank.call("pipe_k_max_pool", self.rank.tensor(xa), y, indices, *attrs)
        self.check_exact("max_pool", self.rank.array(y), y64.detach().numpy().astype(np.float32))
        self.check_exact("max_pool", self.rank.array(indices), idx, what="indices")
        # Without indices, the same values.
        y2 = self.rank.empty(tuple(y64.shape))
        self.rank.call("pipe_k_max_pool", self.rank.tensor(xa), y2, None, *attrs)
        self.check_exact("max_pool", self.rank.array(y2), self.rank.array(y))

    def run_max_pool_grad(self, **case):
        xa, x64, y64, _, attrs = self.max_case(**case)
        y = self.rank.empty(tuple(y64.shape))
        indices = self.rank.empty(tuple(y64.shape), I64)
        self.rank.call("pipe_k_max_pool", self.rank.tensor(xa), y, indices, *attrs)
        dy = np.random.default_rng(1).normal(0, 1, tuple(y64.shape)).astype(np.float32)
        y64.backward(torch.from_numpy(dy).double())
        dx = self.rank.empty(xa.shape)
        self.rank.call("pipe_k_max_pool_grad", self.rank.tensor(dy), indices, dx)
        self.check("max_pool_grad", self.rank.array(dx), x64.grad.numpy())

    def avg_case(self, x, kernel, strides, pads, count_include_pad, ceil_mode=False, seed=0):
        xa = pool_input(x, False, seed)
        x64 = torch.from_numpy(xa).double().requires_grad_()
        y64 = torch_avg_pool(x64, kernel, strides, pads, ceil_mode, count_include_pad)
        attrs = (ints(kernel), ints(strides), ints(pads), count_include_pad)
        return xa, x64, y64, attrs

    def run_average_pool(self, **case):
        xa, _, y64, attrs = self.avg_case(**case)
        y = self.rank.empty(tuple(y64.shape))
        self.rank.call("pipe_k_average_pool", self.rank.tensor(xa), y, *attrs)
        self.check("average_pool", self.rank.array(y), y64.detach().numpy(), elementwise=True)

    def run_average_pool_grad(self, **case):
        xa, x64, y64, attrs = self.avg_case(**case)
        dy = np.random.default_rng(1).normal(0, 1, tuple(y64.shape)).astype(np.float32)
        y64.backward(torch.from_numpy(dy).double())
        dx = self.rank.empty(xa.shape)
        self.rank.call("pipe_k_average_pool_grad", self.rank.tensor(dy), dx, *attrs)
        self.check("average_pool_grad", self.rank.array(dx), x64.grad.numpy())

    def test_max_pool_grad__foreign_indices(self):
        # Indices outside their (n, c) plane are honoured (serial accumulation).
        dy = np.array([[[1.0, 2.0]], [[3.0, 4.0]]], np.float32)        # [2, 1, 2]
        idx = np.array([[[3, 3]], [[0, 1]]], np.int64)
        dx = self.rank.empty((2, 1, 2))
        self.rank.call("pipe_k_max_pool_grad", self.rank.tensor(dy), self.rank.tensor(idx), dx)
        self.check_exact("max_pool_grad", self.rank.array(dx),
                         np.array([[[3.0, 4.0]], [[0.0, 3.0]]], np.float32))


add_cases(PoolTest, "max_pool", MAX_CASES, PoolTest.run_max_pool)
add_cases(PoolTest, "max_pool_grad", MAX_CASES, PoolTest.run_max_pool_grad)
add_cases(PoolTest, "average_pool", AVG_CASES, PoolTest.run_average_pool)
add_cases(PoolTest, "average_pool_grad", AVG_CASES, PoolTest.run_average_pool_grad)


if __name__ == "__main__":
    unittest.main()
