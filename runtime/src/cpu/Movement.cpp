//===- Movement.cpp - transpose, slice, pad, gather, expand, tile, trilu --===//
//
// Data movement for any dtype: the kernels move elements as bytes of the
// dtype's size (gather_grad accumulates F32).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

#include <vector>

using namespace piperun;
using namespace piperun::cpu;

namespace {

// Checks one dim of a strided window: `count` elements from `start` by
// `step` stay inside [0, size).
void checkWindow(pipe_rank *r, const char *op, int d, int64_t start, int64_t step,
                 int64_t count, int64_t size) {
  if (step == 0)
    fail(r, "%s: step of dim %d is 0", op, d);
  if (count == 0)
    return;
  const int64_t last = start + (count - 1) * step;
  if (start < 0 || start >= size || last < 0 || last >= size)
    fail(r, "%s: dim %d reads %lld elements from %lld by step %lld (last %lld), outside "
            "[0, %lld)",
         op, d, static_cast<long long>(count), static_cast<long long>(start),
         static_cast<long long>(step), static_cast<long long>(last),
         static_cast<long long>(size));
}

// A window of `big` (starts, steps) the shape of `small`, as a strided loop:
// operand `bigOperand` walks the window, the other walks `small` contiguously.
void planWindow(pipe_rank *r, const char *op, const pipe_tensor *big, const char *bigName,
                const pipe_tensor *small, const char *smallName, const pipe_ints &starts,
                const pipe_ints &steps, int bigOperand, StridedLoop &loop) {
  requireSameDtype(r, op, bigName, big, smallName, small);
  if (small->rank != big->rank)
    fail(r, "%s: '%s' %s and '%s' %s have different ranks", op, smallName,
         shapeText(small).c_str(), bigName, shapeText(big).c_str());
  requireInts(r, op, "starts", starts, big->rank);
  requireInts(r, op, "steps", steps, big->rank);
  int64_t bigStrides[PIPE_MAX_RANK];
  contiguousStrides(big->rank, big->shape, bigStrides);
  loop = StridedLoop();
  loop.rank = big->rank;
  loop.operands = 2;
  contiguousStrides(small->rank, small->shape, loop.strides[1 - bigOperand]);
  for (int d = 0; d < big->rank; ++d) {
    checkWindow(r, op, d, starts.v[d], steps.v[d], small->shape[d], big->shape[d]);
    loop.shape[d] = small->shape[d];
    loop.strides[bigOperand][d] = steps.v[d] * bigStrides[d];
    loop.base[bigOperand] += starts.v[d] * bigStrides[d];
  }
  if (small->numel == 0)
    loop.base[bigOperand] = 0;
  loop.coalesce();
}

} // namespace

PadGeometry piperun::cpu::padChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                                    const pipe_ints &pads, int32_t mode) {
  const char *op = "pad";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  if (mode < PIPE_PAD_CONSTANT || mode > PIPE_PAD_WRAP)
    fail(r, "%s: unknown mode %d", op, mode);
  const int rank = x->rank;
  requireInts(r, op, "pads", pads, 2 * rank);
  PadGeometry g;
  g.rank = rank;
  g.mode = mode;
  for (int d = 0; d < rank; ++d) {
    g.begin[d] = pads.v[d];
    g.xShape[d] = x->shape[d];
    g.yShape[d] = x->shape[d] + pads.v[d] + pads.v[rank + d];
    if (g.yShape[d] < 0)
      fail(r, "%s: pads %s crop dim %d of x %s below zero", op, intsText(pads).c_str(), d,
           shapeText(x).c_str());
  }
  requireShape(r, op, "y", y, rank, g.yShape);
  if (y->numel > 0)
    for (int d = 0; d < rank; ++d)
      if (x->shape[d] == 0 && mode != PIPE_PAD_CONSTANT)
        fail(r, "%s: dim %d of x %s is empty, nothing to pad it with", op, d,
             shapeText(x).c_str());
  return g;
}

