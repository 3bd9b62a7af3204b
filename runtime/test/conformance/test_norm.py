"""Conformance of batch norm (train, infer, grad) and layer norm (forward,
grad) against torch in float64, gradients through autograd. ONNX momentum m
is torch's 1 - m. Layer norm's reference is the two-pass composite, checked
against F.layer_norm."""

from __future__ import annotations

import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import KernelTest, add_cases, relative_error

torch.set_num_threads(1)

BATCH_SHAPES = [
    ("2d", (4, 3)),
    ("1d_spatial", (2, 3, 5)),
    ("2d_spatial", (2, 3, 4, 5)),
    ("3d_spatial", (3, 2, 2, 3, 2)),
    ("batch_one", (1, 5, 7)),
    ("offset_mean", (2, 4, 6, 6)),
    ("large", (8, 32, 16, 16)),
]


def normal(shape, seed, scale=1.0, shift=0.0):
    return (np.random.default_rng(seed).normal(0, scale, shape) + shift).astype(np.float32)


class BatchNormTest(KernelTest):
    def inputs(self, shape, seed=0):
        c = shape[1]
        shift = 30.0 if seed == 7 else 0.0
        x = normal(shape, seed, 2.0, shift)
        scale = normal((c,), seed + 1, 1.0, 1.0)
        bias = normal((c,), seed + 2)
        mean = normal((c,), seed + 3)
        var = np.abs(normal((c,), seed + 4)) + 0.5
        return x, scale, bias, mean, var

    def run_batch_norm_train(self, shape, momentum=0.9, epsilon=1e-5):
        x, scale, bias, mean, var = self.inputs(shape, 7 if shape == (2, 4, 6, 6) else 0)
        rm64, rv64 = torch.from_numpy(mean).double(), torch.from_numpy(var).double()
        x64 = torch.from_numpy(x).double()
        ref = F.batch_norm(x64, rm64, rv64, torch.from_numpy(scale).double(),
                           torch.from_numpy(bias).double(), training=True,
                           momentum=1.0 - momentum, eps=epsilon)
        dims = [0] + list(range(2, len(shape)))
        ref_mean = x64.mean(dim=dims)
        ref_invstd = 1.0 / torch.sqrt(x64.var(dim=dims, unbiased=False) + epsilon)
        c = shape[1]
        y, saved_mean, saved_invstd = self.rank.empty(shape), self.rank.empty((c,)), self.rank.empty((c,))
        running_mean, running_var = self.rank.tensor(mean), self.rank.tensor(var)
        self.rank.call("pipe_k_batch_norm_train", self.rank.tensor(x), self.rank.tensor(scale),
                       self.rank.tensor(bias), running_mean, running_var, y, saved_mean,
                       saved_invstd, epsilon, momentum)
        self.check("batch_norm_train", self.rank.array(y), ref.numpy())
        self.check("batch_norm_train", self.rank.array(saved_mean), ref_mean.numpy(), what="saved_mean")
        self.check("batch_norm_train", self.rank.array(saved_invstd), ref_invstd.numpy(),
                   what="saved_invstd")
        self.check("batch_norm_train", self.rank.array(running_mean), rm64.numpy(), what="running_mean")
        self.check("batch_norm_train", self.rank.array(running_var), rv64.numpy(), what="running_var")

    def run_batch_norm_infer(self, shape, epsilon=1e-5):
        x, scale, bias, mean, var = self.inputs(shape)
        ref = F.batch_norm(torch.from_numpy(x).double(), torch.from_numpy(mean).double(),
                           torch.from_numpy(var).double(), torch.from_numpy(scale).double(),
                           torch.from_numpy(bias).double(), training=False, eps=epsilon)
        y = self.rank.empty(shape)
        self.rank.call("pipe_k_batch_norm_infer", self.rank.tensor(x), self.rank.tensor(scale),
                       self.rank.tensor(bias), self.rank.tensor(mean), self.rank.tensor(var), y,
                       epsilon)
        self.check("batch_norm_infer", self.rank.array(y), ref.numpy())

    def run_batch_norm_grad(self, shape, outputs=("dx", "dscale", "dbias"), epsilon=1e-5):
        x, scale, bias, _, _ = self.inputs(shape, 7 if shape == (2, 4, 6, 6) else 0)
        c = shape[1]
        x64 = torch.from_numpy(x).double().requires_grad_()
        s64 = torch.from_numpy(scale).double().requires_grad_()
        b64 = torch.from_numpy(bias).double().requires_grad_()
        y64 = F.batch_norm(x64, None, None, s64, b64, training=True, eps=epsilon)
        dy = normal(shape, 11)
        y64.backward(torch.from_numpy(dy).double())
        # The forward's saved statistics (F32, as a program keeps them).
        saved_mean, saved_invstd, y = self.rank.empty((c,)), self.rank.empty((c,)), self.rank.empty(shape)
        xt, st = self.rank.tensor(x), self.rank.tensor(scale)
        self.rank.call("pipe_k_batch_norm_train", xt, st, self.rank.tensor(bias), None, None, y,
                       saved_mean, saved_invstd, epsilon, 0.9)
        dx = self.rank.empty(shape) if "dx" in outputs else None
        dscale = self.rank.empty((c,)) if "dscale" in outputs else None
        dbias = self.rank.empty((c,)) if "dbias" in outputs else None
        self.rank.call("pipe_k_batch_norm_grad", xt, st, saved_mean, saved_invstd,
                       self.rank.tensor(dy), dx, dscale, dbias)
        for name, out, ref in (("dx", dx, x64.grad), ("dscale", dscale, s64.grad),
                               ("dbias", dbias, b64.grad)):
            if out is not None:
                self.check("batch_norm_grad", self.rank.array(out), ref.numpy(), what=name)


