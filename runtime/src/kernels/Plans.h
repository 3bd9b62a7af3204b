//===- Plans.h - what a native kernel launch is given ---------------*- C++ -*-===//
//
// Plain structs shared by the native kernels' host side (NativeKernels.cpp),
// the CUDA kernels (cuda/Kernels.cu) and the emulated device's loops.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_KERNELS_PLANS_H
#define PIPE_RUNTIME_KERNELS_PLANS_H

#include "pipe_runtime.h"

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define PIPE_PLAN_HD __host__ __device__
#else
#define PIPE_PLAN_HD
#endif

namespace piperun {

/// Bytes per element of `dtype`; 0 for an unknown one.
PIPE_PLAN_HD inline int dtypeBytes(int32_t dtype) {
  switch (dtype) {
  case PIPE_F64: case PIPE_I64: return 8;
  case PIPE_F32: case PIPE_I32: return 4;
  case PIPE_F16: case PIPE_BF16: return 2;
  case PIPE_BOOL: return 1;
  default: return 0;
  }
}

/// One pointwise loop over up to four operands of one shape (operand 0 the
/// output): operand k's element of loop index i is at base[k] + sum over d of
/// index[d] * stride[k][d] (stride 0 on a broadcast dim, any sign on a
/// transposed or sliced one). A strided copy, a broadcast binary op and
/// where are each one (the CPU kernels' StridedLoop, coalesced).
struct OperandPlan {
  int32_t rank = 0, operands = 0;
  int64_t shape[PIPE_MAX_RANK] = {};
  int64_t stride[4][PIPE_MAX_RANK] = {};
  int64_t base[4] = {};

  PIPE_PLAN_HD int64_t elements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
  /// Where loop index i is in each operand.
  PIPE_PLAN_HD void offsets(int64_t i, int64_t *offset) const {
    for (int k = 0; k < operands; ++k)
      offset[k] = base[k];
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t coordinate = i % shape[d];
      i /= shape[d];
      for (int k = 0; k < operands; ++k)
        offset[k] += coordinate * stride[k][d];
    }
  }
  /// Every operand walks its elements in order from 0 (a contiguous loop).
  bool contiguous() const {
    if (rank > 1)
      return false;
    for (int k = 0; k < operands; ++k)
      if (base[k] != 0 || (rank == 1 && shape[0] > 1 && stride[k][0] != 1))
        return false;
    return true;
  }
  /// The lowest and highest offset operand k reaches (elements() > 0).
  void extent(int k, int64_t &low, int64_t &high) const {
    low = high = base[k];
    for (int d = 0; d < rank; ++d) {
      const int64_t reach = (shape[d] - 1) * stride[k][d];
      (reach < 0 ? low : high) += reach;
    }
  }
};

/// Gather's geometry: data [outer..., size, inner...] read at `count` indices
/// along one axis gives [outer..., count, inner...].
struct GatherGeometry {
  int64_t outer = 1, size = 0, count = 0, inner = 1;
};

/// Whether trilu keeps element (i, j) of a matrix: the upper triangle from
/// diagonal k (j - i >= k), or the lower one (j - i <= k).
PIPE_PLAN_HD inline bool trilKeeps(int64_t i, int64_t j, int64_t k, bool upper) {
  return upper ? j - i >= k : j - i <= k;
}

/// Where element e of gather's output reads its input.
PIPE_PLAN_HD inline int64_t gatherSource(const GatherGeometry &g, const int64_t *index,
                                         int64_t e) {
  const int64_t i = e % g.inner, rest = e / g.inner;
  const int64_t j = rest % g.count, o = rest / g.count;
  return (o * g.size + index[j]) * g.inner + i;
}

/// Column (o, i) of gather's gradient: dx[o, :, i] = 0, then dy[o, j, i]
/// added at index[j] in order of j (the CPU kernel's order, so repeated
/// indices sum the same way).
PIPE_PLAN_HD inline void gatherGradColumn(const GatherGeometry &g, const int64_t *index,
                                          int64_t column, const float *dy, float *dx) {
  const int64_t o = column / g.inner, i = column % g.inner;
  for (int64_t s = 0; s < g.size; ++s)
    dx[(o * g.size + s) * g.inner + i] = 0.0f;
  for (int64_t j = 0; j < g.count; ++j)
    dx[(o * g.size + index[j]) * g.inner + i] += dy[(o * g.count + j) * g.inner + i];
}

/// Source index along one dim of pad's output (-1: the constant); `begin`
/// x's offset in y along it (negative: cropped).
PIPE_PLAN_HD inline int64_t padSource(int64_t i, int64_t begin, int64_t size, int32_t mode) {
  const int64_t s = i - begin;
  if (s >= 0 && s < size)
    return s;
  switch (mode) {
  case PIPE_PAD_EDGE: return s < 0 ? 0 : size - 1;
  case PIPE_PAD_WRAP: return ((s % size) + size) % size;
  case PIPE_PAD_REFLECT: {
    // Mirror about the first and last elements (the edge is not repeated),
    // period 2 (size - 1), as numpy's 'reflect'.
    if (size == 1)
      return 0;
    const int64_t period = 2 * (size - 1);
    const int64_t m = ((s % period) + period) % period;
    return m < size ? m : period - m;
  }
  default: return -1;
  }
}

/// Pad of contiguous x into contiguous y: per dim x's offset in y and sizes.
struct PadGeometry {
  int32_t rank = 0, mode = PIPE_PAD_CONSTANT;
  int64_t begin[PIPE_MAX_RANK] = {}, xShape[PIPE_MAX_RANK] = {}, yShape[PIPE_MAX_RANK] = {};
};