GatherGeometry piperun::cpu::gatherChecks(pipe_rank *r, const char *op, const char *dataName,
                         const pipe_tensor *data, const pipe_tensor *indices,
                         const char *gatheredName, const pipe_tensor *gathered, int64_t axis) {
  if (axis < 0 || axis >= data->rank)
    fail(r, "%s: axis %lld is outside [0, %d) for %s %s", op, static_cast<long long>(axis),
         data->rank, dataName, shapeText(data).c_str());
  if (data->rank - 1 + indices->rank > PIPE_MAX_RANK)
    fail(r, "%s: %s would have rank %d, more than %d", op, gatheredName,
         data->rank - 1 + indices->rank, PIPE_MAX_RANK);
  GatherGeometry l;
  int64_t expected[PIPE_MAX_RANK];
  int rank = 0;
  for (int d = 0; d < axis; ++d) {
    expected[rank++] = data->shape[d];
    l.outer *= data->shape[d];
  }
  for (int d = 0; d < indices->rank; ++d)
    expected[rank++] = indices->shape[d];
  for (int d = static_cast<int>(axis) + 1; d < data->rank; ++d) {
    expected[rank++] = data->shape[d];
    l.inner *= data->shape[d];
  }
  requireShape(r, op, gatheredName, gathered, rank, expected);
  l.size = data->shape[axis];
  l.count = indices->numel;
  return l;
}

void piperun::cpu::normaliseIndices(pipe_rank *r, const char *op, const pipe_tensor *indices,
                                    const void *raw, const GatherGeometry &l,
                                    const char *dataName, const pipe_tensor *data, int64_t axis,
                                    int64_t *index) {
  dispatchDtype<bit(PIPE_I64) | bit(PIPE_I32)>(r, op, "indices", indices->dtype, [&](auto tag) {
    using I = decltype(tag);
    const I *values = static_cast<const I *>(raw);
    for (int64_t j = 0; j < l.count; ++j) {
      int64_t v = static_cast<int64_t>(values[j]);
      if (v < -l.size || v >= l.size)
        fail(r, "%s: index %lld at position %lld is outside [-%lld, %lld) (%s %s, axis %lld)",
             op, static_cast<long long>(v), static_cast<long long>(j),
             static_cast<long long>(l.size), static_cast<long long>(l.size), dataName,
             shapeText(data).c_str(), static_cast<long long>(axis));
      index[j] = v < 0 ? v + l.size : v;
    }
  });
}

StridedLoop piperun::cpu::transposeLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                                        const pipe_ints &perm) {
  const char *op = "transpose";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  requireInts(r, op, "perm", perm, x->rank);
  bool seen[PIPE_MAX_RANK] = {};
  int64_t expected[PIPE_MAX_RANK];
  for (int d = 0; d < x->rank; ++d) {
    const int64_t p = perm.v[d];
    if (p < 0 || p >= x->rank || seen[p])
      fail(r, "%s: list 'perm' %s is not a permutation of 0..%d", op, intsText(perm).c_str(),
           x->rank - 1);
    seen[p] = true;
    expected[d] = x->shape[p];
  }
  requireShape(r, op, "y", y, x->rank, expected);
  int64_t xStrides[PIPE_MAX_RANK];
  contiguousStrides(x->rank, x->shape, xStrides);
  StridedLoop loop;
  loop.rank = y->rank;
  loop.operands = 2;
  contiguousStrides(y->rank, y->shape, loop.strides[0]);
  for (int d = 0; d < y->rank; ++d) {
    loop.shape[d] = y->shape[d];
    loop.strides[1][d] = xStrides[perm.v[d]];
  }
  loop.coalesce();
  return loop;
}

StridedLoop piperun::cpu::sliceLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                                    const pipe_ints &starts, const pipe_ints &steps) {
  const char *op = "slice";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  StridedLoop loop;
  planWindow(r, op, x, "x", y, "y", starts, steps, 1, loop);
  return loop;
}

StridedLoop piperun::cpu::sliceAssignLoop(pipe_rank *r, const pipe_tensor *x,
                                          const pipe_tensor *y, const pipe_ints &starts,
                                          const pipe_ints &steps) {
  const char *op = "slice_assign";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  StridedLoop loop;
  planWindow(r, op, y, "y", x, "x", starts, steps, 0, loop);
  return loop;
}

StridedLoop piperun::cpu::expandLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y) {
  const char *op = "expand";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  StridedLoop loop;
  planExpand(r, op, y, "y", x, "x", loop);
  return loop;
}

