//===- KernelSupport.h - shared checks and loops of the CPU kernels -*- C++ -*-===//
//
// Argument checks that name the argument, dtype dispatch and the strided row
// loop (broadcasting, transposes, slices) shared by the CPU kernels.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_CPU_KERNELSUPPORT_H
#define PIPE_RUNTIME_CPU_KERNELSUPPORT_H

#include "Internal.h"
#include "kernels/AxisMath.h"
#include "kernels/Plans.h"
#include "kernels/PointwiseMath.h"
#include "kernels/WindowMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace piperun::cpu {

/// Elements below which a loop runs on one thread (thread start-up costs more).
constexpr int64_t kParallelGrain = 32768;

/// Threads for `work` element-operations: 1 for small work, at most the rank's share.
int threadsFor(pipe_rank *r, int64_t work);

/// "[2, 3, 4]" for messages.
std::string shapeText(const pipe_tensor *t);
std::string shapeText(int rank, const int64_t *shape);
std::string intsText(const pipe_ints &list);

/// `t` is present, its rank is in [0, PIPE_MAX_RANK], its numel matches its
/// shape and it has data when it has elements.
void requireTensor(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t);
void requireDtype(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                  int32_t dtype);
void requireSameDtype(pipe_rank *r, const char *op, const char *argA, const pipe_tensor *a,
                      const char *argB, const pipe_tensor *b);
void requireSameShape(pipe_rank *r, const char *op, const char *argA, const pipe_tensor *a,
                      const char *argB, const pipe_tensor *b);
void requireShape(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t, int rank,
                  const int64_t *shape);
void requireRank(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t, int rank);
void requireMinRank(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                    int rank);
void requireNumel(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                  int64_t numel);
/// The list is valid (n >= 0) and has `count` entries.
void requireInts(pipe_rank *r, const char *op, const char *arg, const pipe_ints &list,
                 int count);
/// F32 or F64.
void requireFloat(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t);

inline bool isFloat(int32_t dtype) { return dtype == PIPE_F32 || dtype == PIPE_F64; }
inline bool isInteger(int32_t dtype) { return dtype == PIPE_I64 || dtype == PIPE_I32; }

/// Row-major element strides of `t`.
void contiguousStrides(int rank, const int64_t *shape, int64_t *strides);

/// Calls `body(T{})` with T the C++ type of `dtype` (BOOL is uint8_t); fails on
/// a dtype outside `allowed` (a bit mask of 1 << dtype).
constexpr uint32_t bit(int32_t dtype) { return 1u << dtype; }
constexpr uint32_t kAnyDtype =
    bit(PIPE_F32) | bit(PIPE_F64) | bit(PIPE_I64) | bit(PIPE_I32) | bit(PIPE_BOOL);
[[noreturn]] void failDtype(pipe_rank *r, const char *op, const char *arg, int32_t dtype,
                            uint32_t allowed);

template <uint32_t Allowed, typename Body>
void dispatchDtype(pipe_rank *r, const char *op, const char *arg, int32_t dtype, Body &&body) {
  if (dtype < 0 || dtype > 31 || !(Allowed & bit(dtype)))
    failDtype(r, op, arg, dtype, Allowed);
  // Only the allowed types are instantiated.
  if constexpr ((Allowed & bit(PIPE_F32)) != 0)
    if (dtype == PIPE_F32)
      return body(float{});
  if constexpr ((Allowed & bit(PIPE_F64)) != 0)
    if (dtype == PIPE_F64)
      return body(double{});
  if constexpr ((Allowed & bit(PIPE_I64)) != 0)
    if (dtype == PIPE_I64)
      return body(int64_t{});
  if constexpr ((Allowed & bit(PIPE_I32)) != 0)
    if (dtype == PIPE_I32)
      return body(int32_t{});
  if constexpr ((Allowed & bit(PIPE_BOOL)) != 0)
    if (dtype == PIPE_BOOL)
      return body(uint8_t{});
  failDtype(r, op, arg, dtype, Allowed);
}

constexpr uint32_t kFloatDtypes = bit(PIPE_F32) | bit(PIPE_F64);
constexpr uint32_t kNumberDtypes = kFloatDtypes | bit(PIPE_I64) | bit(PIPE_I32);

