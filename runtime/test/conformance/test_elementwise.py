"""Conformance of pipe_k_fill, pipe_k_unary(_grad), pipe_k_binary,
pipe_k_where, pipe_k_cast and pipe_k_range against PyTorch (float64
reference; integer and boolean results compared exactly)."""

from __future__ import annotations

import math
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import (BINARY, BOOL, DTYPE_OF, F32, F64, I32, I64, NUMPY_OF, UNARY, KernelTest,
                     add_cases)

torch.set_num_threads(1)


def rng(seed):
    return np.random.default_rng(seed)


# -- unary -------------------------------------------------------------------

def torch_unary(name, alpha, beta):
    """The torch function of a pipe unary op (float64 in, float64 out)."""
    return {
        "relu": torch.relu, "erf": torch.erf, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
        "sqrt": torch.sqrt, "exp": torch.exp, "log": torch.log, "neg": torch.neg,
        "abs": torch.abs, "reciprocal": torch.reciprocal, "floor": torch.floor,
        "ceil": torch.ceil, "softplus": F.softplus, "identity": lambda x: x * 1.0,
        "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
        "leaky_relu": lambda x: F.leaky_relu(x, alpha),
        "hard_sigmoid": (F.hardsigmoid if abs(alpha - 1 / 6) < 1e-12 and beta == 0.5
                         else lambda x: torch.clamp(alpha * x + beta, 0.0, 1.0)),
        "hard_swish": F.hardswish,
        "clip": lambda x: torch.clamp(x, alpha, beta),
        "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
        "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh,
        "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "round": torch.round,
        "sign": torch.sign,
    }[name]


def unary_input(name, shape, seed):
    g = rng(seed)
    if name in ("sqrt", "log"):
        x = g.uniform(0.05, 6.0, shape)
    elif name == "reciprocal":
        x = g.choice([-1.0, 1.0], shape) * g.uniform(0.2, 4.0, shape)
    elif name == "softplus":
        x = g.normal(0, 8, shape)
    elif name in ("asin", "acos", "atanh"):
        x = g.uniform(-0.95, 0.95, shape)
    elif name == "acosh":
        x = g.uniform(1.05, 6.0, shape)
    elif name == "tan":
        x = g.uniform(-1.3, 1.3, shape)
    elif name in ("exp",):
        x = g.normal(0, 3, shape)
    else:
        x = g.normal(0, 2.5, shape)
    x = np.asarray(x, dtype=np.float32)
    # The kinks: 0 for relu-likes and abs, +-3 for the hard functions,
    # the clip bounds, softplus past torch's threshold. Not hard_swish at +3,
    # where torch's own scalar and vector paths disagree (1.5 dy vs dy).
    specials = {"relu": [0.0], "abs": [0.0], "leaky_relu": [0.0], "hard_swish": [-3.0, 0.0],
                "hard_sigmoid": [-3.0, 3.0], "clip": [-1.0, 0.5], "softplus": [25.0, -25.0, 20.5],
                "floor": [2.0, -2.0], "ceil": [2.0, -2.0],
                "round": [0.5, 1.5, 2.5, -0.5, -2.5, 2.0], "sign": [0.0]}.get(name, [])
    flat = x.reshape(-1)
    for i, v in enumerate(specials[:flat.size]):
        flat[i] = v
    return x


UNARY_PARAMS = {"leaky_relu": (0.1, 0.0), "hard_sigmoid": (0.2, 0.5), "clip": (-1.0, 0.5)}
SAVED_OUTPUT = {"relu", "tanh", "sigmoid", "sqrt", "exp", "reciprocal"}
NO_SAVED = {"neg", "identity", "floor", "ceil", "round", "sign"}
FLOAT_UNARY = [n for n in UNARY if n != "logical_not"]