void piperun::cpu::triluChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                               int32_t upper) {
  const char *op = upper ? "trilu(upper)" : "trilu(lower)";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireMinRank(r, op, "x", x, 2);
  requireSameShape(r, op, "x", x, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
}

extern "C" {

void pipe_k_transpose(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints perm) {
  PIPE_DEVICE_KERNEL(r, transpose, pipe_k_transpose, x, y, perm);
  copyStrided(r, "transpose", transposeLoop(r, x, y, perm), y->data, x->data,
              dtypeSize(r, x->dtype));
}

void pipe_k_slice(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
                  pipe_ints steps) {
  PIPE_DEVICE_KERNEL(r, slice, pipe_k_slice, x, y, starts, steps);
  copyStrided(r, "slice", sliceLoop(r, x, y, starts, steps), y->data, x->data,
              dtypeSize(r, x->dtype));
}

void pipe_k_slice_assign(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
                         pipe_ints steps) {
  PIPE_DEVICE_KERNEL(r, sliceAssign, pipe_k_slice_assign, x, y, starts, steps);
  copyStrided(r, "slice_assign", sliceAssignLoop(r, x, y, starts, steps), y->data, x->data,
              dtypeSize(r, x->dtype));
}

void pipe_k_pad(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints pads, int32_t mode,
                double value) {
  PIPE_DEVICE_KERNEL(r, pad, pipe_k_pad, x, y, pads, mode, value);
  const char *op = "pad";
  const PadGeometry g = padChecks(r, x, y, pads, mode);
  const int rank = g.rank;
  if (y->numel == 0)
    return;
  // Per dim, the x index each y index reads (-1: the constant).
  std::vector<int64_t> sources[PIPE_MAX_RANK];
  for (int d = 0; d < rank; ++d) {
    sources[d].resize(static_cast<size_t>(y->shape[d]));
    for (int64_t i = 0; i < y->shape[d]; ++i)
      sources[d][static_cast<size_t>(i)] = padSource(i, pads.v[d], x->shape[d], mode);
  }
  int64_t xStrides[PIPE_MAX_RANK];
  contiguousStrides(rank, x->shape, xStrides);
  dispatchDtype<kAnyDtype>(r, op, "x", x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T fillValue = convertValue<T>(value);
    const T *in = static_cast<const T *>(x->data);
    T *out = static_cast<T *>(y->data);
    if (rank == 0) {
      out[0] = in[0];
      return;
    }
    const int64_t inner = y->shape[rank - 1];
    const int64_t rows = y->numel / inner;
    const int64_t *innerSource = sources[rank - 1].data();
    const int threads = threadsFor(r, y->numel);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t row = 0; row < rows; ++row) {
      int64_t rest = row, base = 0;
      bool constantRow = false;
      for (int d = rank - 2; d >= 0; --d) {
        const int64_t s = sources[d][static_cast<size_t>(rest % y->shape[d])];
        rest /= y->shape[d];
        if (s < 0)
          constantRow = true;
        else
          base += s * xStrides[d];
      }
      T *dst = out + row * inner;
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t s = innerSource[i];
        dst[i] = (constantRow || s < 0) ? fillValue : in[base + s];
      }
    }
  });
}

void pipe_k_gather(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *indices,
                   pipe_tensor *y, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, gather, pipe_k_gather, x, indices, y, axis);
  const char *op = "gather";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "indices", indices);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  const GatherGeometry l = gatherChecks(r, op, "x", x, indices, "y", y, axis);
  Scratch normalised(r, PIPE_I64, l.count);
  int64_t *index = normalised.as<int64_t>();
  normaliseIndices(r, op, indices, indices->data, l, "x", x, axis, index);
  const size_t element = dtypeSize(r, x->dtype);
  const size_t rowBytes = static_cast<size_t>(l.inner) * element;
  const char *in = static_cast<const char *>(x->data);
  char *out = static_cast<char *>(y->data);
  const int threads = threadsFor(r, l.outer * l.count * l.inner);
#pragma omp parallel for num_threads(threads) if (threads > 1) collapse(2)
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t j = 0; j < l.count; ++j)
      std::memcpy(out + static_cast<size_t>(o * l.count + j) * rowBytes,
                  in + static_cast<size_t>(o * l.size + index[j]) * rowBytes, rowBytes);
}

