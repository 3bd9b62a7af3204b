//===- NativeKernels.cpp - the kernel calls a device runs itself -----------===//
//
// The host side of the native kernels, the same for every device: each entry
// takes the common, well-formed cases (f32, shapes the CPU kernel would
// accept, broadcasts it can map to strides) and hands them to the device's
// KernelLauncher (CUDA kernels and cuBLAS on a GPU, host loops on the emulated
// device); anything else returns false and runs as the CPU kernel, staged,
// which computes it or fails with its own message. Each ends by waiting for
// the launches (KernelLauncher::finish), so a node's measured time is its
// kernels' time.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "Rank.h"
#include "Tensor.h"
#include "cpu/KernelSupport.h"
#include "kernels/PointwiseMath.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace piperun {
namespace {

KernelLauncher &launcherOf(pipe_rank *r) { return *r->device->launcher(); }

/// In device memory, with an element count that matches the shape.
bool onDeviceAndWellFormed(const pipe_tensor *t) {
  if (t->rank < 0 || t->rank > PIPE_MAX_RANK ||
      !static_cast<const Storage *>(t->storage)->onDevice)
    return false;
  int64_t numel = 1;
  for (int d = 0; d < t->rank; ++d) {
    if (t->shape[d] < 0)
      return false;
    numel *= t->shape[d];
  }
  return numel == t->numel;
}

bool usableF32(pipe_rank *r, const pipe_tensor *t) {
  return t && r->tensors.count(t) && t->dtype == PIPE_F32 && onDeviceAndWellFormed(t);
}

/// A live tensor of this rank in its device memory, of a dtype the runtime
/// knows, whose element count matches its shape.
bool usableAny(pipe_rank *r, const pipe_tensor *t) {
  return t && t->dtype >= PIPE_F32 && t->dtype <= PIPE_BOOL && r->tensors.count(t) &&
         onDeviceAndWellFormed(t);
}

bool sameShape(const pipe_tensor *a, const pipe_tensor *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; ++d)
    if (a->shape[d] != b->shape[d])
      return false;
  return true;
}

bool fitsInt(int64_t value) { return value >= 0 && value <= std::numeric_limits<int>::max(); }

const float *in(const pipe_tensor *t) { return static_cast<const float *>(t->data); }
float *out(pipe_tensor *t) { return static_cast<float *>(t->data); }