class UnaryTest(KernelTest):
    def run_unary(self, name, shape, dtype=F32, alpha=None, beta=None, seed=0):
        a, b = UNARY_PARAMS.get(name, (0.0, 0.0))
        a = a if alpha is None else alpha
        b = b if beta is None else beta
        x = unary_input(name, shape, seed).astype(NUMPY_OF[dtype])
        y = self.rank.empty(shape, dtype)
        self.rank.call("pipe_k_unary", UNARY[name], self.rank.tensor(x), y, a, b)
        ref = torch_unary(name, a, b)(torch.from_numpy(x).double()).numpy()
        self.check("unary", self.rank.array(y), ref, elementwise=True)

    def run_unary_grad(self, name, shape, alpha=None, beta=None, seed=0):
        a, b = UNARY_PARAMS.get(name, (0.0, 0.0))
        a = a if alpha is None else alpha
        b = b if beta is None else beta
        x = unary_input(name, shape, seed)
        dy = rng(seed + 1).normal(0, 1, shape).astype(np.float32)
        xt = self.rank.tensor(x)
        if name in SAVED_OUTPUT:
            saved = self.rank.empty(shape)
            self.rank.call("pipe_k_unary", UNARY[name], xt, saved, a, b)
        elif name in NO_SAVED:
            saved = None
        else:
            saved = xt
        dx = self.rank.empty(shape)
        self.rank.call("pipe_k_unary_grad", UNARY[name], saved, self.rank.tensor(dy), dx, a, b)
        x64 = torch.from_numpy(x).double().requires_grad_()
        torch_unary(name, a, b)(x64).backward(torch.from_numpy(dy).double())
        self.check("unary_grad", self.rank.array(dx), x64.grad.numpy(), elementwise=True)

    def test_unary__logical_not(self):
        x = rng(3).integers(0, 2, (13, 7)).astype(np.bool_)
        y = self.rank.empty(x.shape, BOOL)
        self.rank.call("pipe_k_unary", UNARY["logical_not"], self.rank.tensor(x), y, 0.0, 0.0)
        self.check_exact("unary", self.rank.array(y), ~x)

    def test_unary__integer_neg_abs(self):
        for dtype in (I64, I32):
            x = rng(4).integers(-1000, 1000, (3, 13)).astype(NUMPY_OF[dtype])
            for name, ref in (("neg", -x), ("abs", np.abs(x))):
                y = self.rank.empty(x.shape, dtype)
                self.rank.call("pipe_k_unary", UNARY[name], self.rank.tensor(x), y, 0.0, 0.0)
                self.check_exact("unary", self.rank.array(y), ref)

    def test_unary__identity_any_dtype(self):
        for dtype in (I64, I32, BOOL, F64):
            x = rng(5).integers(0, 2, (4, 7)).astype(NUMPY_OF[dtype])
            y = self.rank.empty(x.shape, dtype)
            self.rank.call("pipe_k_unary", UNARY["identity"], self.rank.tensor(x), y, 0.0, 0.0)
            self.check_exact("unary", self.rank.array(y), x)

    def test_unary__clip_unbounded(self):
        # Absent bounds arrive as -inf / +inf (or NaN): no clipping.
        x = unary_input("clip", (7, 3), 6)
        for lo, hi in ((-math.inf, math.inf), (math.nan, math.nan), (-math.inf, 0.25)):
            y = self.rank.empty(x.shape)
            self.rank.call("pipe_k_unary", UNARY["clip"], self.rank.tensor(x), y, lo, hi)
            ref = np.minimum(x, 0.25) if hi == 0.25 else x
            self.check("unary", self.rank.array(y), ref.astype(np.float64), elementwise=True)

    def test_unary_grad__hard_sigmoid_torch_default(self):
        self.run_unary_grad("hard_sigmoid", (5, 9), alpha=1 / 6, beta=0.5)

    def test_unary__hard_sigmoid_torch_default(self):
        self.run_unary("hard_sigmoid", (5, 9), alpha=1 / 6, beta=0.5)

    def test_unary__leaky_relu_small_slope(self):
        self.run_unary("leaky_relu", (3, 1, 7), alpha=0.01)


