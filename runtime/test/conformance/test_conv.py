"""Conformance of pipe_k_conv, pipe_k_conv_grad_input and
pipe_k_conv_grad_weight against torch.nn.functional.conv{1,2,3}d in float64
(asymmetric pads through F.pad), gradients through torch.autograd."""

from __future__ import annotations

import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import KernelTest, add_cases, ints

torch.set_num_threads(1)

CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


def torch_conv(x, w, b, strides, pads, dilations, group):
    s = x.dim() - 2
    torch_pads = []
    for i in reversed(range(s)):
        torch_pads += [pads[i], pads[s + i]]
    return CONV[s](F.pad(x, torch_pads), w, b, stride=tuple(strides), dilation=tuple(dilations),
                   groups=group)


CASES = [
    ("2d_pad1", dict(x=(2, 3, 7, 7), w=(4, 3, 3, 3), strides=(1, 1), pads=(1, 1, 1, 1),
                     dilations=(1, 1), group=1, bias=True)),
    ("2d_stride2_asymmetric", dict(x=(2, 3, 9, 8), w=(5, 3, 3, 2), strides=(2, 2),
                                   pads=(0, 1, 2, 1), dilations=(1, 1), group=1, bias=False)),
    ("2d_dilation", dict(x=(1, 2, 11, 10), w=(3, 2, 3, 3), strides=(1, 2), pads=(2, 2, 2, 2),
                         dilations=(2, 3), group=1, bias=True)),
    ("2d_groups", dict(x=(2, 4, 9, 8), w=(6, 2, 3, 3), strides=(1, 1), pads=(1, 0, 1, 0),
                       dilations=(1, 1), group=2, bias=True)),
    ("2d_depthwise", dict(x=(2, 5, 7, 7), w=(5, 1, 3, 3), strides=(1, 1), pads=(1, 1, 1, 1),
                          dilations=(1, 1), group=5, bias=True)),
    ("2d_depthwise_multiplier", dict(x=(1, 3, 8, 6), w=(6, 1, 3, 3), strides=(2, 1),
                                     pads=(1, 1, 1, 1), dilations=(1, 1), group=3, bias=False)),
    ("2d_pointwise", dict(x=(2, 3, 5, 7), w=(8, 3, 1, 1), strides=(1, 1), pads=(0, 0, 0, 0),
                          dilations=(1, 1), group=1, bias=True)),
    ("2d_pointwise_stride2", dict(x=(2, 3, 5, 7), w=(4, 3, 1, 1), strides=(2, 2),
                                  pads=(0, 0, 0, 0), dilations=(1, 1), group=1, bias=False)),
    ("2d_pointwise_groups", dict(x=(1, 4, 3, 3), w=(6, 2, 1, 1), strides=(1, 1),
                                 pads=(0, 0, 0, 0), dilations=(1, 1), group=2, bias=True)),
    # A 1x1 kernel padded at the end only: y is larger than x, so x is not its
    # own column matrix.
    ("2d_pointwise_end_pads", dict(x=(2, 3, 4, 5), w=(4, 3, 1, 1), strides=(1, 1),
                                   pads=(0, 0, 2, 1), dilations=(1, 1), group=1, bias=True)),
    ("2d_kernel_larger_than_input", dict(x=(1, 2, 3, 3), w=(2, 2, 5, 5), strides=(1, 1),
                                         pads=(2, 2, 2, 2), dilations=(1, 1), group=1,
                                         bias=True)),
    ("2d_1x1_input", dict(x=(1, 1, 1, 1), w=(1, 1, 1, 1), strides=(1, 1), pads=(0, 0, 0, 0),
                          dilations=(1, 1), group=1, bias=False)),
    ("1d", dict(x=(2, 3, 13), w=(4, 3, 5), strides=(2,), pads=(2, 1), dilations=(1,), group=1,
                bias=True)),
    ("1d_dilation_groups", dict(x=(3, 6, 13), w=(3, 2, 3), strides=(1,), pads=(3, 0),
                                dilations=(3,), group=3, bias=True)),
    ("3d", dict(x=(1, 2, 5, 6, 7), w=(3, 2, 3, 2, 3), strides=(1, 2, 1),
                pads=(1, 0, 1, 0, 1, 1), dilations=(1, 1, 2), group=1, bias=True)),
    ("3d_depthwise", dict(x=(2, 4, 4, 5, 3), w=(4, 1, 2, 3, 1), strides=(2, 1, 1),
                          pads=(0, 1, 0, 1, 1, 0), dilations=(1, 1, 1), group=4, bias=False)),
    ("resnet_stem", dict(x=(2, 3, 32, 32), w=(16, 3, 7, 7), strides=(2, 2), pads=(3, 3, 3, 3),
                         dilations=(1, 1), group=1, bias=False)),
    ("wide", dict(x=(2, 32, 16, 16), w=(64, 32, 3, 3), strides=(1, 1), pads=(1, 1, 1, 1),
                  dilations=(1, 1), group=1, bias=True)),
]