bool unary(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y, double alpha,
           double beta) {
  if (fn < PIPE_RELU || fn > PIPE_SIGN || fn == PIPE_NOT || !usableF32(r, x) ||
      !usableF32(r, y) || !sameShape(x, y))
    return false;
  if (fn == PIPE_CLIP && std::isnan(alpha))
    alpha = -HUGE_VAL;
  if (fn == PIPE_CLIP && std::isnan(beta))
    beta = HUGE_VAL;
  if (x->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.unary(fn, in(x), out(y), x->numel, alpha, beta);
  launch.finish("unary");
  return true;
}

bool unaryGrad(pipe_rank *r, int32_t fn, const pipe_tensor *saved, const pipe_tensor *dy,
               pipe_tensor *dx, double alpha, double beta) {
  const char kind = pointwise::savedKind(fn);
  if (kind == '?' || !usableF32(r, dy) || !usableF32(r, dx) || !sameShape(dy, dx))
    return false;
  if (kind != '-' && (!usableF32(r, saved) || !sameShape(saved, dy)))
    return false;
  if (fn == PIPE_CLIP && std::isnan(alpha))
    alpha = -HUGE_VAL;
  if (fn == PIPE_CLIP && std::isnan(beta))
    beta = HUGE_VAL;
  if (dy->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.unaryGrad(fn, kind != '-' ? in(saved) : nullptr, in(dy), out(dx), dy->numel, alpha,
                   beta);
  launch.finish("unary_grad");
  return true;
}

/// The device's view of one of the CPU kernels' strided loops.
OperandPlan planOf(const cpu::StridedLoop &loop) {
  OperandPlan plan;
  plan.rank = loop.rank;
  plan.operands = loop.operands;
  for (int d = 0; d < loop.rank; ++d)
    plan.shape[d] = loop.shape[d];
  for (int k = 0; k < loop.operands; ++k) {
    plan.base[k] = loop.base[k];
    for (int d = 0; d < loop.rank; ++d)
      plan.stride[k][d] = loop.strides[k][d];
  }
  return plan;
}

/// Whether the device computes binary `fn` on inputs of `dtype`: every
/// function the CPU kernel has on F32, I64 and I32 but the integer divisions
/// (whose check for a zero divisor reads the data), comparisons on BOOL too,
/// AND and OR on BOOL.
bool binaryOnDevice(int32_t fn, int32_t dtype) {
  if (fn == PIPE_AND || fn == PIPE_OR)
    return dtype == PIPE_BOOL;
  const bool integer = dtype == PIPE_I64 || dtype == PIPE_I32;
  if (fn >= PIPE_EQUAL && fn <= PIPE_GREATER_EQUAL)
    return dtype == PIPE_F32 || integer || dtype == PIPE_BOOL;
  if (fn < PIPE_ADD || fn > PIPE_MIN)
    return false;
  if (dtype == PIPE_F32)
    return true;
  return integer && fn != PIPE_DIV && fn != PIPE_MOD && fn != PIPE_FMOD && fn != PIPE_POW;
}

bool binary(pipe_rank *r, int32_t fn, const pipe_tensor *a, const pipe_tensor *b,
            pipe_tensor *y) {
  if (!usableAny(r, a) || !usableAny(r, b) || !usableAny(r, y) || !binaryOnDevice(fn, a->dtype))
    return false;
  const cpu::StridedLoop loop = cpu::binaryChecks(r, fn, a, b, y);
  if (loop.numel() == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.binary(fn, a->dtype, planOf(loop), y->data, a->data, b->data);
  launch.finish("binary");
  return true;
}

bool where(pipe_rank *r, const pipe_tensor *cond, const pipe_tensor *x, const pipe_tensor *z,
           pipe_tensor *y) {
  if (!usableAny(r, cond) || !usableAny(r, x) || !usableAny(r, z) || !usableAny(r, y))
    return false;
  const cpu::StridedLoop loop = cpu::whereChecks(r, cond, x, z, y);
  if (loop.numel() == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.select(planOf(loop), dtypeSize(r, x->dtype), y->data,
                static_cast<const uint8_t *>(cond->data), x->data, z->data);
  launch.finish("where");
  return true;
}

bool fill(pipe_rank *r, pipe_tensor *y, double value) {
  if (!usableF32(r, y))
    return false;
  if (y->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.fill(out(y), static_cast<float>(value), y->numel);
  launch.finish("fill");
  return true;
}

/// Row-major y (m x n) = alpha op(a) op(b) + beta y, `batches` times, the
/// matrices stride* elements apart (0: one shared matrix). Row-major Y =
/// op(A) op(B) is column-major Y^T = op(B)^T op(A)^T: the same bytes, with the
/// operands swapped.
void rowMajorGemm(KernelLauncher &launch, bool transA, bool transB, int64_t m, int64_t n,
                  int64_t k, float alpha, const float *a, int64_t lda, int64_t strideA,
                  const float *b, int64_t ldb, int64_t strideB, float beta, float *y,
                  int64_t strideY, int64_t batches) {
  ColumnMajorGemm g;
  g.transA = transB;
  g.transB = transA;
  g.m = n;
  g.n = m;
  g.k = k;
  g.alpha = alpha;
  g.beta = beta;
  g.a = b;
  g.lda = ldb;
  g.strideA = strideB;
  g.b = a;
  g.ldb = lda;
  g.strideB = strideA;
  g.c = y;
  g.ldc = n;
  g.strideC = strideY;
  g.batches = batches;
  launch.gemm(g);
}

bool matmul(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, pipe_tensor *y) {
  if (!usableF32(r, a) || !usableF32(r, b) || !usableF32(r, y) || a->rank < 1 || b->rank < 1)
    return false;
  const int ra = a->rank, rb = b->rank;
  const int64_t m = ra >= 2 ? a->shape[ra - 2] : 1;
  const int64_t k = a->shape[ra - 1];
  const int64_t kb = rb >= 2 ? b->shape[rb - 2] : b->shape[0];
  const int64_t n = rb >= 2 ? b->shape[rb - 1] : 1;
  if (k != kb || m == 0 || n == 0 || k == 0)
    return false;
  // Batches: a's leading dims with b a matrix (folded into one GEMM), b's with
  // a a matrix (a shared), or the same leading dims on both.
  const int batchA = ra >= 2 ? ra - 2 : 0, batchB = rb >= 2 ? rb - 2 : 0;
  int64_t countA = 1, countB = 1;
  for (int d = 0; d < batchA; ++d)
    countA *= a->shape[d];
  for (int d = 0; d < batchB; ++d)
    countB *= b->shape[d];
  if (batchA > 0 && batchB > 0) {
    if (batchA != batchB)
      return false;
    for (int d = 0; d < batchA; ++d)
      if (a->shape[d] != b->shape[d])
        return false;
  }
  const int64_t batches = std::max(countA, countB);
  // y: the batch dims, then m unless a is 1-D, then n unless b is 1-D.
  const pipe_tensor *batched = batchA >= batchB ? a : b;
  const int batchRank = std::max(batchA, batchB);
  int expectedRank = batchRank + (ra >= 2) + (rb >= 2);
  if (y->rank != expectedRank)
    return false;
  for (int d = 0; d < batchRank; ++d)
    if (y->shape[d] != batched->shape[d])
      return false;
  if ((ra >= 2 && y->shape[batchRank] != m) || (rb >= 2 && y->shape[expectedRank - 1] != n))
    return false;
  const bool folded = batchB == 0;
  const int64_t rows = folded ? batches * m : m;
  if (!fitsInt(rows) || !fitsInt(n) || !fitsInt(k) || !fitsInt(batches))
    return false;
  KernelLauncher &launch = launcherOf(r);
  if (!launch.hasGemm())
    return false;
  if (folded)
    rowMajorGemm(launch, false, false, rows, n, k, 1.0f, in(a), k, 0, in(b), n, 0, 0.0f, out(y),
                 0, 1);
  else
    rowMajorGemm(launch, false, false, m, n, k, 1.0f, in(a), k, batchA > 0 ? m * k : 0, in(b), n,
                 k * n, 0.0f, out(y), m * n, batches);
  launch.finish("matmul");
  return true;
}

bool gemmKernel(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, const pipe_tensor *c,
                pipe_tensor *y, double alpha, double beta, int32_t transA, int32_t transB) {
  if (!usableF32(r, a) || !usableF32(r, b) || !usableF32(r, y) || a->rank != 2 || b->rank != 2 ||
      y->rank != 2)
    return false;
  const int64_t m = transA ? a->shape[1] : a->shape[0];
  const int64_t k = transA ? a->shape[0] : a->shape[1];
  const int64_t kb = transB ? b->shape[1] : b->shape[0];
  const int64_t n = transB ? b->shape[0] : b->shape[1];
  if (k != kb || y->shape[0] != m || y->shape[1] != n || m == 0 || n == 0 || k == 0 ||
      !fitsInt(m) || !fitsInt(n) || !fitsInt(k))
    return false;
  if (c && !usableF32(r, c))
    return false;
  const bool addC = c && beta != 0.0;
  int64_t rowStride = 0, columnStride = 0;
  if (addC) {
    // c broadcasts to [m, n]: [m, n], [1, n], [m, 1], [n], [1] or a scalar.
    if (c->rank > 2)
      return false;
    const int64_t rowsC = c->rank == 2 ? c->shape[0] : 1;
    const int64_t columnsC = c->rank >= 1 ? c->shape[c->rank - 1] : 1;
    if ((rowsC != m && rowsC != 1) || (columnsC != n && columnsC != 1))
      return false;
    rowStride = rowsC == 1 ? 0 : columnsC;
    columnStride = columnsC == 1 ? 0 : 1;
  }
  KernelLauncher &launch = launcherOf(r);
  if (!launch.hasGemm())
    return false;
  if (addC)
    launch.broadcastScaled(in(c), rowStride, columnStride, static_cast<float>(beta), out(y), m,
                           n);
  rowMajorGemm(launch, transA != 0, transB != 0, m, n, k, static_cast<float>(alpha), in(a),
               a->shape[1], 0, in(b), b->shape[1], 0, addC ? 1.0f : 0.0f, out(y), 0, 1);
  launch.finish("gemm");
  return true;
}

/// The [outer, axis, inner] view of `a` for softmax along `axis`, when a and b
/// are usable f32 tensors of one shape and the axis is one of their dims.
bool axisLayout(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, int64_t axis,
                AxisLayout &l) {
  if (!usableF32(r, a) || !usableF32(r, b) || !sameShape(a, b) || axis < 0 || axis >= a->rank)
    return false;
  l = AxisLayout::of(a->rank, a->shape, axis);
  return true;
}

bool softmaxForward(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis,
                    bool logForm) {
  AxisLayout l;
  if (!axisLayout(r, x, y, axis, l))
    return false;
  if (x->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.softmax(l, in(x), out(y), logForm);
  launch.finish(logForm ? "log_softmax" : "softmax");
  return true;
}

bool softmaxBackward(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy, pipe_tensor *dx,
                     int64_t axis, bool logForm) {
  AxisLayout l;
  if (!axisLayout(r, y, dy, axis, l) || !usableF32(r, dx) || !sameShape(y, dx))
    return false;
  if (y->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.softmaxGrad(l, in(y), in(dy), out(dx), logForm);
  launch.finish(logForm ? "log_softmax_grad" : "softmax_grad");
  return true;
}

bool softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  return softmaxForward(r, x, y, axis, false);
}
bool logSoftmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  return softmaxForward(r, x, y, axis, true);
}
bool softmaxGrad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy, pipe_tensor *dx,
                 int64_t axis) {
  return softmaxBackward(r, y, dy, dx, axis, false);
}
bool logSoftmaxGrad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy, pipe_tensor *dx,
                    int64_t axis) {
  return softmaxBackward(r, y, dy, dx, axis, true);
}

/// Runs the CPU kernel's strided loop (operand 0 the output) on the device.
bool copyOnDevice(pipe_rank *r, const char *op, const cpu::StridedLoop &loop, void *dst,
                  const void *src, size_t elementSize) {
  if (loop.numel() == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.copyStrided(planOf(loop), dst, src, elementSize);
  launch.finish(op);
  return true;
}

bool reduce(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y, pipe_ints axes) {
  if (fn < PIPE_REDUCE_SUM || fn > PIPE_REDUCE_PROD || !usableF32(r, x) || !usableF32(r, y))
    return false;
  const cpu::ReduceShape shape = cpu::reduceChecks(r, fn, x, y, axes);
  if (shape.keptVolume == 0 || shape.reduceCount == 0)
    return false; // the CPU kernel's identities and errors
  ReduceGeometry g;
  int64_t stride = 1;
  for (int d = x->rank - 1; d >= 0; --d) {
    // Filled from the last dim; shifted to the front below.
    if (shape.reduced[d]) {
      g.reducedShape[PIPE_MAX_RANK - 1 - g.reducedRank] = x->shape[d];
      g.reducedStride[PIPE_MAX_RANK - 1 - g.reducedRank++] = stride;
    } else {
      g.keptShape[PIPE_MAX_RANK - 1 - g.keptRank] = x->shape[d];
      g.keptStride[PIPE_MAX_RANK - 1 - g.keptRank++] = stride;
    }
    stride *= x->shape[d];
  }
  std::copy(g.reducedShape + PIPE_MAX_RANK - g.reducedRank, g.reducedShape + PIPE_MAX_RANK,
            g.reducedShape);
  std::copy(g.reducedStride + PIPE_MAX_RANK - g.reducedRank, g.reducedStride + PIPE_MAX_RANK,
            g.reducedStride);
  std::copy(g.keptShape + PIPE_MAX_RANK - g.keptRank, g.keptShape + PIPE_MAX_RANK, g.keptShape);
  std::copy(g.keptStride + PIPE_MAX_RANK - g.keptRank, g.keptStride + PIPE_MAX_RANK,
            g.keptStride);
  g.outputs = shape.keptVolume;
  g.reduceCount = shape.reduceCount;
  KernelLauncher &launch = launcherOf(r);
  launch.reduce(fn, g, in(x), out(y));
  launch.finish("reduce");
  return true;
}

bool transpose(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints perm) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  const cpu::StridedLoop loop = cpu::transposeLoop(r, x, y, perm);
  return copyOnDevice(r, "transpose", loop, y->data, x->data, dtypeSize(r, x->dtype));
}

bool slice(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
           pipe_ints steps) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  const cpu::StridedLoop loop = cpu::sliceLoop(r, x, y, starts, steps);
  return copyOnDevice(r, "slice", loop, y->data, x->data, dtypeSize(r, x->dtype));
}

bool sliceAssign(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
                 pipe_ints steps) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  const cpu::StridedLoop loop = cpu::sliceAssignLoop(r, x, y, starts, steps);
  return copyOnDevice(r, "slice_assign", loop, y->data, x->data, dtypeSize(r, x->dtype));
}

bool expand(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  const cpu::StridedLoop loop = cpu::expandLoop(r, x, y);
  return copyOnDevice(r, "expand", loop, y->data, x->data, dtypeSize(r, x->dtype));
}

/// Usable f32 tensors, or absent.
bool usableOrAbsent(pipe_rank *r, std::initializer_list<const pipe_tensor *> tensors) {
  for (const pipe_tensor *t : tensors)
    if (t && !usableF32(r, t))
      return false;
  return true;
}

const float *inOrNull(const pipe_tensor *t) { return t ? in(t) : nullptr; }
float *outOrNull(pipe_tensor *t) { return t ? out(t) : nullptr; }

bool trilu(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t k, int32_t upper) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  cpu::triluChecks(r, x, y, upper);
  if (x->numel == 0)
    return true;
  const int64_t rows = x->shape[x->rank - 2], columns = x->shape[x->rank - 1];
  KernelLauncher &launch = launcherOf(r);
  launch.trilu(x->data, y->data, dtypeSize(r, x->dtype), x->numel / (rows * columns), rows,
               columns, k, upper != 0);
  launch.finish("trilu");
  return true;
}