/// Calls `body(U{})` with an unsigned type of the element's size, for kernels
/// that only move bytes.
template <typename Body>
void dispatchElementSize(pipe_rank *r, const char *op, int32_t dtype, Body &&body) {
  switch (dtypeSize(r, dtype)) {
  case 1: body(uint8_t{}); return;
  case 2: body(uint16_t{}); return;
  case 4: body(uint32_t{}); return;
  case 8: body(uint64_t{}); return;
  default: fail(r, "%s: unsupported element size of dtype %s", op, dtypeName(dtype));
  }
}

using pointwise::convertValue;

/// One loop over up to four operands that share a shape but not strides
/// (broadcast inputs have stride 0, transposes permuted ones, slices any).
/// Operand 0 is usually the output.
struct StridedLoop {
  int rank = 0;
  int operands = 0;
  int64_t shape[PIPE_MAX_RANK] = {};
  int64_t strides[4][PIPE_MAX_RANK] = {};
  int64_t base[4] = {0, 0, 0, 0};

  /// Drops size-1 dims and merges neighbours every operand walks contiguously.
  void coalesce();
  int64_t numel() const;
};

/// Runs `body(offsets, length, innerStrides)` once per row of the innermost
/// dim: offsets[k] is operand k's first element of the row (from its base),
/// innerStrides[k] its step along the row. Rows are split over threads; when
/// there are fewer rows than threads, rows are cut into pieces too.
template <typename Body>
void forEachRow(pipe_rank *r, const StridedLoop &loop, Body &&body) {
  const int64_t total = loop.numel();
  if (total == 0)
    return;
  const int rank = loop.rank;
  const int k = loop.operands;
  if (rank == 0) {
    int64_t zero[4] = {0, 0, 0, 0};
    body(loop.base, int64_t(1), zero);
    return;
  }
  const int64_t inner = loop.shape[rank - 1];
  const int64_t rows = total / inner;
  int64_t innerStrides[4] = {0, 0, 0, 0};
  for (int o = 0; o < k; ++o)
    innerStrides[o] = loop.strides[o][rank - 1];
  const int threads = threadsFor(r, total);
  const int64_t pieces = (threads > 1 && rows < threads) ? threads : 1;
  // Offsets of the first element of `row` (outer multi-index in `index`).
  auto locate = [&](int64_t row, int64_t *index, int64_t *offsets) {
    for (int d = rank - 2; d >= 0; --d) {
      index[d] = row % loop.shape[d];
      row /= loop.shape[d];
    }
    for (int o = 0; o < k; ++o) {
      offsets[o] = loop.base[o];
      for (int d = 0; d + 1 < rank; ++d)
        offsets[o] += index[d] * loop.strides[o][d];
    }
  };
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int team = 1, id = 0;
#ifdef _OPENMP
    team = omp_get_num_threads();
    id = omp_get_thread_num();
#endif
    int64_t index[PIPE_MAX_RANK] = {};
    int64_t offsets[4] = {0, 0, 0, 0};
    const int64_t units = rows * pieces;
    const int64_t first = units * id / team, last = units * (id + 1) / team;
    if (pieces > 1) {
      for (int64_t unit = first; unit < last; ++unit) {
        const int64_t piece = unit % pieces;
        const int64_t begin = inner * piece / pieces, end = inner * (piece + 1) / pieces;
        locate(unit / pieces, index, offsets);
        for (int o = 0; o < k; ++o)
          offsets[o] += begin * innerStrides[o];
        body(static_cast<const int64_t *>(offsets), end - begin,
             static_cast<const int64_t *>(innerStrides));
      }
    } else if (first < last) {
      locate(first, index, offsets);
      for (int64_t row = first; row < last; ++row) {
        body(static_cast<const int64_t *>(offsets), inner,
             static_cast<const int64_t *>(innerStrides));
        // Advance the outer multi-index by one row.
        for (int d = rank - 2; d >= 0; --d) {
          for (int o = 0; o < k; ++o)
            offsets[o] += loop.strides[o][d];
          if (++index[d] < loop.shape[d])
            break;
          for (int o = 0; o < k; ++o)
            offsets[o] -= loop.strides[o][d] * loop.shape[d];
          index[d] = 0;
        }
      }
    }
  }
}