add_cases(BatchNormTest, "batch_norm_train", [(n, dict(shape=s)) for n, s in BATCH_SHAPES]
          + [("momentum_zero", dict(shape=(2, 3, 5), momentum=0.0)),
             ("eps_large", dict(shape=(2, 3, 5), epsilon=0.1))],
          BatchNormTest.run_batch_norm_train)
add_cases(BatchNormTest, "batch_norm_infer", [(n, dict(shape=s)) for n, s in BATCH_SHAPES],
          BatchNormTest.run_batch_norm_infer)
add_cases(BatchNormTest, "batch_norm_grad", [(n, dict(shape=s)) for n, s in BATCH_SHAPES]
          + [("dx_only", dict(shape=(2, 3, 4, 5), outputs=("dx",))),
             ("params_only", dict(shape=(2, 3, 4, 5), outputs=("dscale", "dbias")))],
          BatchNormTest.run_batch_norm_grad)


LAYER_CASES = [
    ("last_axis", dict(shape=(2, 3, 8), axis=2)),
    ("two_axes", dict(shape=(2, 3, 8), axis=1)),
    ("all_axes", dict(shape=(2, 3, 8), axis=0)),
    ("2d", dict(shape=(5, 7), axis=1)),
    ("vector", dict(shape=(13,), axis=0)),
    ("width_one", dict(shape=(4, 1), axis=1)),
    ("no_bias", dict(shape=(3, 16), axis=1, bias=False)),
    ("scale_leading_ones", dict(shape=(2, 3, 8), axis=2, scale_shape=(1, 8))),
    ("offset_mean", dict(shape=(6, 32), axis=1, shift=50.0)),
    ("transformer", dict(shape=(4, 64, 96), axis=2)),
]