/// Host bytes of a small device tensor (indices, labels): read once by the
/// host for the CPU kernel's checks of every value.
std::vector<char> hostCopy(pipe_rank *r, const pipe_tensor *t) {
  std::vector<char> bytes(static_cast<size_t>(t->numel) * dtypeSize(r, t->dtype) + 1);
  if (t->numel > 0)
    downloadTensor(r, bytes.data(), t);
  return bytes;
}

/// Gather's indices checked and normalised into [0, size) by the host, as
/// the CPU kernel does, then uploaded into device workspace.
class DeviceIndices {
public:
  DeviceIndices(pipe_rank *r, const char *op, const pipe_tensor *indices,
                const GatherGeometry &g, const char *dataName, const pipe_tensor *data,
                int64_t axis)
      : scratch_(r, PIPE_I64, g.count) {
    const std::vector<char> raw = hostCopy(r, indices);
    std::vector<int64_t> index(static_cast<size_t>(std::max<int64_t>(g.count, 1)));
    cpu::normaliseIndices(r, op, indices, raw.data(), g, dataName, data, axis, index.data());
    uploadTensor(r, scratch_.get(), index.data());
  }
  const int64_t *data() const { return scratch_.as<int64_t>(); }

private:
  cpu::Scratch scratch_;
};

