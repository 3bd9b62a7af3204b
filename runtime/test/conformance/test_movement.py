"""Conformance of the data-movement kernels (transpose, slice, slice_assign,
pad, gather, gather_grad, expand, tile, trilu) for several dtypes: exact
equality with torch (numpy where torch has no equivalent: negative slice
steps, reflect/edge/wrap pads on any rank)."""

from __future__ import annotations

import itertools
import unittest

import numpy as np
import torch
import torch.nn.functional as F

from piperun import BOOL, DTYPE_OF, F32, F64, I32, I64, NUMPY_OF, PAD, KernelTest, add_cases, ints

torch.set_num_threads(1)


def sample(shape, dtype, seed=0):
    g = np.random.default_rng(seed)
    if dtype == BOOL:
        return g.integers(0, 2, shape).astype(np.bool_)
    if dtype in (I64, I32):
        return np.asarray(g.integers(-1000, 1000, shape)).astype(NUMPY_OF[dtype])
    return np.asarray(g.normal(0, 1, shape)).astype(NUMPY_OF[dtype])


def window(shape, slices):
    """starts, steps and counts of python slices over `shape`."""
    starts, steps, counts = [], [], []
    for dim, s in zip(shape, slices):
        start, stop, step = s.indices(dim)
        count = len(range(start, stop, step))
        starts.append(start if count else 0)
        steps.append(step)
        counts.append(count)
    return starts, steps, tuple(counts)


class MovementTest(KernelTest):
    def run_transpose(self, shape, perm, dtype=F32):
        x = sample(shape, dtype)
        ref = torch.from_numpy(x).permute(*perm).contiguous().numpy() if shape else x
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_transpose", self.rank.tensor(x), y, ints(perm))
        self.check_exact("transpose", self.rank.array(y), ref)

    def run_slice(self, shape, slices, dtype=F32):
        x = sample(shape, dtype)
        starts, steps, counts = window(shape, slices)
        y = self.rank.empty(counts, dtype)
        self.rank.call("pipe_k_slice", self.rank.tensor(x), y, ints(starts), ints(steps))
        self.check_exact("slice", self.rank.array(y), x[tuple(slices)])

    def run_slice_assign(self, shape, slices, dtype=F32):
        y0 = sample(shape, dtype, 1)
        starts, steps, counts = window(shape, slices)
        x = sample(counts, dtype, 2)
        y = self.rank.tensor(y0)
        self.rank.call("pipe_k_slice_assign", self.rank.tensor(x), y, ints(starts), ints(steps))
        ref = y0.copy()
        ref[tuple(slices)] = x
        self.check_exact("slice_assign", self.rank.array(y), ref)

    def run_pad(self, shape, pads, mode, value=0.0, dtype=F32):
        x = sample(shape, dtype)
        r = len(shape)
        begins, ends = pads[:r], pads[r:]
        if mode == "constant" and dtype != BOOL:
            torch_pads = []
            for d in reversed(range(r)):
                torch_pads += [begins[d], ends[d]]
            ref = F.pad(torch.from_numpy(x), torch_pads, value=value).numpy()
        else:
            # The positive pads on x, then the negative ones crop.
            np_mode = {"constant": "constant", "reflect": "reflect", "edge": "edge",
                       "wrap": "wrap"}[mode]
            widths = [(max(b, 0), max(e, 0)) for b, e in zip(begins, ends)]
            extra = {"constant_values": value} if mode == "constant" else {}
            ref = np.pad(x, widths, mode=np_mode, **extra)
            crop = tuple(slice(max(-b, 0), ref.shape[d] - max(-e, 0))
                         for d, (b, e) in enumerate(zip(begins, ends)))
            ref = ref[crop]
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_pad", self.rank.tensor(x), y, ints(pads), PAD[mode], value)
        self.check_exact("pad", self.rank.array(y), ref.astype(NUMPY_OF[dtype]))

    def gather_reference(self, x, indices, axis):
        size = x.shape[axis]
        flat = torch.from_numpy(np.asarray(indices).reshape(-1).astype(np.int64)) % size
        picked = torch.index_select(x, axis, flat)
        return picked.reshape(tuple(x.shape[:axis]) + np.asarray(indices).shape
                              + tuple(x.shape[axis + 1:]))

    def run_gather(self, shape, indices, axis, dtype=F32, index_dtype=I64):
        x = sample(shape, dtype)
        idx = np.asarray(indices).astype(NUMPY_OF[index_dtype])
        ref = self.gather_reference(torch.from_numpy(x), idx, axis).numpy()
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_gather", self.rank.tensor(x), self.rank.tensor(idx), y, axis)
        self.check_exact("gather", self.rank.array(y), ref)

    def run_gather_grad(self, shape, indices, axis, dtype=F32, index_dtype=I64):
        x64 = torch.zeros(shape, dtype=torch.float64, requires_grad=True)
        idx = np.asarray(indices).astype(NUMPY_OF[index_dtype])
        y64 = self.gather_reference(x64, idx, axis)
        dy = sample(tuple(y64.shape), F32, 3)
        y64.backward(torch.from_numpy(dy).double())
        dx = self.rank.empty(shape)
        self.rank.call("pipe_k_gather_grad", self.rank.tensor(dy), self.rank.tensor(idx), dx, axis)
        self.check("gather_grad", self.rank.array(dx), x64.grad.numpy())

    def run_expand(self, shape, target, dtype=F32):
        x = sample(shape, dtype)
        ref = torch.from_numpy(x).expand(*target).contiguous().numpy()
        y = self.rank.empty(target, dtype)
        self.rank.call("pipe_k_expand", self.rank.tensor(x), y)
        self.check_exact("expand", self.rank.array(y), ref)

    def run_tile(self, shape, repeats, dtype=F32):
        x = sample(shape, dtype)
        ref = torch.from_numpy(x).repeat(*repeats).numpy() if shape else x
        y = self.rank.empty(ref.shape, dtype)
        self.rank.call("pipe_k_tile", self.rank.tensor(x), y)
        self.check_exact("tile", self.rank.array(y), ref)

    def run_trilu(self, shape, k, upper, dtype=F32):
        x = sample(shape, dtype)
        ref = (torch.triu if upper else torch.tril)(torch.from_numpy(x), k).numpy()
        y = self.rank.empty(shape, dtype)
        self.rank.call("pipe_k_trilu", self.rank.tensor(x), y, k, int(upper))
        self.check_exact("trilu", self.rank.array(y), ref)