/// The element of x that y's element e reads (-1: the constant).
PIPE_PLAN_HD inline int64_t padSourceOffset(const PadGeometry &g, int64_t e) {
  int64_t offset = 0, scale = 1;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t s = padSource(e % g.yShape[d], g.begin[d], g.xShape[d], g.mode);
    e /= g.yShape[d];
    if (s < 0)
      return -1;
    offset += s * scale;
    scale *= g.xShape[d];
  }
  return offset;
}

/// A reduction of contiguous x to y: y's element o has x's kept dims at o's
/// coordinates and runs over the reduced dims in row-major order (the CPU
/// kernel's order).
struct ReduceGeometry {
  int32_t keptRank = 0, reducedRank = 0;
  int64_t keptShape[PIPE_MAX_RANK] = {}, keptStride[PIPE_MAX_RANK] = {};
  int64_t reducedShape[PIPE_MAX_RANK] = {}, reducedStride[PIPE_MAX_RANK] = {};
  int64_t outputs = 1, reduceCount = 1;
};

/// The offset of output o's first input.
PIPE_PLAN_HD inline int64_t reduceBase(const ReduceGeometry &g, int64_t o) {
  int64_t base = 0;
  for (int d = g.keptRank - 1; d >= 0; --d) {
    base += (o % g.keptShape[d]) * g.keptStride[d];
    o /= g.keptShape[d];
  }
  return base;
}

/// The accumulator of `fn` before any input.
PIPE_PLAN_HD inline double reduceInitial(int32_t fn) {
  return fn == PIPE_REDUCE_PROD ? 1.0
         : fn == PIPE_REDUCE_MAX ? -INFINITY
         : fn == PIPE_REDUCE_MIN ? INFINITY
                                 : 0.0;
}

/// acc (fn) v, NaN winning max and min. Also combines two partial accumulators.
PIPE_PLAN_HD inline double reduceCombine(int32_t fn, double acc, double v) {
  switch (fn) {
  case PIPE_REDUCE_SUM:
  case PIPE_REDUCE_MEAN: return acc + v;
  case PIPE_REDUCE_PROD: return acc * v;
  case PIPE_REDUCE_MAX: return (v != v || acc != acc) ? NAN : (v > acc ? v : acc);
  case PIPE_REDUCE_MIN: return (v != v || acc != acc) ? NAN : (v < acc ? v : acc);
  default: return acc;
  }
}

/// `acc` with the inputs k = first, first + step, ... of the output at `base`.
PIPE_PLAN_HD inline double reducePartial(int32_t fn, const ReduceGeometry &g, int64_t base,
                                         const float *x, int64_t first, int64_t step,
                                         double acc) {
  for (int64_t k = first; k < g.reduceCount; k += step) {
    int64_t offset = base, rest = k;
    for (int d = g.reducedRank - 1; d >= 0; --d) {
      offset += (rest % g.reducedShape[d]) * g.reducedStride[d];
      rest /= g.reducedShape[d];
    }
    acc = reduceCombine(fn, acc, x[offset]);
  }
  return acc;
}

/// The output from its accumulator (the mean divides by the count).
PIPE_PLAN_HD inline float reduceFinish(int32_t fn, const ReduceGeometry &g, double acc) {
  if (fn == PIPE_REDUCE_MEAN)
    acc = acc / static_cast<double>(g.reduceCount);
  return static_cast<float>(acc);
}

/// Output o of a float reduction (pipe_reduce `fn`): accumulated in double in
/// input order, as the CPU kernel.
PIPE_PLAN_HD inline float reduceOutput(int32_t fn, const ReduceGeometry &g, int64_t o,
                                       const float *x) {
  return reduceFinish(
      fn, g, reducePartial(fn, g, reduceBase(g, o), x, 0, 1, reduceInitial(fn)));
}

/// The scalars of one Adam / AdamW step, computed on the host as torch does.
struct AdamStep {
  float stepSize, correction2Sqrt, beta1, beta2, oneMinusBeta1, oneMinusBeta2, eps, decay,
      shrink;
  bool decoupled;
};

/// One element of torch.optim.SGD's step (dampening 0, no Nesterov; the
/// momentum buffer, when there is one, starts as the first gradient).
PIPE_PLAN_HD inline void sgdElement(float &p, float g, float *buffer, float lr, float decay,
                                    float momentum, bool firstStep) {
  float d = decay != 0 ? g + decay * p : g;
  if (buffer) {
    *buffer = firstStep ? d : *buffer * momentum + d;
    d = *buffer;
  }
  p = p + -lr * d;
}

/// One element of torch.optim.Adam's (L2 decay added to the gradient) or
/// AdamW's (decoupled decay first) step.
PIPE_PLAN_HD inline void adamElement(float &p, float g, float &m, float &v, const AdamStep &s) {
  if (s.decoupled)
    p = p * s.shrink;
  else if (s.decay != 0)
    g = g + s.decay * p;
  m = m * s.beta1 + s.oneMinusBeta1 * g;
  v = v * s.beta2 + s.oneMinusBeta2 * g * g;
  const float denominator = std::sqrt(v) / s.correction2Sqrt + s.eps;
  p = p + s.stepSize * m / denominator;
}

/// One (strided batched) GEMM in cuBLAS's terms: column-major C (m x n,
/// leading dim ldc) = alpha op(A) op(B) + beta C, `batches` times, the
/// matrices `stride*` elements apart (0: one shared matrix).
struct ColumnMajorGemm {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1, beta = 0;
  const float *a = nullptr;
  int64_t lda = 0, strideA = 0;
  const float *b = nullptr;
  int64_t ldb = 0, strideB = 0;
  float *c = nullptr;
  int64_t ldc = 0, strideC = 0;
  int64_t batches = 1;
};

} // namespace piperun

#endif // PIPE_RUNTIME_KERNELS_PLANS_H