class LayerNormTest(KernelTest):
    def setup_case(self, shape, axis, bias=True, scale_shape=None, shift=0.0, epsilon=1e-5):
        normalised = tuple(shape[axis:])
        x = normal(shape, 0, 2.0, shift)
        scale = normal(normalised, 1, 1.0, 1.0)
        b = normal(normalised, 2) if bias else None
        x64 = torch.from_numpy(x).double().requires_grad_()
        s64 = torch.from_numpy(scale).double().requires_grad_()
        b64 = torch.from_numpy(b).double().requires_grad_() if bias else None
        dims = tuple(range(axis, len(shape)))
        # The textbook composite (two-pass variance) is exact in float64 where
        # F.layer_norm leaves rounding noise (a constant row gets xhat ~ 1e-14).
        centred = x64 - x64.mean(dim=dims, keepdim=True)
        y64 = centred / torch.sqrt((centred * centred).mean(dim=dims, keepdim=True) + epsilon) * s64
        if bias:
            y64 = y64 + b64
        self.assertLess(relative_error(y64.detach().numpy(),
                                       F.layer_norm(x64, normalised, s64, b64, epsilon).detach().numpy()),
                        1e-12)
        stats_shape = tuple(shape[:axis]) + (1,) * len(normalised)
        mean = x64.detach().mean(dim=dims).reshape(stats_shape)
        invstd = 1.0 / torch.sqrt(x64.detach().var(dim=dims, unbiased=False) + epsilon)
        scale_shape = scale_shape or normalised
        return dict(x=x, scale=scale.reshape(scale_shape), bias=b, x64=x64, s64=s64, b64=b64,
                    y64=y64, mean=mean.numpy(), invstd=invstd.reshape(stats_shape).numpy(),
                    stats_shape=stats_shape, epsilon=epsilon)

    def forward(self, c, axis, with_stats=True):
        shape = c["x"].shape
        y = self.rank.empty(shape)
        mean = self.rank.empty(c["stats_shape"]) if with_stats else None
        invstd = self.rank.empty(c["stats_shape"]) if with_stats else None
        xt, st = self.rank.tensor(c["x"]), self.rank.tensor(c["scale"])
        bt = self.rank.tensor(c["bias"]) if c["bias"] is not None else None
        self.rank.call("pipe_k_layer_norm", xt, st, bt, y, mean, invstd, axis, c["epsilon"])
        return xt, st, y, mean, invstd

    def run_layer_norm(self, axis, **case):
        c = self.setup_case(axis=axis, **case)
        _, _, y, mean, invstd = self.forward(c, axis)
        self.check("layer_norm", self.rank.array(y), c["y64"].detach().numpy())
        self.check("layer_norm", self.rank.array(mean), c["mean"], what="mean")
        self.check("layer_norm", self.rank.array(invstd), c["invstd"], what="invstd")
        _, _, y2, _, _ = self.forward(c, axis, with_stats=False)
        self.check_exact("layer_norm", self.rank.array(y2), self.rank.array(y))

    def run_layer_norm_grad(self, axis, **case):
        c = self.setup_case(axis=axis, **case)
        dy = normal(c["x"].shape, 9)
        c["y64"].backward(torch.from_numpy(dy).double())
        xt, st, _, mean, invstd = self.forward(c, axis)
        dx = self.rank.empty(c["x"].shape)
        dscale = self.rank.empty(c["scale"].shape)
        dbias = self.rank.empty(c["scale"].shape)
        self.rank.call("pipe_k_layer_norm_grad", xt, st, mean, invstd, self.rank.tensor(dy), dx,
                       dscale, dbias, axis)
        self.check("layer_norm_grad", self.rank.array(dx), c["x64"].grad.numpy(), what="dx")
        self.check("layer_norm_grad", self.rank.array(dscale),
                   c["s64"].grad.numpy().reshape(c["scale"].shape), what="dscale")
        ref_dbias = torch.from_numpy(dy).double().sum(dim=tuple(range(axis))) if axis else \
            torch.from_numpy(dy).double()
        self.check("layer_norm_grad", self.rank.array(dbias),
                   ref_dbias.numpy().reshape(c["scale"].shape), what="dbias")
        if c["b64"] is not None:
            self.check("layer_norm_grad", self.rank.array(dbias),
                       c["b64"].grad.numpy().reshape(c["scale"].shape), what="dbias (autograd)")


add_cases(LayerNormTest, "layer_norm", LAYER_CASES, LayerNormTest.run_layer_norm)
add_cases(LayerNormTest, "layer_norm_grad", LAYER_CASES, LayerNormTest.run_layer_norm_grad)


if __name__ == "__main__":
    unittest.main()