def random_cases(count, seed):
    """`count` seeded random geometries: 1-3 spatial dims, sizes 1-7, kernels
    1-3, strides 1-3, dilations 1-2, uneven pads 0-2 (a window may lie wholly
    in the padding), 1-3 groups, with or without bias."""
    g = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        s = int(g.integers(1, 4))
        group = int(g.integers(1, 4))
        channels, out_channels = group * int(g.integers(1, 4)), group * int(g.integers(1, 4))
        x, w = [int(g.integers(1, 3)), channels], [out_channels, channels // group]
        strides, dilations, pads = [], [], [int(p) for p in g.integers(0, 3, 2 * s)]
        valid = True
        for d in range(s):
            size, k = int(g.integers(1, 8)), int(g.integers(1, 4))
            dilation = int(g.integers(1, 3))
            valid &= size + pads[d] + pads[s + d] >= dilation * (k - 1) + 1
            x.append(size)
            w.append(k)
            strides.append(int(g.integers(1, 4)))
            dilations.append(dilation)
        if valid:
            cases.append(("random_%d" % len(cases),
                          dict(x=tuple(x), w=tuple(w), strides=tuple(strides), pads=tuple(pads),
                               dilations=tuple(dilations), group=group,
                               bias=bool(g.integers(0, 2)), seed=len(cases))))
    return cases


CASES += random_cases(24, seed=7)


class ConvTest(KernelTest):
    def setup_case(self, x, w, strides, pads, dilations, group, bias, seed=0):
        g = np.random.default_rng(seed)
        xa = g.normal(0, 1, x).astype(np.float32)
        wa = g.normal(0, 0.5, w).astype(np.float32)
        ba = g.normal(0, 1, (w[0],)).astype(np.float32) if bias else None
        x64 = torch.from_numpy(xa).double().requires_grad_()
        w64 = torch.from_numpy(wa).double().requires_grad_()
        b64 = torch.from_numpy(ba).double() if bias else None
        y64 = torch_conv(x64, w64, b64, strides, pads, dilations, group)
        dy = g.normal(0, 1, tuple(y64.shape)).astype(np.float32)
        y64.backward(torch.from_numpy(dy).double())
        attrs = (ints(strides), ints(pads), ints(dilations), group)
        return xa, wa, ba, dy, y64.detach().numpy(), x64.grad.numpy(), w64.grad.numpy(), attrs

    def run_conv(self, **case):
        xa, wa, ba, _, ref, _, _, attrs = self.setup_case(**case)
        y = self.rank.empty(ref.shape)
        self.rank.call("pipe_k_conv", self.rank.tensor(xa), self.rank.tensor(wa),
                       self.rank.tensor(ba) if ba is not None else None, y, *attrs)
        self.check("conv", self.rank.array(y), ref)

    def run_conv_grad_input(self, **case):
        xa, wa, _, dy, _, ref, _, attrs = self.setup_case(**case)
        dx = self.rank.empty(xa.shape)
        self.rank.call("pipe_k_conv_grad_input", self.rank.tensor(dy), self.rank.tensor(wa), dx,
                       *attrs)
        self.check("conv_grad_input", self.rank.array(dx), ref)

    def run_conv_grad_weight(self, **case):
        xa, wa, _, dy, _, _, ref, attrs = self.setup_case(**case)
        dw = self.rank.empty(wa.shape)
        self.rank.call("pipe_k_conv_grad_weight", self.rank.tensor(xa), self.rank.tensor(dy), dw,
                       *attrs)
        self.check("conv_grad_weight", self.rank.array(dw), ref)


add_cases(ConvTest, "conv", CASES, ConvTest.run_conv)
add_cases(ConvTest, "conv_grad_input", CASES, ConvTest.run_conv_grad_input)
add_cases(ConvTest, "conv_grad_weight", CASES, ConvTest.run_conv_grad_weight)


if __name__ == "__main__":
    unittest.main()
