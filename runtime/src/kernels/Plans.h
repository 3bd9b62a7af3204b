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

/// An output of `rank` dims and where each input's element of an output
/// index is: input offset = sum over d of index[d] * stride[d], stride 0 on a
/// broadcast dim.
struct BroadcastPlan {
  int32_t rank = 0;
  int64_t shape[PIPE_MAX_RANK] = {};
  int64_t strideA[PIPE_MAX_RANK] = {};
  int64_t strideB[PIPE_MAX_RANK] = {};
  bool contiguous = false; ///< a, b and y all have the output's shape

  /// Where output element `i` reads a and b.
  PIPE_PLAN_HD void offsets(int64_t i, int64_t &offsetA, int64_t &offsetB) const {
    offsetA = offsetB = 0;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t coordinate = i % shape[d];
      i /= shape[d];
      offsetA += coordinate * strideA[d];
      offsetB += coordinate * strideB[d];
    }
  }

  int64_t elements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
};

/// A strided copy: for every index of `shape`, dst[dstBase + index . dstStride]
/// = src[srcBase + index . srcStride] (elements of one size). Transpose, slice,
/// slice-assign and expand are each one.
struct StridedCopy {
  int32_t rank = 0;
  int64_t shape[PIPE_MAX_RANK] = {};
  int64_t dstStride[PIPE_MAX_RANK] = {};
  int64_t srcStride[PIPE_MAX_RANK] = {};
  int64_t dstBase = 0, srcBase = 0;

  int64_t elements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d)
      n *= shape[d];
    return n;
  }
  /// Where element i of the copy goes and comes from.
  PIPE_PLAN_HD void offsets(int64_t i, int64_t &dst, int64_t &src) const {
    dst = dstBase;
    src = srcBase;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t coordinate = i % shape[d];
      i /= shape[d];
      dst += coordinate * dstStride[d];
      src += coordinate * srcStride[d];
    }
  }
};

/// A reduction of contiguous x to y: y's element o has x's kept dims at o's
/// coordinates and runs over the reduced dims in row-major order (the CPU
/// kernel's order).
struct ReduceGeometry {
  int32_t keptRank = 0, reducedRank = 0;
  int64_t keptShape[PIPE_MAX_RANK] = {}, keptStride[PIPE_MAX_RANK] = {};
  int64_t reducedShape[PIPE_MAX_RANK] = {}, reducedStride[PIPE_MAX_RANK] = {};
  int64_t outputs = 1, reduceCount = 1;
};

/// Output o of a float reduction (pipe_reduce `fn`): accumulated in double,
/// NaN winning max and min, as the CPU kernel.
PIPE_PLAN_HD inline float reduceOutput(int32_t fn, const ReduceGeometry &g, int64_t o,
                                       const float *x) {
  int64_t base = 0;
  for (int d = g.keptRank - 1; d >= 0; --d) {
    base += (o % g.keptShape[d]) * g.keptStride[d];
    o /= g.keptShape[d];
  }
  double acc = fn == PIPE_REDUCE_PROD ? 1.0
               : fn == PIPE_REDUCE_MAX ? -INFINITY
               : fn == PIPE_REDUCE_MIN ? INFINITY
                                       : 0.0;
  for (int64_t k = 0; k < g.reduceCount; ++k) {
    int64_t offset = base, rest = k;
    for (int d = g.reducedRank - 1; d >= 0; --d) {
      offset += (rest % g.reducedShape[d]) * g.reducedStride[d];
      rest /= g.reducedShape[d];
    }
    const double v = x[offset];
    switch (fn) {
    case PIPE_REDUCE_SUM:
    case PIPE_REDUCE_MEAN: acc = acc + v; break;
    case PIPE_REDUCE_PROD: acc = acc * v; break;
    case PIPE_REDUCE_MAX: acc = (v != v || acc != acc) ? NAN : (v > acc ? v : acc); break;
    case PIPE_REDUCE_MIN: acc = (v != v || acc != acc) ? NAN : (v < acc ? v : acc); break;
    default: break;
    }
  }
  if (fn == PIPE_REDUCE_MEAN)
    acc = acc / static_cast<double>(g.reduceCount);
  return static_cast<float>(acc);
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