UNARY_CASES = []
UNARY_GRAD_CASES = []
for _i, _name in enumerate(FLOAT_UNARY):
    UNARY_CASES.append((_name + "_13x7", dict(name=_name, shape=(13, 7), seed=_i)))
    UNARY_CASES.append((_name + "_scalar", dict(name=_name, shape=(), seed=_i + 100)))
    if _name in ("gelu", "tanh", "softplus", "sigmoid", "exp", "clip"):
        UNARY_CASES.append((_name + "_f64", dict(name=_name, shape=(3, 5), dtype=F64,
                                                 seed=_i + 200)))
    UNARY_GRAD_CASES.append((_name + "_13x7", dict(name=_name, shape=(13, 7), seed=_i)))
    UNARY_GRAD_CASES.append((_name + "_1", dict(name=_name, shape=(1,), seed=_i + 300)))
UNARY_CASES.append(("gelu_large", dict(name="gelu", shape=(256, 300), seed=9)))
UNARY_GRAD_CASES.append(("gelu_tanh_large", dict(name="gelu_tanh", shape=(256, 300), seed=9)))
add_cases(UnaryTest, "unary", UNARY_CASES, UnaryTest.run_unary)
add_cases(UnaryTest, "unary_grad", UNARY_GRAD_CASES, UnaryTest.run_unary_grad)


# -- binary ------------------------------------------------------------------

BROADCASTS = [
    ("same", (13, 7), (13, 7)),
    ("row", (13, 7), (7,)),
    ("column", (13, 1), (13, 7)),
    ("outer", (4, 1), (1, 6)),
    ("scalar_left", (), (2, 3)),
    ("scalar_right", (2, 3), ()),
    ("rank_mismatch", (2, 1, 3, 1), (5, 1, 4)),
    ("middle", (3, 1, 5), (1, 4, 5)),
    ("ones", (1,), (1, 1)),
    ("large", (64, 1, 300), (1, 8, 300)),
    ("large_flat", (256, 300), (256, 300)),
    ("large_scalar", (256, 300), ()),
]
FLOAT_BINARY = ["add", "sub", "mul", "div", "pow", "mod", "fmod", "max", "min"]
COMPARE = ["equal", "less", "less_equal", "greater", "greater_equal"]


def torch_binary(name):
    return {
        "add": torch.add, "sub": torch.sub, "mul": torch.mul,
        "div": lambda a, b: (torch.div(a, b, rounding_mode="trunc")
                             if not a.is_floating_point() else a / b),
        "pow": torch.pow, "mod": torch.remainder, "fmod": torch.fmod, "max": torch.maximum,
        "min": torch.minimum, "equal": torch.eq, "less": torch.lt, "less_equal": torch.le,
        "greater": torch.gt, "greater_equal": torch.ge, "logical_and": torch.logical_and,
        "logical_or": torch.logical_or,
    }[name]


def binary_inputs(name, shape_a, shape_b, dtype, seed):
    g = rng(seed)
    if dtype in (I64, I32):
        a = g.integers(-50, 50, shape_a)
        b = g.integers(-9, 10, shape_b)
        if name in ("div", "mod", "fmod"):
            b = np.where(b == 0, 3, b)
        return a.astype(NUMPY_OF[dtype]), b.astype(NUMPY_OF[dtype])
    if dtype == BOOL:
        return g.integers(0, 2, shape_a).astype(np.bool_), g.integers(0, 2, shape_b).astype(np.bool_)
    if name in COMPARE:
        # Small integers as floats: many ties.
        return (g.integers(-3, 4, shape_a).astype(NUMPY_OF[dtype]),
                g.integers(-3, 4, shape_b).astype(NUMPY_OF[dtype]))
    a = np.asarray(g.normal(0, 3, shape_a))
    b = np.asarray(g.normal(0, 3, shape_b))
    if name == "pow":
        a = np.abs(a) + 0.1
        b = g.uniform(-2.5, 2.5, shape_b)
    if name in ("div", "mod", "fmod"):
        b = np.where(np.abs(b) < 0.3, 0.7, b)
    return np.asarray(a).astype(NUMPY_OF[dtype]), np.asarray(b).astype(NUMPY_OF[dtype])


