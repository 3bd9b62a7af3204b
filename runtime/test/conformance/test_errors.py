"""Every kernel refuses arguments that disagree, naming the argument and what
it expected, before touching memory. A failing kernel stops the process
(the runtime's failure is not an error code), so each case runs in a forked
child whose stderr is read back; `python3 test_errors.py CASE` makes the one
bad call in this process, to look at by hand."""

from __future__ import annotations

import os
import resource
import signal
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from piperun import (BINARY, BOOL, F32, I64, PAD, REDUCE, UNARY,  # noqa: E402
                     BackendUnavailable, Rank, ints, library)


def z(r, shape, dtype=F32):
    return r.empty(shape, dtype)


def a(r, values, dtype=np.float32):
    return r.tensor(np.asarray(values, dtype))


I2 = ints([1, 1])
P4 = ints([0, 0, 0, 0])

# name -> (message fragment, the bad call)
CASES = {
    "binary_no_broadcast": ("binary(add): shapes do not broadcast", lambda r: r.call(
        "pipe_k_binary", BINARY["add"], z(r, (2, 3)), z(r, (4,)), z(r, (2, 3)))),
    "binary_output_shape": ("output 'y' has shape [2, 4]", lambda r: r.call(
        "pipe_k_binary", BINARY["mul"], z(r, (2, 3)), z(r, (3,)), z(r, (2, 4)))),
    "binary_dtype": ("argument 'b' has dtype", lambda r: r.call(
        "pipe_k_binary", BINARY["add"], z(r, (3,)), z(r, (3,), I64), z(r, (3,)))),
    "binary_divide_by_zero": ("integer division by zero", lambda r: r.call(
        "pipe_k_binary", BINARY["div"], a(r, [1, 2], np.int64), a(r, [1, 0], np.int64),
        z(r, (2,), I64))),
    "unary_shape": ("unary(relu): argument 'y' has shape [3]", lambda r: r.call(
        "pipe_k_unary", UNARY["relu"], z(r, (2,)), z(r, (3,)), 0.0, 0.0)),
    "unary_missing": ("argument 'x' is missing", lambda r: r.call(
        "pipe_k_unary", UNARY["exp"], None, z(r, (3,)), 0.0, 0.0)),
    "unary_not_on_float": ("unary(not): argument 'x' has dtype", lambda r: r.call(
        "pipe_k_unary", UNARY["logical_not"], z(r, (2,)), z(r, (2,)), 0.0, 0.0)),
    "unary_grad_needs_saved": ("argument 'saved (y)' is missing", lambda r: r.call(
        "pipe_k_unary_grad", UNARY["tanh"], None, z(r, (2,)), z(r, (2,)), 0.0, 0.0)),
    "where_condition_dtype": ("argument 'cond' has dtype", lambda r: r.call(
        "pipe_k_where", z(r, (2,)), z(r, (2,)), z(r, (2,)), z(r, (2,)))),
    "cast_shape": ("cast: argument 'y' has shape [3]", lambda r: r.call(
        "pipe_k_cast", z(r, (2,)), z(r, (3,), I64))),
    "matmul_inner": ("matmul: inner dims differ", lambda r: r.call(
        "pipe_k_matmul", z(r, (2, 3)), z(r, (4, 5)), z(r, (2, 5)))),
    "matmul_output": ("matmul: argument 'y' has shape [2, 3, 5], expected [3, 2, 5]",
                      lambda r: r.call("pipe_k_matmul", z(r, (3, 2, 4)), z(r, (4, 5)),
                                       z(r, (2, 3, 5)))),
    "gemm_output": ("gemm: argument 'y' has shape [3, 3], expected [2, 3]", lambda r: r.call(
        "pipe_k_gemm", z(r, (4, 2)), z(r, (4, 3)), None, z(r, (3, 3)), 1.0, 1.0, 1, 0)),
    "gemm_c": ("gemm: 'c' [2] does not broadcast", lambda r: r.call(
        "pipe_k_gemm", z(r, (2, 4)), z(r, (4, 3)), z(r, (2,)), z(r, (2, 3)), 1.0, 1.0, 0, 0)),
    "conv_channels": ("conv: argument 'w' [4, 2, 3, 3] has 2 input channels, expected 3",
                      lambda r: r.call("pipe_k_conv", z(r, (1, 3, 5, 5)), z(r, (4, 2, 3, 3)),
                                       None, z(r, (1, 4, 3, 3)), I2, P4, I2, 1)),
    "conv_output": ("conv: argument 'y' has shape [1, 4, 5, 5], expected [1, 4, 3, 3]",
                    lambda r: r.call("pipe_k_conv", z(r, (1, 3, 5, 5)), z(r, (4, 3, 3, 3)),
                                     None, z(r, (1, 4, 5, 5)), I2, P4, I2, 1)),
    "conv_strides": ("list 'strides' has 1 entries [1], expected 2", lambda r: r.call(
        "pipe_k_conv", z(r, (1, 3, 5, 5)), z(r, (4, 3, 3, 3)), None, z(r, (1, 4, 3, 3)),
        ints([1]), P4, I2, 1)),
    "conv_group": ("group 2 must divide", lambda r: r.call(
        "pipe_k_conv", z(r, (1, 3, 5, 5)), z(r, (4, 3, 3, 3)), None, z(r, (1, 4, 3, 3)),
        I2, P4, I2, 2)),
    "conv_bias": ("conv: argument 'bias' has shape [3], expected [4]", lambda r: r.call(
        "pipe_k_conv", z(r, (1, 3, 5, 5)), z(r, (4, 3, 3, 3)), z(r, (3,)), z(r, (1, 4, 3, 3)),
        I2, P4, I2, 1)),
    "conv_grad_weight_shape": ("conv_grad_weight: argument 'dw' has rank 3", lambda r: r.call(
        "pipe_k_conv_grad_weight", z(r, (1, 3, 5, 5)), z(r, (1, 4, 3, 3)), z(r, (4, 3, 3)),
        I2, P4, I2, 1)),
    "max_pool_output": ("max_pool: dim 2 of 'y' [1, 1, 4, 2] is 4, expected 2 (floor mode) or 3 "
                        "(ceil mode)", lambda r: r.call(
                            "pipe_k_max_pool", z(r, (1, 1, 6, 6)), z(r, (1, 1, 4, 2)), None,
                            ints([3, 3]), ints([2, 2]), P4, I2)),
    "max_pool_indices_dtype": ("argument 'indices' has dtype", lambda r: r.call(
        "pipe_k_max_pool", z(r, (1, 1, 4, 4)), z(r, (1, 1, 2, 2)), z(r, (1, 1, 2, 2)),
        ints([2, 2]), ints([2, 2]), P4, I2)),
    "max_pool_grad_index": ("max_pool_grad: index 16 at position 1 is outside dx", lambda r: r.call(
        "pipe_k_max_pool_grad", z(r, (1, 1, 1, 2)), a(r, [[[[0, 16]]]], np.int64),
        z(r, (1, 1, 4, 4)))),
    "average_pool_pads": ("average_pool: list 'pads' has 2 entries", lambda r: r.call(
        "pipe_k_average_pool", z(r, (1, 1, 4, 4)), z(r, (1, 1, 2, 2)), ints([2, 2]),
        ints([2, 2]), ints([0, 0]), 1)),
    "batch_norm_scale": ("batch_norm_train: argument 'scale' has shape [4], expected [3]",
                         lambda r: r.call("pipe_k_batch_norm_train", z(r, (2, 3, 4)), z(r, (4,)),
                                          z(r, (3,)), None, None, z(r, (2, 3, 4)), None, None,
                                          1e-5, 0.9)),
    "batch_norm_one_value": ("expected more than 1 value per channel", lambda r: r.call(
        "pipe_k_batch_norm_train", z(r, (1, 3)), z(r, (3,)), z(r, (3,)), None, None,
        z(r, (1, 3)), None, None, 1e-5, 0.9)),
    "batch_norm_grad_dx": ("batch_norm_grad: argument 'dx' has shape", lambda r: r.call(
        "pipe_k_batch_norm_grad", z(r, (2, 3)), z(r, (3,)), z(r, (3,)), z(r, (3,)), z(r, (2, 3)),
        z(r, (3, 2)), None, None)),
    "layer_norm_axis": ("layer_norm: axis 3 is outside [0, 3)", lambda r: r.call(
        "pipe_k_layer_norm", z(r, (2, 3, 4)), z(r, (4,)), None, z(r, (2, 3, 4)), None, None,
        3, 1e-5)),
    "layer_norm_scale": ("layer_norm: argument 'scale' has shape [3], expected [4]",
                         lambda r: r.call("pipe_k_layer_norm", z(r, (2, 3, 4)), z(r, (3,)), None,
                                          z(r, (2, 3, 4)), None, None, 2, 1e-5)),
    "layer_norm_mean": ("layer_norm: argument 'mean' has shape [2], expected [2, 1, 1]",
                        lambda r: r.call("pipe_k_layer_norm", z(r, (2, 3, 4)), z(r, (3, 4)),
                                         None, z(r, (2, 3, 4)), z(r, (2,)), None, 1, 1e-5)),
    "softmax_axis": ("softmax: axis -1 is outside [0, 2)", lambda r: r.call(
        "pipe_k_softmax", z(r, (2, 3)), z(r, (2, 3)), -1)),
    "softmax_grad_shape": ("softmax_grad: argument 'dy' has shape", lambda r: r.call(
        "pipe_k_softmax_grad", z(r, (2, 3)), z(r, (3, 2)), z(r, (2, 3)), 1)),
    "reduce_axes": ("reduce(sum): list 'axes' [1, 0] must be sorted", lambda r: r.call(
        "pipe_k_reduce", REDUCE["sum"], z(r, (2, 3)), z(r, ()), ints([1, 0]))),
    "reduce_count": ("reduce(max): output 'y' has 7 elements", lambda r: r.call(
        "pipe_k_reduce", REDUCE["max"], z(r, (2, 3)), z(r, (7,)), ints([0]))),
    "transpose_perm": ("transpose: list 'perm' [0, 0] is not a permutation", lambda r: r.call(
        "pipe_k_transpose", z(r, (2, 3)), z(r, (2, 3)), ints([0, 0]))),
    "transpose_shape": ("transpose: argument 'y' has shape [2, 3], expected [3, 2]",
                        lambda r: r.call("pipe_k_transpose", z(r, (2, 3)), z(r, (2, 3)),
                                         ints([1, 0]))),
    "slice_bounds": ("slice: dim 0 reads 3 elements from 3 by step 1 (last 5), outside [0, 5)",
                     lambda r: r.call("pipe_k_slice", z(r, (5,)), z(r, (3,)), ints([3]),
                                      ints([1]))),
    "slice_negative_bounds": ("outside [0, 5)", lambda r: r.call(
        "pipe_k_slice", z(r, (5,)), z(r, (3,)), ints([1]), ints([-1]))),
    "slice_step_zero": ("slice: step of dim 0 is 0", lambda r: r.call(
        "pipe_k_slice", z(r, (5,)), z(r, (3,)), ints([0]), ints([0]))),
    "slice_assign_bounds": ("slice_assign: dim 1 reads", lambda r: r.call(
        "pipe_k_slice_assign", z(r, (2, 3)), z(r, (2, 4)), ints([0, 2]), ints([1, 1]))),
    "pad_output": ("pad: argument 'y' has shape [6], expected [7]", lambda r: r.call(
        "pipe_k_pad", z(r, (5,)), z(r, (6,)), ints([1, 1]), PAD["constant"], 0.0)),
    "pad_empty_edge": ("pad: dim 0 of x [0] is empty", lambda r: r.call(
        "pipe_k_pad", z(r, (0,)), z(r, (2,)), ints([1, 1]), PAD["edge"], 0.0)),
    "gather_index": ("gather: index 5 at position 1 is outside [-5, 5)", lambda r: r.call(
        "pipe_k_gather", z(r, (5, 2)), a(r, [0, 5], np.int64), z(r, (2, 2)), 0)),
    "gather_negative_index": ("gather: index -6 at position 0", lambda r: r.call(
        "pipe_k_gather", z(r, (5, 2)), a(r, [-6], np.int32), z(r, (1, 2)), 0)),
    "gather_output": ("gather: argument 'y' has shape [2, 2], expected [5, 2]", lambda r: r.call(
        "pipe_k_gather", z(r, (5, 3)), a(r, [0, 1], np.int64), z(r, (2, 2)), 1)),
    "gather_indices_dtype": ("argument 'indices' has dtype", lambda r: r.call(
        "pipe_k_gather", z(r, (5, 2)), z(r, (2,)), z(r, (2, 2)), 0)),
    "gather_grad_index": ("gather_grad: index 3 at position 0 is outside [-3, 3)",
                          lambda r: r.call("pipe_k_gather_grad", z(r, (1, 2)),
                                           a(r, [3], np.int64), z(r, (3, 2)), 0)),
    "expand_shape": ("expand: 'x' [3] does not broadcast to 'y' [2, 4]", lambda r: r.call(
        "pipe_k_expand", z(r, (3,)), z(r, (2, 4)))),
    "tile_multiple": ("tile: dim 1 of y [2, 5] is not a multiple", lambda r: r.call(
        "pipe_k_tile", z(r, (2, 2)), z(r, (2, 5)))),
    "trilu_rank": ("trilu(upper): argument 'x' has rank 1", lambda r: r.call(
        "pipe_k_trilu", z(r, (4,)), z(r, (4,)), 0, 1)),
    "range_rank": ("range: argument 'y' has rank 2", lambda r: r.call(
        "pipe_k_range", z(r, (2, 2)), 0.0, 1.0)),
    "fill_missing": ("fill: argument 'y' is missing", lambda r: r.call("pipe_k_fill", None, 1.0)),
    "cross_entropy_label": ("softmax_cross_entropy: label 7 at flat position 1 is outside [0, 5)",
                            lambda r: r.call("pipe_k_softmax_cross_entropy", z(r, (2, 5)),
                                             a(r, [1, 7], np.int64), z(r, ()), None, -100, 1.0)),
    "cross_entropy_labels_shape": ("argument 'labels' has shape [2, 5], expected [2]",
                                   lambda r: r.call("pipe_k_softmax_cross_entropy", z(r, (2, 5)),
                                                    z(r, (2, 5), I64), z(r, ()), None, -100,
                                                    1.0)),
    "cross_entropy_grad_dloss": ("argument 'dloss' has 2 elements", lambda r: r.call(
        "pipe_k_softmax_cross_entropy_grad", z(r, (2,)), z(r, (2, 5)), a(r, [1, 2], np.int64),
        z(r, (2, 5)), -100, 1.0)),
    "dropout_ratio": ("dropout: ratio 1.5 is outside [0, 1]", lambda r: r.call(
        "pipe_k_dropout", z(r, (4,)), z(r, (4,)), None, 1.5, 0, 0)),
    "dropout_mask": ("dropout: argument 'mask' has dtype", lambda r: r.call(
        "pipe_k_dropout", z(r, (4,)), z(r, (4,)), z(r, (4,)), 0.5, 0, 0)),
}


def run_child(name):
    rank = Rank(library())
    CASES[name][1](rank)
    print("returned normally", flush=True)
    return 0


def run_forked(name):
    """Makes the bad call in a forked child; its exit status and stderr."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no core file, stderr into the pipe
        try:
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.alarm(60)  # a call that wrongly proceeds must not hang the suite
            os.dup2(write_end, 2)
            os.close(read_end)
            CASES[name][1](Rank(library()))
            os.write(2, b"returned normally\n")
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    return status, b"".join(chunks).decode(errors="replace")


class ErrorTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            Rank(library()).destroy()
        except BackendUnavailable as error:
            raise unittest.SkipTest(str(error))

    def run_case(self, name):
        fragment = CASES[name][0]
        status, stderr = run_forked(name)
        self.assertNotEqual(status, 0, "%s: the bad call returned normally" % name)
        self.assertIn(fragment, stderr, "%s: stderr was:\n%s" % (name, stderr))
        self.assertIn("rank 0", stderr)


for _name in CASES:
    def _method(self, name=_name):
        self.run_case(name)
    _method.__name__ = "test_errors__" + _name
    setattr(ErrorTest, _method.__name__, _method)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in CASES:
        sys.exit(run_child(sys.argv[1]))
    unittest.main()