/// Sets up `loop` for an elementwise kernel: operand 0 is `y` (contiguous),
/// operands 1.. are `inputs`, each broadcast to y's shape. Fails unless every
/// input broadcasts to y and y's shape is exactly numpy's broadcast of them.
void planBroadcast(pipe_rank *r, const char *op, const pipe_tensor *y, const char *yName,
                   int count, const pipe_tensor *const *inputs, const char *const *names,
                   StridedLoop &loop);

/// Sets up `loop` with operand 0 `y` (contiguous) and operand 1 `x` broadcast
/// to y's shape one way (ONNX Expand, Gemm's C): x's rank is at most y's and
/// each of its dims (right-aligned) is 1 or y's.
void planExpand(pipe_rank *r, const char *op, const pipe_tensor *y, const char *yName,
                const pipe_tensor *x, const char *xName, StridedLoop &loop);

/// Moves the elements of `loop` (operand 0 destination, operand 1 source),
/// elements of `elementSize` bytes.
void copyStrided(pipe_rank *r, const char *op, const StridedLoop &loop, void *dst,
                 const void *src, size_t elementSize);

/// OpenBLAS's own thread count, process-wide. Ranks that share a process (the
/// threads transport) share it: a run sets it to each rank's kernel threads, so
/// that two ranks' GEMMs do not queue for one pool of every core.
void setBlasThreads(int threads);

/// Row-major y[M,N] = alpha op(a) op(b) + beta y (cblas_sgemm), op(a) [M,K]
/// with leading dim lda, op(b) [K,N] with ldb; K == 0 only scales y.
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *y);

/// Scratch memory accounted as PIPE_MEM_WORKSPACE, released at scope exit.
class Scratch {
public:
  Scratch(pipe_rank *r, int32_t dtype, int64_t count);
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  template <typename T> T *as() const { return static_cast<T *>(tensor->data); }
  pipe_tensor *get() const { return tensor; }

private:
  pipe_rank *rank;
  pipe_tensor *tensor;
};

/// The strided loops of transpose, slice, slice_assign and expand (operand 0
/// the output y, 1 the input x), after the kernels' argument checks, which
/// read shapes and dtypes only: a device's native kernel runs them too.
StridedLoop transposeLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                          const pipe_ints &perm);
StridedLoop sliceLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                      const pipe_ints &starts, const pipe_ints &steps);
StridedLoop sliceAssignLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                            const pipe_ints &starts, const pipe_ints &steps);
StridedLoop expandLoop(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y);

/// What pipe_k_reduce's argument checks found: which dims of x are reduced,
/// the outputs and the elements per output.
struct ReduceShape {
  bool reduced[PIPE_MAX_RANK] = {};
  int64_t keptVolume = 1, reduceCount = 1;
};
ReduceShape reduceChecks(pipe_rank *r, int32_t fn, const pipe_tensor *x, const pipe_tensor *y,
                         const pipe_ints &axes);

/// Layer norm's rows (the dims before the axis) and width (the rest).
struct RowLayout {
  int64_t rows = 1, width = 1;
};
/// The argument checks of pipe_k_layer_norm and pipe_k_layer_norm_grad: shapes
/// and dtypes only, never the data, so a device's native kernel runs them too
/// (same messages). Fail on a bad argument; else the layout.
RowLayout layerNormChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                          const pipe_tensor *bias, const pipe_tensor *y, const pipe_tensor *mean,
                          const pipe_tensor *invstd, int64_t axis);
RowLayout layerNormGradChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                              const pipe_tensor *mean, const pipe_tensor *invstd,
                              const pipe_tensor *dy, const pipe_tensor *dx,
                              const pipe_tensor *dscale, const pipe_tensor *dbias, int64_t axis);

/// The argument checks of the kernels below, which a device's native kernel
/// runs too (the same messages). Each reads shapes and dtypes, and the host
/// bytes it is given (labels, indices), never a tensor's data; each fails on a
/// bad argument.
/// pipe_k_binary's: the broadcast loop of y (operand 0), a and b.
StridedLoop binaryChecks(pipe_rank *r, int32_t fn, const pipe_tensor *a, const pipe_tensor *b,
                         const pipe_tensor *y);
