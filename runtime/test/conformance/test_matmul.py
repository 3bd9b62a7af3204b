"""Conformance of pipe_k_matmul (numpy matmul semantics) and pipe_k_gemm
(ONNX Gemm) against torch.matmul in float64."""

from __future__ import annotations

import unittest

import numpy as np
import torch

from piperun import F32, KernelTest, add_cases

torch.set_num_threads(1)


def normal(shape, seed):
    return np.random.default_rng(seed).normal(0, 1, shape).astype(np.float32)


class MatmulTest(KernelTest):
    def run_matmul(self, shape_a, shape_b, seed=0):
        a, b = normal(shape_a, seed), normal(shape_b, seed + 1)
        ref = torch.matmul(torch.from_numpy(a).double(), torch.from_numpy(b).double()).numpy()
        y = self.rank.empty(ref.shape)
        self.rank.call("pipe_k_matmul", self.rank.tensor(a), self.rank.tensor(b), y)
        self.check("matmul", self.rank.array(y), ref)

    def run_gemm(self, m, n, k, trans_a, trans_b, c_shape, alpha, beta, seed=0):
        a = normal((k, m) if trans_a else (m, k), seed)
        b = normal((n, k) if trans_b else (k, n), seed + 1)
        ta, tb = torch.from_numpy(a).double(), torch.from_numpy(b).double()
        ref = alpha * ((ta.T if trans_a else ta) @ (tb.T if trans_b else tb))
        c_tensor = None
        if c_shape is not None:
            c = normal(c_shape, seed + 2)
            if beta == 0.0:
                c[...] = np.nan  # beta 0 ignores C entirely
            else:
                ref = ref + beta * torch.from_numpy(c).double()
            c_tensor = self.rank.tensor(c)
        y = self.rank.empty((m, n))
        self.rank.call("pipe_k_gemm", self.rank.tensor(a), self.rank.tensor(b), c_tensor, y,
                       alpha, beta, int(trans_a), int(trans_b))
        self.check("gemm", self.rank.array(y), ref.numpy())


add_cases(MatmulTest, "matmul", [
    ("2d", dict(shape_a=(3, 5), shape_b=(5, 7))),
    ("1x1", dict(shape_a=(1, 1), shape_b=(1, 1))),
    ("column", dict(shape_a=(13, 7), shape_b=(7, 1))),
    ("vector_left", dict(shape_a=(7,), shape_b=(7, 3))),
    ("vector_right", dict(shape_a=(3, 7), shape_b=(7,))),
    ("dot", dict(shape_a=(7,), shape_b=(7,))),
    ("batch_shared_right", dict(shape_a=(2, 3, 4, 5), shape_b=(5, 6))),
    ("vector_batched_right", dict(shape_a=(5,), shape_b=(2, 5, 3))),
    ("batched_vector_right", dict(shape_a=(2, 3, 5), shape_b=(5,))),
    ("batch_broadcast", dict(shape_a=(2, 1, 3, 4), shape_b=(5, 4, 2))),
    ("left_broadcast", dict(shape_a=(4, 5), shape_b=(3, 5, 2))),
    ("batch_one", dict(shape_a=(1, 3, 4), shape_b=(2, 4, 5))),
    ("batched_both", dict(shape_a=(3, 13, 7), shape_b=(3, 7, 1))),
    ("k_zero", dict(shape_a=(2, 3, 0), shape_b=(0, 4))),
    ("empty_batch", dict(shape_a=(0, 3, 4), shape_b=(4, 5))),
    ("large", dict(shape_a=(64, 128), shape_b=(128, 96))),
    ("attention", dict(shape_a=(2, 4, 16, 8), shape_b=(2, 4, 8, 16))),
], MatmulTest.run_matmul)

GEMM_CASES = []
for _ta in (0, 1):
    for _tb in (0, 1):
        GEMM_CASES.append(("t%d%d_no_c" % (_ta, _tb),
                           dict(m=5, n=7, k=3, trans_a=_ta, trans_b=_tb, c_shape=None,
                                alpha=1.0, beta=1.0)))
        GEMM_CASES.append(("t%d%d_full_c" % (_ta, _tb),
                           dict(m=13, n=4, k=9, trans_a=_ta, trans_b=_tb, c_shape=(13, 4),
                                alpha=0.5, beta=2.0)))
for _name, _shape in (("row", (7,)), ("row2d", (1, 7)), ("column", (5, 1)), ("scalar", ()),
                      ("one", (1,))):
    GEMM_CASES.append(("c_" + _name, dict(m=5, n=7, k=3, trans_a=0, trans_b=1, c_shape=_shape,
                                           alpha=1.0, beta=1.0)))
GEMM_CASES.append(("beta_zero_ignores_c", dict(m=4, n=6, k=3, trans_a=0, trans_b=0,
                                               c_shape=(4, 6), alpha=1.5, beta=0.0)))
GEMM_CASES.append(("k_zero", dict(m=3, n=2, k=0, trans_a=0, trans_b=0, c_shape=(2,),
                                  alpha=1.0, beta=3.0)))
GEMM_CASES.append(("large_linear", dict(m=64, n=96, k=128, trans_a=0, trans_b=1,
                                        c_shape=(96,), alpha=1.0, beta=1.0)))
add_cases(MatmulTest, "gemm", GEMM_CASES, MatmulTest.run_gemm)


if __name__ == "__main__":
    unittest.main()
