"""Conformance of pipe_k_softmax_cross_entropy(_grad) against
torch.nn.functional.cross_entropy (mean over counted entries, ignore_index)
in float64, times the kernel's scale; gradients through autograd."""

from __future__ import annotations

import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import F32, I32, I64, NUMPY_OF, KernelTest, add_cases

torch.set_num_threads(1)

CASES = [
    ("2d", dict(shape=(4, 5))),
    ("one_class", dict(shape=(3, 1))),
    ("spatial", dict(shape=(3, 6, 7))),
    ("spatial_2d", dict(shape=(2, 4, 3, 2))),
    ("ignore_default", dict(shape=(6, 5), ignore_index=-100, ignored=3)),
    ("ignore_a_class", dict(shape=(8, 4), ignore_index=2, ignored=0)),
    ("ignore_spatial", dict(shape=(2, 5, 9), ignore_index=-1, ignored=7)),
    ("all_ignored", dict(shape=(3, 4), ignore_index=-100, ignored=3)),
    ("scale", dict(shape=(4, 5), scale=0.25)),
    ("large_logits", dict(shape=(5, 7), logit_scale=50.0)),
    ("i32_labels", dict(shape=(4, 6), label_dtype=I32, ignore_index=-100, ignored=1)),
    ("language_model", dict(shape=(64, 257))),
    ("segmentation", dict(shape=(2, 5, 32, 32), ignore_index=255, ignored=100)),
]


class LossTest(KernelTest):
    def setup_case(self, shape, ignore_index=-100, ignored=0, scale=1.0, logit_scale=3.0,
                   label_dtype=I64):
        g = np.random.default_rng(sum(shape))
        logits = (g.normal(0, 1, shape) * logit_scale).astype(np.float32)
        label_shape = (shape[0],) + tuple(shape[2:])
        labels = g.integers(0, shape[1], label_shape)
        if ignored:
            flat = labels.reshape(-1)
            flat[g.choice(flat.size, min(ignored, flat.size), replace=False)] = ignore_index
        labels = labels.astype(NUMPY_OF[label_dtype])
        x64 = torch.from_numpy(logits).double().requires_grad_()
        loss64 = F.cross_entropy(x64, torch.from_numpy(labels.astype(np.int64)),
                                 ignore_index=ignore_index) * scale
        return logits, labels, x64, loss64, ignore_index, scale

    def forward(self, logits, labels, ignore_index, scale):
        loss, log_prob = self.rank.empty(()), self.rank.empty(logits.shape)
        self.rank.call("pipe_k_softmax_cross_entropy", self.rank.tensor(logits),
                       self.rank.tensor(labels), loss, log_prob, ignore_index, scale)
        return loss, log_prob

    def run_forward(self, **case):
        logits, labels, x64, loss64, ignore_index, scale = self.setup_case(**case)
        loss, log_prob = self.forward(logits, labels, ignore_index, scale)
        self.check("softmax_cross_entropy", self.rank.array(loss), loss64.detach().numpy())
        self.check("softmax_cross_entropy", self.rank.array(log_prob),
                   torch.log_softmax(x64.detach(), dim=1).numpy(), what="log_prob",
                   elementwise=True)
        # log_prob is optional.
        alone = self.rank.empty(())
        self.rank.call("pipe_k_softmax_cross_entropy", self.rank.tensor(logits),
                       self.rank.tensor(labels), alone, None, ignore_index, scale)
        self.check_exact("softmax_cross_entropy", self.rank.array(alone), self.rank.array(loss))

    def run_grad(self, **case):
        logits, labels, x64, loss64, ignore_index, scale = self.setup_case(**case)
        dloss = np.float32(1.75)
        if not torch.isnan(loss64):
            loss64.backward(torch.tensor(float(dloss), dtype=torch.float64))
            ref = x64.grad.numpy()
        else:
            ref = np.zeros(logits.shape)  # nothing counted: no gradient
        _, log_prob = self.forward(logits, labels, ignore_index, scale)
        dlogits = self.rank.empty(logits.shape)
        self.rank.call("pipe_k_softmax_cross_entropy_grad", self.rank.tensor(np.array(dloss)),
                       log_prob, self.rank.tensor(labels), dlogits, ignore_index, scale)
        self.check("softmax_cross_entropy_grad", self.rank.array(dlogits), ref)


add_cases(LossTest, "softmax_cross_entropy", CASES, LossTest.run_forward)
add_cases(LossTest, "softmax_cross_entropy_grad", CASES, LossTest.run_grad)


if __name__ == "__main__":
    unittest.main()