class BinaryTest(KernelTest):
    def run_binary(self, name, shape_a, shape_b, dtype=F32, seed=0):
        a, b = binary_inputs(name, shape_a, shape_b, dtype, seed)
        ref = torch_binary(name)(torch.from_numpy(a), torch.from_numpy(b))
        out_dtype = BOOL if ref.dtype == torch.bool else dtype
        y = self.rank.empty(tuple(ref.shape), out_dtype)
        self.rank.call("pipe_k_binary", BINARY[name], self.rank.tensor(a), self.rank.tensor(b), y)
        if out_dtype in (F32, F64):
            ref64 = torch_binary(name)(torch.from_numpy(a).double(), torch.from_numpy(b).double())
            self.check("binary", self.rank.array(y), ref64.numpy(), elementwise=True)
        else:
            self.check_exact("binary", self.rank.array(y), ref.numpy())

    def test_binary__max_min_nan(self):
        a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
        b = np.array([np.nan, 2.0, 1.0, np.nan], np.float32)
        for name in ("max", "min"):
            y = self.rank.empty(a.shape)
            self.rank.call("pipe_k_binary", BINARY[name], self.rank.tensor(a), self.rank.tensor(b), y)
            ref = torch_binary(name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
            self.check_exact("binary", self.rank.array(y), ref)

    def test_binary__integer_extremes(self):
        # Division truncates toward zero; MIN / -1 wraps instead of trapping.
        low = np.iinfo(np.int64).min
        a = np.array([7, -7, 7, -7, low, low], np.int64)
        b = np.array([2, 2, -2, -2, -1, 1], np.int64)
        y = self.rank.empty(a.shape, I64)
        self.rank.call("pipe_k_binary", BINARY["div"], self.rank.tensor(a), self.rank.tensor(b), y)
        self.check_exact("binary", self.rank.array(y),
                         np.array([3, -3, -3, 3, low, low], np.int64))
        for name, ref in (("mod", [1, 1, -1, -1, 0, 0]), ("fmod", [1, -1, 1, -1, 0, 0])):
            y = self.rank.empty(a.shape, I64)
            self.rank.call("pipe_k_binary", BINARY[name], self.rank.tensor(a), self.rank.tensor(b), y)
            self.check_exact("binary", self.rank.array(y), np.array(ref, np.int64))


BINARY_CASES = []
for _i, _name in enumerate(FLOAT_BINARY):
    for _case, _sa, _sb in BROADCASTS:
        if _case.startswith("large") and _name not in ("add", "mul", "max"):
            continue
        BINARY_CASES.append(("%s_f32_%s" % (_name, _case),
                             dict(name=_name, shape_a=_sa, shape_b=_sb, seed=_i)))
for _name in ["add", "sub", "mul", "div", "mod", "fmod", "max", "min"]:
    for _case, _sa, _sb in BROADCASTS[:4]:
        BINARY_CASES.append(("%s_i64_%s" % (_name, _case),
                             dict(name=_name, shape_a=_sa, shape_b=_sb, dtype=I64)))
    BINARY_CASES.append(("%s_i32_row" % _name,
                         dict(name=_name, shape_a=(13, 7), shape_b=(7,), dtype=I32)))
BINARY_CASES.append(("add_f64_row", dict(name="add", shape_a=(13, 7), shape_b=(7,), dtype=F64)))
for _name in COMPARE:
    for _dtype, _tag in ((F32, "f32"), (I64, "i64"), (BOOL, "bool")):
        for _case, _sa, _sb in (BROADCASTS[1], BROADCASTS[6]):
            BINARY_CASES.append(("%s_%s_%s" % (_name, _tag, _case),
                                 dict(name=_name, shape_a=_sa, shape_b=_sb, dtype=_dtype)))
for _name in ("logical_and", "logical_or"):
    for _case, _sa, _sb in BROADCASTS[:7]:
        BINARY_CASES.append(("%s_%s" % (_name, _case),
                             dict(name=_name, shape_a=_sa, shape_b=_sb, dtype=BOOL)))
# Seeded random broadcasts (ranks 0-5, each dim 1 on either side or shared,
# rank mismatches) over the functions and dtypes each supports.
_random = np.random.default_rng(8)
_RANDOM_BINARY = ([(n, F32) for n in FLOAT_BINARY] + [(n, I64) for n in FLOAT_BINARY if n != "pow"]
                  + [(n, I32) for n in ("add", "sub", "mul", "max", "min")]
                  + [(n, d) for n in COMPARE for d in (F32, I64, BOOL)]
                  + [("logical_and", BOOL), ("logical_or", BOOL)])
for _i in range(30):
    _name, _dtype = _RANDOM_BINARY[int(_random.integers(0, len(_RANDOM_BINARY)))]
    _full = [int(d) for d in _random.integers(1, 5, int(_random.integers(0, 6)))]
    _sa = [d if _random.integers(0, 3) else 1 for d in _full]
    _sb = [d if _random.integers(0, 3) else 1 for d in _full]
    _sa = tuple(_sa[int(_random.integers(0, len(_sa) + 1)):] if _random.integers(0, 2) else _sa)
    _sb = tuple(_sb[int(_random.integers(0, len(_sb) + 1)):] if _random.integers(0, 2) else _sb)
    BINARY_CASES.append(("%s_random_%d" % (_name, _i),
                         dict(name=_name, shape_a=_sa, shape_b=_sb, dtype=_dtype, seed=_i)))
add_cases(BinaryTest, "binary", BINARY_CASES, BinaryTest.run_binary)


# -- where, cast, fill, range ---------------------------------------------------

WHERE_CASES = [
    ("same_f32", dict(shapes=((13, 7), (13, 7), (13, 7)), dtype=F32)),
    ("cond_row", dict(shapes=((7,), (13, 7), (13, 7)), dtype=F32)),
    ("all_directions", dict(shapes=((3, 1, 1), (1, 4, 1), (1, 1, 5)), dtype=F32)),
    ("scalar_branches", dict(shapes=((2, 3), (), ()), dtype=F32)),
    ("i64", dict(shapes=((4, 1), (1, 6), (4, 6)), dtype=I64)),
    ("bool", dict(shapes=((5,), (5,), (1,)), dtype=BOOL)),
    ("i32_rank_mismatch", dict(shapes=((2, 1, 3), (3,), (4, 1)), dtype=I32)),
    ("large", dict(shapes=((64, 1, 300), (1, 8, 300), (64, 8, 1)), dtype=F32)),
    ("large_flat", dict(shapes=((256, 300), (256, 300), (256, 300)), dtype=I64)),
]

CAST_DTYPES = [F32, F64, I64, I32, BOOL]
TORCH_OF = {F32: torch.float32, F64: torch.float64, I64: torch.int64, I32: torch.int32,
            BOOL: torch.bool}


class MiscTest(KernelTest):
    def run_where(self, shapes, dtype):
        g = rng(7)
        cond = g.integers(0, 2, shapes[0]).astype(np.bool_)
        x = np.asarray(g.normal(0, 3, shapes[1]) * 10).astype(NUMPY_OF[dtype])
        z = np.asarray(g.normal(0, 3, shapes[2]) * 10).astype(NUMPY_OF[dtype])
        ref = torch.where(torch.from_numpy(cond), torch.from_numpy(x), torch.from_numpy(z)).numpy()
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_where", self.rank.tensor(cond), self.rank.tensor(x),
                       self.rank.tensor(z), y)
        self.check_exact("where", self.rank.array(y), ref)

    def run_cast(self, source, target):
        g = rng(source * 10 + target)
        if source in (F32, F64):
            x = np.concatenate([g.normal(0, 40, 20), [0.0, -0.0, 2.5, -2.5, 0.99, -0.99]])
        elif source == BOOL:
            x = g.integers(0, 2, 26)
        else:
            x = g.integers(-300, 300, 26)
        x = x.reshape(2, 13).astype(NUMPY_OF[source])
        y = self.rank.empty(x.shape, target)
        self.rank.call("pipe_k_cast", self.rank.tensor(x), y)
        ref = torch.from_numpy(x).to(TORCH_OF[target]).numpy()
        self.check_exact("cast", self.rank.array(y), ref)

    def test_cast__saturation_and_nan(self):
        # Documented choice: float -> int saturates and maps NaN to 0 (C leaves it undefined).
        x = np.array([np.nan, 1e20, -1e20, 3e9, -3e9, np.inf, -np.inf], np.float32)
        y = self.rank.empty(x.shape, I32)
        self.rank.call("pipe_k_cast", self.rank.tensor(x), y)
        big, small = np.iinfo(np.int32).max, np.iinfo(np.int32).min
        self.check_exact("cast", self.rank.array(y),
                         np.array([0, big, small, big, small, big, small], np.int32))
        y = self.rank.empty(x.shape, BOOL)
        self.rank.call("pipe_k_cast", self.rank.tensor(x), y)
        self.check_exact("cast", self.rank.array(y), np.ones(7, np.bool_))

    def run_fill(self, shape, dtype, value):
        y = self.rank.empty(shape, dtype)
        self.rank.call("pipe_k_fill", y, value)
        ref = torch.full(shape, value, dtype=torch.float64).to(TORCH_OF[dtype]).numpy()
        self.check_exact("fill", self.rank.array(y), ref)

    def run_range(self, dtype, start, delta, count):
        y = self.rank.empty((count,), dtype)
        self.rank.call("pipe_k_range", y, start, delta)
        if dtype in (I64, I32):
            ref = torch.arange(int(start), int(start) + count * int(delta), int(delta),
                               dtype=TORCH_OF[dtype])[:count].numpy()
            self.check_exact("range", self.rank.array(y), ref)
        else:
            ref = torch.arange(count, dtype=torch.float64) * delta + start
            self.check("range", self.rank.array(y), ref.numpy(), elementwise=True)