bool gather(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *indices, pipe_tensor *y,
            int64_t axis) {
  if (!usableAny(r, x) || !usableAny(r, y) || !usableAny(r, indices) || x->dtype != y->dtype)
    return false;
  const GatherGeometry g = cpu::gatherChecks(r, "gather", "x", x, indices, "y", y, axis);
  const DeviceIndices index(r, "gather", indices, g, "x", x, axis);
  if (y->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.gather(g, index.data(), x->data, y->data, dtypeSize(r, x->dtype));
  launch.finish("gather");
  return true;
}

bool gatherGrad(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices, pipe_tensor *dx,
                int64_t axis) {
  if (!usableF32(r, dy) || !usableF32(r, dx) || !usableAny(r, indices))
    return false;
  const GatherGeometry g = cpu::gatherChecks(r, "gather_grad", "dx", dx, indices, "dy", dy, axis);
  const DeviceIndices index(r, "gather_grad", indices, g, "dx", dx, axis);
  if (dx->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.gatherGrad(g, index.data(), in(dy), out(dx));
  launch.finish("gather_grad");
  return true;
}

bool dropout(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *mask, double ratio,
             int32_t microbatch, int64_t key) {
  if (!usableF32(r, x) || !usableF32(r, y) || (mask && !usableAny(r, mask)))
    return false;
  cpu::dropoutChecks(r, x, y, mask, ratio);
  if (x->numel == 0)
    return true;
  const uint64_t stream = streamKey(runSeed(r), currentStep(r), microbatch, key);
  KernelLauncher &launch = launcherOf(r);
  launch.dropout(in(x), out(y), mask ? static_cast<uint8_t *>(mask->data) : nullptr, x->numel,
                 stream, ratio, dropoutScale(ratio));
  launch.finish("dropout");
  return true;
}

/// Labels the device reads as they are: I64 (I32 ones run staged).
bool usableLabels(pipe_rank *r, const pipe_tensor *labels) {
  return usableAny(r, labels) && labels->dtype == PIPE_I64;
}

bool softmaxCrossEntropy(pipe_rank *r, const pipe_tensor *logits, const pipe_tensor *labels,
                         pipe_tensor *loss, pipe_tensor *logProb, int64_t ignoreIndex,
                         double scale) {
  if (!usableF32(r, logits) || !usableF32(r, loss) || !usableOrAbsent(r, {logProb}) ||
      !usableLabels(r, labels))
    return false;
  const std::vector<char> values = hostCopy(r, labels);
  const LossGeometry g = cpu::crossEntropyChecks(r, logits, labels, values.data(), loss, logProb,
                                                 ignoreIndex, scale);
  cpu::Scratch picked(r, PIPE_F64, g.positions);
  KernelLauncher &launch = launcherOf(r);
  launch.crossEntropy(g, in(logits), static_cast<const int64_t *>(labels->data),
                      outOrNull(logProb), picked.as<double>(), out(loss));
  launch.finish("softmax_cross_entropy");
  return true;
}

bool softmaxCrossEntropyGrad(pipe_rank *r, const pipe_tensor *dloss, const pipe_tensor *logProb,
                             const pipe_tensor *labels, pipe_tensor *dlogits,
                             int64_t ignoreIndex, double scale) {
  if (!usableF32(r, dloss) || !usableF32(r, logProb) || !usableF32(r, dlogits) ||
      !usableLabels(r, labels))
    return false;
  const std::vector<char> values = hostCopy(r, labels);
  const LossGeometry g = cpu::crossEntropyGradChecks(r, dloss, logProb, labels, values.data(),
                                                     dlogits, ignoreIndex, scale);
  if (g.positions == 0 || g.classes == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.crossEntropyGrad(g, in(dloss), in(logProb), static_cast<const int64_t *>(labels->data),
                          out(dlogits));
  launch.finish("softmax_cross_entropy_grad");
  return true;
}

bool layerNorm(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
               const pipe_tensor *bias, pipe_tensor *y, pipe_tensor *mean, pipe_tensor *invstd,
               int64_t axis, double epsilon) {
  if (!usableF32(r, x) || !usableF32(r, scale) || !usableF32(r, y) ||
      !usableOrAbsent(r, {bias, mean, invstd}))
    return false;
  // The CPU kernel's checks (shapes only), with its messages.
  const cpu::RowLayout l = cpu::layerNormChecks(r, x, scale, bias, y, mean, invstd, axis);
  if (l.rows == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.layerNorm(l.rows, l.width, in(x), in(scale), inOrNull(bias), epsilon, out(y),
                   outOrNull(mean), outOrNull(invstd));
  launch.finish("layer_norm");
  return true;
}

bool layerNormGrad(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                   const pipe_tensor *mean, const pipe_tensor *invstd, const pipe_tensor *dy,
                   pipe_tensor *dx, pipe_tensor *dscale, pipe_tensor *dbias, int64_t axis) {
  if (!usableF32(r, x) || !usableF32(r, scale) || !usableF32(r, mean) ||
      !usableF32(r, invstd) || !usableF32(r, dy) || !usableOrAbsent(r, {dx, dscale, dbias}))
    return false;
  const cpu::RowLayout l =
      cpu::layerNormGradChecks(r, x, scale, mean, invstd, dy, dx, dscale, dbias, axis);
  if (l.width == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.layerNormGrad(l.rows, l.width, in(x), in(dy), in(scale), in(mean), in(invstd),
                       outOrNull(dx), outOrNull(dscale), outOrNull(dbias));
  launch.finish("layer_norm_grad");
  return true;
}

bool accumulate(pipe_rank *r, pipe_tensor *into, const pipe_tensor *from) {
  if (!usableF32(r, into) || !usableF32(r, from) || into->numel != from->numel)
    return false;
  if (into->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.accumulate(out(into), in(from), into->numel);
  launch.finish("accumulate_grad");
  return true;
}

bool update(pipe_rank *r, Parameter &p) {
  if (!usableF32(r, p.value) || !usableF32(r, p.gradient))
    return false;
  const OptimizerConfig &o = r->optimizer;
  const int64_t n = p.value->numel;
  if (n == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  switch (o.kind) {
  case PIPE_SGD:
  case PIPE_MOMENTUM:
    launch.sgd(out(p.value), in(p.gradient), o.kind == PIPE_MOMENTUM ? out(p.state[0]) : nullptr,
               n, static_cast<float>(o.lr), static_cast<float>(o.weightDecay),
               static_cast<float>(o.momentum), p.updates == 1);
    break;
  case PIPE_ADAM:
  case PIPE_ADAMW: {
    const AdamStep s = adamStepOf(o, p.updates);
    launch.adam(out(p.value), in(p.gradient), out(p.state[0]), out(p.state[1]), n, s);
    break;
  }
  default:
    return false;
  }
  launch.finish("optimizer update");
  return true;
}

} // namespace

const DeviceKernels &nativeKernelTable() {
  static const DeviceKernels kernels = [] {
    DeviceKernels k;
    k.unary = unary;
    k.unaryGrad = unaryGrad;
    k.binary = binary;
    k.where = where;
    k.fill = fill;
    k.matmul = matmul;
    k.gemm = gemmKernel;
    k.softmax = softmax;
    k.logSoftmax = logSoftmax;
    k.softmaxGrad = softmaxGrad;
    k.logSoftmaxGrad = logSoftmaxGrad;
    k.reduce = reduce;
    k.transpose = transpose;
    k.slice = slice;
    k.sliceAssign = sliceAssign;
    k.expand = expand;
    k.trilu = trilu;
    k.gather = gather;
    k.gatherGrad = gatherGrad;
    k.dropout = dropout;
    k.softmaxCrossEntropy = softmaxCrossEntropy;
    k.softmaxCrossEntropyGrad = softmaxCrossEntropyGrad;
    k.layerNorm = layerNorm;
    k.layerNormGrad = layerNormGrad;
    k.accumulate = accumulate;
    k.update = update;
    return k;
  }();
  return kernels;
}

} // namespace piperun
