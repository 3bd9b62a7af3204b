"""ctypes binding of libpiperun's kernel ABI (runtime/include/pipe_runtime.h)
for the conformance suite: tensors in and out as numpy arrays, one standalone
rank, and the error metric every test reports.

The library is the first of: $PIPE_RUNTIME_LIB (a file), then libpiperun.so
under build-runtime/lib, build/lib and build/runtime/lib of the repository.
The rank's backend is $PIPE_RUNTIME_BACKEND (cpu by default; emulated or
cuda): tensors then live in device memory and move through
pipe_copy_from_host / pipe_copy_to_host.
"""

from __future__ import annotations

import collections
import ctypes
import os
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LIBRARY_PLACES = ("build-runtime/lib", "build/lib", "build/runtime/lib")

PIPE_MAX_RANK = 8
PIPE_MAX_INTS = 16

F32, F64, F16, BF16, I64, I32, BOOL = 1, 2, 3, 4, 5, 6, 7
NUMPY_OF = {F32: np.float32, F64: np.float64, I64: np.int64, I32: np.int32, BOOL: np.bool_}
DTYPE_OF = {np.dtype(v): k for k, v in NUMPY_OF.items()}
MEM_WORKSPACE = 5

UNARY = dict(relu=0, erf=1, tanh=2, sigmoid=3, sqrt=4, exp=5, log=6, neg=7, abs=8,
             reciprocal=9, logical_not=10, floor=11, ceil=12, softplus=13, identity=14,
             gelu=15, gelu_tanh=16, leaky_relu=17, hard_sigmoid=18, hard_swish=19, clip=20,
             sin=21, cos=22, tan=23, asin=24, acos=25, atan=26, sinh=27, cosh=28, asinh=29,
             acosh=30, atanh=31, round=32, sign=33)
BINARY = dict(add=0, sub=1, mul=2, div=3, pow=4, mod=5, fmod=6, equal=7, less=8,
              less_equal=9, greater=10, greater_equal=11, logical_and=12, logical_or=13,
              max=14, min=15)
REDUCE = dict(sum=0, mean=1, max=2, min=3, prod=4)
PAD = dict(constant=0, reflect=1, edge=2, wrap=3)


class Ints(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int32), ("v", ctypes.c_int64 * PIPE_MAX_INTS)]


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * PIPE_MAX_RANK), ("numel", ctypes.c_int64),
                ("storage", ctypes.c_void_p)]


TensorPtr = ctypes.POINTER(Tensor)
RankPtr = ctypes.c_void_p


def find_library():
    """The path of libpiperun.so, or None."""
    explicit = os.environ.get("PIPE_RUNTIME_LIB")
    if explicit:
        return explicit if os.path.isfile(explicit) else None
    for place in LIBRARY_PLACES:
        candidate = os.path.join(REPO_ROOT, place, "libpiperun.so")
        if os.path.isfile(candidate):
            return candidate
    return None


def ints(values):
    values = [int(v) for v in values]
    assert len(values) <= PIPE_MAX_INTS
    result = Ints()
    result.n = len(values)
    for i, v in enumerate(values):
        result.v[i] = v
    return result


# Argument kinds of every kernel: t = tensor (or None), i = pipe_ints,
# d = double, n = int32, l = int64.
SIGNATURES = {
    "pipe_k_unary": "nttdd",
    "pipe_k_unary_grad": "ntttdd",
    "pipe_k_binary": "nttt",
    "pipe_k_where": "tttt",
    "pipe_k_cast": "tt",
    "pipe_k_fill": "td",
    "pipe_k_matmul": "ttt",
    "pipe_k_gemm": "ttttddnn",
    "pipe_k_conv": "ttttiiil",
    "pipe_k_conv_grad_input": "tttiiil",
    "pipe_k_conv_grad_weight": "tttiiil",
    "pipe_k_max_pool": "tttiiii",
    "pipe_k_max_pool_grad": "ttt",
    "pipe_k_average_pool": "ttiiin",
    "pipe_k_average_pool_grad": "ttiiin",
    "pipe_k_batch_norm_train": "ttttttttdd",
    "pipe_k_batch_norm_infer": "ttttttd",
    "pipe_k_batch_norm_grad": "tttttttt",
    "pipe_k_layer_norm": "ttttttld",
    "pipe_k_layer_norm_grad": "ttttttttl",
    "pipe_k_softmax": "ttl",
    "pipe_k_log_softmax": "ttl",
    "pipe_k_softmax_grad": "tttl",
    "pipe_k_log_softmax_grad": "tttl",
    "pipe_k_dropout": "tttdnl",
    "pipe_k_reduce": "ntti",
    "pipe_k_transpose": "tti",
    "pipe_k_slice": "ttii",
    "pipe_k_slice_assign": "ttii",
    "pipe_k_pad": "ttind",
    "pipe_k_gather": "tttl",
    "pipe_k_gather_grad": "tttl",
    "pipe_k_expand": "tt",
    "pipe_k_tile": "tt",
    "pipe_k_trilu": "ttln",
    "pipe_k_range": "tdd",
    "pipe_k_softmax_cross_entropy": "ttttld",
    "pipe_k_softmax_cross_entropy_grad": "ttttld",
}
CTYPE_OF = {"t": TensorPtr, "i": Ints, "d": ctypes.c_double,
            "n": ctypes.c_int32, "l": ctypes.c_int64}