void pipe_k_gather_grad(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                        pipe_tensor *dx, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, gatherGrad, pipe_k_gather_grad, dy, indices, dx, axis);
  const char *op = "gather_grad";
  requireTensor(r, op, "dy", dy);
  requireTensor(r, op, "indices", indices);
  requireTensor(r, op, "dx", dx);
  requireDtype(r, op, "dy", dy, PIPE_F32);
  requireDtype(r, op, "dx", dx, PIPE_F32);
  const GatherGeometry l = gatherChecks(r, op, "dx", dx, indices, "dy", dy, axis);
  Scratch normalised(r, PIPE_I64, l.count);
  int64_t *index = normalised.as<int64_t>();
  normaliseIndices(r, op, indices, indices->data, l, "dx", dx, axis, index);
  const float *g = static_cast<const float *>(dy->data);
  float *out = static_cast<float *>(dx->data);
  std::fill(out, out + dx->numel, 0.0f);
  // Each outer slice owns its own rows of dx, so slices run in parallel; the
  // indices of one slice add up in order (repeated indices accumulate).
  const int threads = l.outer > 1 ? threadsFor(r, l.outer * l.count * l.inner) : 1;
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t j = 0; j < l.count; ++j) {
      const float *src = g + (o * l.count + j) * l.inner;
      float *dst = out + (o * l.size + index[j]) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i)
        dst[i] += src[i];
    }
}

void pipe_k_expand(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) {
  PIPE_DEVICE_KERNEL(r, expand, pipe_k_expand, x, y);
  copyStrided(r, "expand", expandLoop(r, x, y), y->data, x->data, dtypeSize(r, x->dtype));
}

void pipe_k_tile(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) {
  PIPE_DEVICE_STAGED(r, pipe_k_tile, x, y);
  const char *op = "tile";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  requireRank(r, op, "y", y, x->rank);
  const int rank = x->rank;
  for (int d = 0; d < rank; ++d) {
    const int64_t xs = x->shape[d], ys = y->shape[d];
    if (xs == 0 ? ys != 0 : ys % xs != 0)
      fail(r, "%s: dim %d of y %s is not a multiple of x's %s", op, d, shapeText(y).c_str(),
           shapeText(x).c_str());
  }
  if (y->numel == 0)
    return;
  const size_t element = dtypeSize(r, x->dtype);
  if (rank == 0) {
    std::memcpy(y->data, x->data, element);
    return;
  }
  int64_t xStrides[PIPE_MAX_RANK];
  contiguousStrides(rank, x->shape, xStrides);
  const int64_t inner = y->shape[rank - 1], xInner = x->shape[rank - 1];
  const int64_t rows = y->numel / inner;
  const char *in = static_cast<const char *>(x->data);
  char *out = static_cast<char *>(y->data);
  const size_t xRowBytes = static_cast<size_t>(xInner) * element;
  const int threads = threadsFor(r, y->numel);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t rest = row, base = 0;
    for (int d = rank - 2; d >= 0; --d) {
      base += (rest % y->shape[d]) % x->shape[d] * xStrides[d];
      rest /= y->shape[d];
    }
    char *dst = out + static_cast<size_t>(row * inner) * element;
    for (int64_t copy = 0; copy < inner / xInner; ++copy)
      std::memcpy(dst + copy * xRowBytes, in + static_cast<size_t>(base) * element, xRowBytes);
  }
}

void pipe_k_trilu(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t k,
                  int32_t upper) {
  PIPE_DEVICE_KERNEL(r, trilu, pipe_k_trilu, x, y, k, upper);
  triluChecks(r, x, y, upper);
  const char *op = upper ? "trilu(upper)" : "trilu(lower)";
  const int64_t rowsPerMatrix = x->shape[x->rank - 2], columns = x->shape[x->rank - 1];
  if (x->numel == 0)
    return;
  const int64_t rows = x->numel / columns;
  dispatchElementSize(r, op, x->dtype, [&](auto tag) {
    using U = decltype(tag);
    const U *in = static_cast<const U *>(x->data);
    U *out = static_cast<U *>(y->data);
    const int threads = threadsFor(r, x->numel);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row % rowsPerMatrix;
      for (int64_t j = 0; j < columns; ++j) {
        out[row * columns + j] = trilKeeps(i, j, k, upper != 0) ? in[row * columns + j] : U(0);
      }
    }
  });
}

} // extern "C"
