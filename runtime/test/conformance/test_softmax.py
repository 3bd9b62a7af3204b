"""Conformance of pipe_k_softmax, pipe_k_log_softmax and their gradients
against torch in float64 (gradients through autograd, fed our forward output)."""

from __future__ import annotations

import unittest

import numpy as np
import torch

from piperun import KernelTest, add_cases

torch.set_num_threads(1)

CASES = [
    ("rows", dict(shape=(3, 7), axis=1)),
    ("columns", dict(shape=(3, 7), axis=0)),
    ("middle_axis", dict(shape=(2, 3, 5), axis=1)),
    ("first_of_three", dict(shape=(4, 2, 3), axis=0)),
    ("vector", dict(shape=(13,), axis=0)),
    ("length_one", dict(shape=(4, 1, 6), axis=1)),
    ("large_logits", dict(shape=(5, 11), axis=1, scale=100.0)),
    ("attention", dict(shape=(2, 4, 16, 16), axis=3)),
    ("large", dict(shape=(64, 512), axis=1)),
]


class SoftmaxTest(KernelTest):
    def setup_case(self, log, shape, axis, scale=3.0):
        g = np.random.default_rng(len(shape) * 10 + axis)
        x = (g.normal(0, 1, shape) * scale).astype(np.float32)
        x64 = torch.from_numpy(x).double().requires_grad_()
        y64 = (torch.log_softmax if log else torch.softmax)(x64, dim=axis)
        return x, x64, y64

    def forward(self, log, x, axis):
        y = self.rank.empty(x.shape)
        self.rank.call("pipe_k_log_softmax" if log else "pipe_k_softmax", self.rank.tensor(x), y, axis)
        return y

    def run_forward(self, log, shape, axis, **extra):
        x, _, y64 = self.setup_case(log, shape, axis, **extra)
        y = self.forward(log, x, axis)
        self.check("log_softmax" if log else "softmax", self.rank.array(y),
                   y64.detach().numpy(), elementwise=True)

    def run_grad(self, log, shape, axis, **extra):
        x, x64, y64 = self.setup_case(log, shape, axis, **extra)
        dy = np.random.default_rng(5).normal(0, 1, shape).astype(np.float32)
        y64.backward(torch.from_numpy(dy).double())
        y = self.forward(log, x, axis)
        dx = self.rank.empty(shape)
        name = "log_softmax_grad" if log else "softmax_grad"
        self.rank.call("pipe_k_" + name, y, self.rank.tensor(dy), dx, axis)
        self.check(name, self.rank.array(dx), x64.grad.numpy())


for _log, _name in ((False, "softmax"), (True, "log_softmax")):
    add_cases(SoftmaxTest, _name, [(n, dict(c, log=_log)) for n, c in CASES],
              SoftmaxTest.run_forward)
    add_cases(SoftmaxTest, _name + "_grad", [(n, dict(c, log=_log)) for n, c in CASES],
              SoftmaxTest.run_grad)


if __name__ == "__main__":
    unittest.main()