def load(path=None):
    path = path or find_library()
    if not path:
        raise RuntimeError("libpiperun.so not found: build the runtime or set PIPE_RUNTIME_LIB "
                           "(looked in %s)" % ", ".join(LIBRARY_PLACES))
    lib = ctypes.CDLL(path)
    lib.pipe_rank_create_standalone.restype = RankPtr
    lib.pipe_rank_create_standalone.argtypes = []
    lib.pipe_rank_create_on.restype = RankPtr
    lib.pipe_rank_create_on.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.pipe_copy_from_host.argtypes = [RankPtr, TensorPtr, ctypes.c_void_p]
    lib.pipe_copy_to_host.argtypes = [RankPtr, ctypes.c_void_p, TensorPtr]
    lib.pipe_rank_destroy.argtypes = [RankPtr]
    lib.pipe_alloc.restype = TensorPtr
    lib.pipe_alloc.argtypes = [RankPtr, ctypes.c_int32, Ints, ctypes.c_int32]
    lib.pipe_free.argtypes = [RankPtr, TensorPtr]
    lib.pipe_memory_live.restype = ctypes.c_int64
    lib.pipe_memory_live.argtypes = [RankPtr, ctypes.c_int32]
    lib.pipe_memory_peak.restype = ctypes.c_int64
    lib.pipe_memory_peak.argtypes = [RankPtr, ctypes.c_int32]
    for name, kinds in SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = None
        function.argtypes = [RankPtr] + [CTYPE_OF[k] for k in kinds]
    return lib


def backend():
    """The backend the suite runs on: $PIPE_RUNTIME_BACKEND, else cpu."""
    return os.environ.get("PIPE_RUNTIME_BACKEND", "cpu")


class BackendUnavailable(RuntimeError):
    pass


class Rank:
    """One standalone rank; tensors made through it are freed by release()."""

    def __init__(self, lib):
        self.lib = lib
        why = ctypes.create_string_buffer(512)
        self.handle = lib.pipe_rank_create_on(backend().encode(), why, len(why))
        if not self.handle:
            raise BackendUnavailable("backend %s: %s" % (backend(), why.value.decode()))
        self.tensors = []

    def empty(self, shape, dtype=F32, fill=True):
        """A new tensor; its bytes are poisoned (NaN / 0x5A) so unwritten
        elements show."""
        shape = tuple(int(s) for s in shape)
        t = self.lib.pipe_alloc(self.handle, dtype, ints(shape), MEM_WORKSPACE)
        self.tensors.append(t)
        if fill and t.contents.numel > 0:
            nbytes = t.contents.numel * np.dtype(NUMPY_OF[dtype]).itemsize
            pattern = 0xFF if dtype in (F32, F64) else 0x5A
            poison = np.full(nbytes, pattern, np.uint8)
            self.lib.pipe_copy_from_host(self.handle, t, poison.ctypes.data)
        return t

    def tensor(self, array):
        """A tensor holding a copy of `array`."""
        array = np.asarray(array, order="C")
        t = self.empty(array.shape, DTYPE_OF[array.dtype], fill=False)
        if array.size:
            self.lib.pipe_copy_from_host(self.handle, t, array.ctypes.data)
        return t

    def array(self, t):
        """A numpy copy of tensor `t`."""
        c = t.contents
        dtype = np.dtype(NUMPY_OF[c.dtype])
        shape = tuple(c.shape[d] for d in range(c.rank))
        result = np.zeros(shape, dtype)
        if c.numel:
            self.lib.pipe_copy_to_host(self.handle, result.ctypes.data, t)
        return result

    def call(self, name, *args):
        getattr(self.lib, name)(self.handle, *args)

    def workspace_live(self):
        return self.lib.pipe_memory_live(self.handle, MEM_WORKSPACE)

    def release(self):
        for t in self.tensors:
            self.lib.pipe_free(self.handle, t)
        self.tensors = []

    def destroy(self):
        self.release()
        self.lib.pipe_rank_destroy(self.handle)