TRANSPOSE = [("3d_" + "".join(map(str, p)), dict(shape=(2, 3, 4), perm=p))
             for p in itertools.permutations(range(3))]
TRANSPOSE += [
    ("vector", dict(shape=(5,), perm=(0,))),
    ("scalar", dict(shape=(), perm=())),
    ("unit_dims", dict(shape=(2, 1, 3, 1), perm=(3, 1, 0, 2))),
    ("i64", dict(shape=(3, 7), perm=(1, 0), dtype=I64)),
    ("i32", dict(shape=(2, 3, 5), perm=(2, 0, 1), dtype=I32)),
    ("bool", dict(shape=(4, 5), perm=(1, 0), dtype=BOOL)),
    ("f64", dict(shape=(2, 2, 3), perm=(1, 2, 0), dtype=F64)),
    ("heads", dict(shape=(2, 16, 4, 8), perm=(0, 2, 1, 3))),
    ("large", dict(shape=(128, 300), perm=(1, 0))),
    ("rank6", dict(shape=(2, 1, 3, 2, 1, 2), perm=(5, 4, 3, 2, 1, 0))),
]
SLICES = [
    ("step2", dict(shape=(7, 13), slices=[slice(1, 6, 2), slice(2, 13, 3)])),
    ("reverse", dict(shape=(7, 13), slices=[slice(None, None, -1), slice(None)])),
    ("negative_step3", dict(shape=(2, 5, 4), slices=[slice(None), slice(4, 0, -3), slice(3, None, -2)])),
    ("single", dict(shape=(5,), slices=[slice(3, 4)])),
    ("empty", dict(shape=(4, 3), slices=[slice(2, 2), slice(None)])),
    ("i64", dict(shape=(6, 6), slices=[slice(-1, 0, -1), slice(1, 5)], dtype=I64)),
    ("bool", dict(shape=(9,), slices=[slice(8, None, -4)], dtype=BOOL)),
    ("large", dict(shape=(200, 300), slices=[slice(10, 190, 1), slice(299, 0, -2)])),
]
PADS = [
    ("constant_1d", dict(shape=(5,), pads=[2, 3], mode="constant", value=1.5)),
    ("constant_2d_asymmetric", dict(shape=(3, 4), pads=[0, 2, 1, 0], mode="constant", value=-2.0)),
    ("constant_crop", dict(shape=(4, 6), pads=[-1, 2, 1, -3], mode="constant", value=0.5)),
    ("constant_i64", dict(shape=(2, 3), pads=[1, 1, 1, 1], mode="constant", value=7, dtype=I64)),
    ("constant_bool", dict(shape=(2, 3), pads=[1, 0, 0, 2], mode="constant", value=1, dtype=BOOL)),
    ("constant_3d", dict(shape=(2, 3, 4), pads=[0, 1, 2, 1, 0, 3], mode="constant")),
    ("reflect_1d", dict(shape=(5,), pads=[3, 2], mode="reflect")),
    ("reflect_2d", dict(shape=(3, 4), pads=[2, 1, 1, 3], mode="reflect")),
    ("reflect_beyond", dict(shape=(3,), pads=[5, 6], mode="reflect")),
    ("reflect_crop", dict(shape=(4, 5), pads=[-1, 3, 2, -2], mode="reflect")),
    ("reflect_size_one", dict(shape=(1, 3), pads=[2, 1, 0, 0], mode="reflect")),
    ("edge_1d", dict(shape=(5,), pads=[3, 2], mode="edge")),
    ("edge_3d", dict(shape=(2, 3, 4), pads=[1, 0, 2, 0, 1, 3], mode="edge", dtype=I32)),
    ("edge_crop", dict(shape=(4, 5), pads=[2, -2, -1, 1], mode="edge")),
    ("wrap_1d", dict(shape=(5,), pads=[3, 2], mode="wrap")),
    ("wrap_beyond", dict(shape=(3,), pads=[7, 4], mode="wrap")),
    ("wrap_2d_crop", dict(shape=(3, 4), pads=[-1, 2, 1, 2], mode="wrap", dtype=I64)),
    ("large_reflect", dict(shape=(2, 64, 256), pads=[0, 3, 3, 0, 3, 3], mode="reflect")),
]
GATHER = [
    ("rows", dict(shape=(5, 4), indices=[0, 4, -1, 2], axis=0)),
    ("columns_2d_indices", dict(shape=(3, 5), indices=[[0, -5], [4, 1], [2, 2]], axis=1)),
    ("scalar_index", dict(shape=(3, 5), indices=-2, axis=1)),
    ("middle_axis", dict(shape=(2, 3, 4), indices=[[2, 0], [1, 1]], axis=1)),
    ("last_axis", dict(shape=(2, 3, 4), indices=[3, 0, -4], axis=2)),
    ("i32_indices", dict(shape=(6, 2), indices=[5, -6, 0], axis=0, index_dtype=I32)),
    ("i64_data", dict(shape=(4, 3), indices=[1, 1, 3], axis=0, dtype=I64)),
    ("bool_data", dict(shape=(4, 3), indices=[[2], [0]], axis=1, dtype=BOOL)),
    ("embedding", dict(shape=(50, 8), indices=np.random.default_rng(0).integers(0, 50, (4, 7)),
                       axis=0)),
    ("empty_indices", dict(shape=(4, 3), indices=np.zeros((0,), np.int64), axis=0)),
    ("large_embedding", dict(shape=(1000, 64), indices=np.random.default_rng(1).integers(-1000, 1000, (16, 64)),
                             axis=0)),
]
GATHER_GRAD = [c for c in GATHER if c[1].get("dtype", F32) == F32]
GATHER_GRAD += [
    ("repeated_rows", dict(shape=(3, 2), indices=[[0, 0], [2, 0]], axis=0)),
    ("repeated_middle", dict(shape=(2, 3, 4), indices=[1, 1, -2, 0], axis=1)),
]
EXPAND = [
    ("column", dict(shape=(3, 1), target=(2, 3, 4))),
    ("vector", dict(shape=(1,), target=(5,))),
    ("scalar", dict(shape=(), target=(2, 2))),
    ("middle", dict(shape=(2, 1, 3), target=(2, 4, 3))),
    ("same", dict(shape=(2, 3), target=(2, 3))),
    ("i64", dict(shape=(1, 4), target=(3, 4), dtype=I64)),
    ("bool", dict(shape=(3, 1), target=(3, 5), dtype=BOOL)),
    ("large", dict(shape=(1, 300), target=(256, 300))),
]
TILE = [
    ("2d", dict(shape=(2, 3), repeats=(2, 3))),
    ("3d", dict(shape=(1, 2, 1), repeats=(3, 1, 5))),
    ("vector", dict(shape=(4,), repeats=(3,))),
    ("scalar", dict(shape=(), repeats=())),
    ("once", dict(shape=(2, 3), repeats=(1, 1))),
    ("i64", dict(shape=(2, 2), repeats=(2, 1), dtype=I64)),
    ("bool", dict(shape=(3,), repeats=(4,), dtype=BOOL)),
    ("large", dict(shape=(32, 64), repeats=(8, 4))),
]
TRILU = []
for _upper in (True, False):
    for _k in (0, 1, -2, 10, -10):
        TRILU.append(("%s_k%d" % ("upper" if _upper else "lower", _k),
                      dict(shape=(4, 5), k=_k, upper=_upper)))