add_cases(MiscTest, "where", WHERE_CASES, MiscTest.run_where)
add_cases(MiscTest, "cast",
          [("%s_to_%s" % (np.dtype(NUMPY_OF[s]).name, np.dtype(NUMPY_OF[t]).name),
            dict(source=s, target=t)) for s in CAST_DTYPES for t in CAST_DTYPES],
          MiscTest.run_cast)
add_cases(MiscTest, "fill", [
    ("f32_13x7", dict(shape=(13, 7), dtype=F32, value=-2.75)),
    ("f32_scalar", dict(shape=(), dtype=F32, value=1e-3)),
    ("f64", dict(shape=(3,), dtype=F64, value=math.pi)),
    ("i64_truncates", dict(shape=(2, 3), dtype=I64, value=-3.7)),
    ("i32", dict(shape=(5,), dtype=I32, value=123456.0)),
    ("bool", dict(shape=(4,), dtype=BOOL, value=1.0)),
    ("bool_false", dict(shape=(4,), dtype=BOOL, value=0.0)),
    ("large", dict(shape=(300, 257), dtype=F32, value=0.5)),
    ("empty", dict(shape=(0, 3), dtype=F32, value=1.0)),
], MiscTest.run_fill)
add_cases(MiscTest, "range", [
    ("f32", dict(dtype=F32, start=-1.5, delta=0.25, count=13)),
    ("f32_negative_step", dict(dtype=F32, start=3.0, delta=-0.1, count=31)),
    ("f64", dict(dtype=F64, start=0.5, delta=1e-3, count=7)),
    ("i64", dict(dtype=I64, start=5, delta=-3, count=7)),
    ("i32", dict(dtype=I32, start=0, delta=1, count=1)),
    ("empty", dict(dtype=I64, start=0, delta=1, count=0)),
], MiscTest.run_range)


if __name__ == "__main__":
    unittest.main()