# Worst relative error and number of checks per kernel, for the report.
RESULTS = collections.defaultdict(lambda: [0, 0.0])
TINY = 1e-30


def relative_error(ours, ref):
    """max|ours - ref| / max(max|ref|, tiny) over the finite entries of ref;
    NaN and infinite entries must match exactly (else inf)."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if ours.shape != ref.shape:
        return float("inf")
    nan_ref = np.isnan(ref)
    if (nan_ref != np.isnan(ours)).any():
        return float("inf")
    inf_ref = np.isinf(ref)
    if (ours[inf_ref] != ref[inf_ref]).any():
        return float("inf")
    finite = ~nan_ref & ~inf_ref
    if not finite.any():
        return 0.0
    if not np.isfinite(ours[finite]).all():
        return float("inf")
    scale = max(float(np.abs(ref[finite]).max()), TINY)
    return float(np.abs(ours[finite] - ref[finite]).max() / scale)


def elementwise_violations(ours, ref, rtol, atol_fraction):
    """Entries where |ours - ref| > rtol |ref| + atol_fraction max|ref| (finite ref)."""
    ours = np.asarray(ours, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    finite = np.isfinite(ref)
    if not finite.any():
        return np.zeros(0, dtype=np.int64)
    scale = float(np.abs(ref[finite]).max())
    bound = rtol * np.abs(ref) + atol_fraction * scale
    bad = finite & ~(np.abs(ours - ref) <= bound)
    return np.flatnonzero(bad)


def record(kernel, error):
    entry = RESULTS[kernel]
    entry[0] += 1
    entry[1] = max(entry[1], error)


_LIBRARY = None


def library():
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = load()
    return _LIBRARY


TOLERANCE = 1e-5


class KernelTest(unittest.TestCase):
    """One standalone rank per test class; every test frees its tensors and
    must leave no scratch memory behind."""

    @classmethod
    def setUpClass(cls):
        try:
            cls.rank = Rank(library())
        except BackendUnavailable as error:
            raise unittest.SkipTest(str(error))

    @classmethod
    def tearDownClass(cls):
        cls.rank.destroy()

    def tearDown(self):
        self.rank.release()
        self.assertEqual(self.rank.workspace_live(), 0, "kernel scratch memory was not freed")

    def check(self, kernel, ours, ref, tol=TOLERANCE, elementwise=False, what="output"):
        """Normwise relative error <= tol; with `elementwise`, also every entry
        within tol |ref| + tol/10 max|ref|."""
        ours = np.asarray(ours)
        ref = np.asarray(ref)
        self.assertEqual(ours.shape, ref.shape, "%s: %s shape" % (kernel, what))
        error = relative_error(ours, ref)
        record(kernel, error)
        self.assertLessEqual(error, tol, "%s: %s relative error %.3g" % (kernel, what, error))
        if elementwise:
            bad = elementwise_violations(ours, ref, tol, tol / 10)
            if bad.size:
                i = bad[0]
                self.fail("%s: %s has %d entries off, first at flat %d: %r vs reference %r"
                          % (kernel, what, bad.size, i, ours.reshape(-1)[i], ref.reshape(-1)[i]))

    def check_exact(self, kernel, ours, ref, what="output"):
        ours = np.asarray(ours)
        ref = np.asarray(ref)
        self.assertEqual(ours.shape, ref.shape, "%s: %s shape" % (kernel, what))
        self.assertEqual(ours.dtype, ref.dtype, "%s: %s dtype" % (kernel, what))
        same = np.array_equal(ours, ref, equal_nan=ours.dtype.kind == "f")
        record(kernel, 0.0 if same else float("inf"))
        if not same:
            diff = np.flatnonzero(~((ours == ref) | (np.isnan(ours) & np.isnan(ref))
                                    if ours.dtype.kind == "f" else ours != ref))
            i = diff[0]
            self.fail("%s: %s differs at %d entries, first at flat %d: %r vs reference %r"
                      % (kernel, what, diff.size, i, ours.reshape(-1)[i], ref.reshape(-1)[i]))


def add_cases(cls, kernel, cases, runner):
    """One test method per case: test_<kernel>__<case name>."""
    for name, params in cases:
        def method(self, params=params):
            runner(self, **params)
        method.__name__ = "test_%s__%s" % (kernel, name)
        method.__doc__ = None
        assert not hasattr(cls, method.__name__), method.__name__
        setattr(cls, method.__name__, method)