/// pipe_k_where's: the broadcast loop of y, cond, x and z.
StridedLoop whereChecks(pipe_rank *r, const pipe_tensor *cond, const pipe_tensor *x,
                        const pipe_tensor *z, const pipe_tensor *y);
void triluChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y, int32_t upper);
void dropoutChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                   const pipe_tensor *mask, double ratio);
/// Pad's: y's shape is x's plus the pads; a non-constant mode needs every
/// dim of x non-empty (when y is).
PadGeometry padChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                      const pipe_ints &pads, int32_t mode);
/// Gather's shapes: `data` indexed along `axis` by `indices` gives `gathered`.
GatherGeometry gatherChecks(pipe_rank *r, const char *op, const char *dataName,
                            const pipe_tensor *data, const pipe_tensor *indices,
                            const char *gatheredName, const pipe_tensor *gathered, int64_t axis);
/// The indices (`raw`, host bytes of `indices`) normalised into [0, size)
/// into `index`; one outside [-size, size) is an error naming it, its
/// position and the data.
void normaliseIndices(pipe_rank *r, const char *op, const pipe_tensor *indices, const void *raw,
                      const GatherGeometry &l, const char *dataName, const pipe_tensor *data,
                      int64_t axis, int64_t *index);
/// Softmax cross entropy's and its gradient's checks, every label (host bytes
/// `labelValues` of `labels`) a class or ignore_index; the geometry with the
/// count of labels that are not ignored.
LossGeometry crossEntropyChecks(pipe_rank *r, const pipe_tensor *logits,
                                const pipe_tensor *labels, const void *labelValues,
                                const pipe_tensor *loss, const pipe_tensor *log_prob,
                                int64_t ignore_index, double scale);
LossGeometry crossEntropyGradChecks(pipe_rank *r, const pipe_tensor *dloss,
                                    const pipe_tensor *log_prob, const pipe_tensor *labels,
                                    const void *labelValues, const pipe_tensor *dlogits,
                                    int64_t ignore_index, double scale);
/// Batch norm's (training and gradient): x [N, C, ...] as channels, each
/// vector of C floats; training needs more than one value per channel.
ChannelLayout batchNormTrainChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                                   const pipe_tensor *bias, const pipe_tensor *running_mean,
                                   const pipe_tensor *running_var, const pipe_tensor *y,
                                   const pipe_tensor *saved_mean,
                                   const pipe_tensor *saved_invstd);
ChannelLayout batchNormInferChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                                   const pipe_tensor *bias, const pipe_tensor *mean,
                                   const pipe_tensor *var, const pipe_tensor *y);
ChannelLayout batchNormGradChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                                  const pipe_tensor *saved_mean, const pipe_tensor *saved_invstd,
                                  const pipe_tensor *dy, const pipe_tensor *dx,
                                  const pipe_tensor *dscale, const pipe_tensor *dbias);
/// Convolution's: x-like [N, C, in...], w [M, C/G, k...] and y-like
/// [N, M, out...] against each other and the attributes; and conv's bias
/// (null: none).
ConvGeometry convChecks(pipe_rank *r, const char *op, const pipe_tensor *x, const char *xName,
                        const pipe_tensor *w, const char *wName, const pipe_tensor *y,
                        const char *yName, const pipe_ints &strides, const pipe_ints &pads,
                        const pipe_ints &dilations, int64_t group);
void convBiasChecks(pipe_rank *r, const pipe_tensor *bias, const ConvGeometry &g);
/// Pooling's: x-like [N, C, in...] and y-like [N, C, out...], each out dim the
/// floor-mode or the ceil-mode size; `dilations` null for average pooling.
PoolGeometry poolChecks(pipe_rank *r, const char *op, const pipe_tensor *x, const char *xName,
                        const pipe_tensor *y, const char *yName, const pipe_ints &kernel,
                        const pipe_ints &strides, const pipe_ints &pads,
                        const pipe_ints *dilations);
void maxPoolIndicesChecks(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *indices);
/// max_pool_grad's, every index (`raw`, host bytes of `indices`) in dx or -1;
/// whether each stays in its own (n, c) plane.
bool maxPoolGradChecks(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                       const void *raw, const pipe_tensor *dx);

} // namespace piperun::cpu

#endif // PIPE_RUNTIME_CPU_KERNELSUPPORT_H