TRILU += [
    ("batched_upper", dict(shape=(2, 3, 4, 4), k=0, upper=True)),
    ("batched_lower", dict(shape=(2, 3, 4, 4), k=-1, upper=False)),
    ("tall", dict(shape=(7, 3), k=1, upper=False)),
    ("i64", dict(shape=(3, 3), k=0, upper=True, dtype=I64)),
    ("bool", dict(shape=(3, 3), k=0, upper=False, dtype=BOOL)),
    ("large", dict(shape=(4, 128, 128), k=0, upper=False)),
]

def random_movement_cases(seed):
    """Seeded random transposes, slices, pads and gathers (any dtype, ranks
    1-5, empty and unit dims, negative steps, pads and indices)."""
    g = np.random.default_rng(seed)
    dtypes = (F32, F64, I64, I32, BOOL)
    pick_dtype = lambda: dtypes[int(g.integers(0, len(dtypes)))]
    transpose, slices, pads, gather = [], [], [], []
    for i in range(12):
        shape = tuple(int(d) for d in g.integers(1, 5, int(g.integers(1, 6))))
        transpose.append(("random_%d" % i, dict(shape=shape, perm=tuple(int(p) for p in g.permutation(len(shape))),
                                                dtype=pick_dtype())))
    for i in range(12):
        shape = tuple(int(d) for d in g.integers(0, 7, int(g.integers(1, 5))))
        cuts = []
        for _ in shape:
            step = int(g.choice([-3, -2, -1, 1, 2, 3]))
            bound = lambda: None if g.integers(0, 4) == 0 else int(g.integers(-8, 9))
            cuts.append(slice(bound(), bound(), step))
        slices.append(("random_%d" % i, dict(shape=shape, slices=cuts, dtype=pick_dtype())))
    modes = ("constant", "reflect", "edge", "wrap")
    while len(pads) < 16:
        mode = modes[len(pads) % 4]
        rank = int(g.integers(1, 4))
        shape = tuple(int(d) for d in g.integers(2, 6, rank))
        widths = [int(w) for w in g.integers(-1, 5, 2 * rank)]
        if any(shape[d] + widths[d] + widths[rank + d] < 0 for d in range(rank)):
            continue
        pads.append(("random_%d" % len(pads), dict(shape=shape, pads=widths, mode=mode,
                                                  value=float(g.integers(-3, 4)),
                                                  dtype=pick_dtype())))
    for i in range(12):
        shape = tuple(int(d) for d in g.integers(1, 6, int(g.integers(1, 4))))
        axis = int(g.integers(0, len(shape)))
        index_shape = tuple(int(d) for d in g.integers(1, 4, int(g.integers(0, 3))))
        indices = g.integers(-shape[axis], shape[axis], index_shape)
        gather.append(("random_%d" % i, dict(shape=shape, indices=indices.tolist(), axis=axis,
                                             index_dtype=(I64, I32)[i % 2])))
    return transpose, slices, pads, gather


_RANDOM = random_movement_cases(seed=3)
TRANSPOSE += _RANDOM[0]
SLICES += _RANDOM[1]
PADS += _RANDOM[2]
GATHER += _RANDOM[3]
GATHER_GRAD += _RANDOM[3]


add_cases(MovementTest, "transpose", TRANSPOSE, MovementTest.run_transpose)
add_cases(MovementTest, "slice", SLICES, MovementTest.run_slice)
add_cases(MovementTest, "slice_assign", SLICES, MovementTest.run_slice_assign)
add_cases(MovementTest, "pad", PADS, MovementTest.run_pad)
add_cases(MovementTest, "gather", GATHER, MovementTest.run_gather)
add_cases(MovementTest, "gather_grad", GATHER_GRAD, MovementTest.run_gather_grad)
add_cases(MovementTest, "expand", EXPAND, MovementTest.run_expand)
add_cases(MovementTest, "tile", TILE, MovementTest.run_tile)
add_cases(MovementTest, "trilu", TRILU, MovementTest.run_trilu)


if __name__ == "__main__":
    unittest.main()
