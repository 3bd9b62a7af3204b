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
#include <cstring>
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

bool pad(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints pads, int32_t mode,
         double value) {
  if (!usableAny(r, x) || !usableAny(r, y))
    return false;
  const PadGeometry g = cpu::padChecks(r, x, y, pads, mode);
  if (y->numel == 0)
    return true;
  uint64_t fill = 0;
  cpu::dispatchDtype<cpu::kAnyDtype>(r, "pad", "x", x->dtype, [&](auto tag) {
    const auto constant = cpu::convertValue<decltype(tag)>(value);
    std::memcpy(&fill, &constant, sizeof(constant));
  });
  KernelLauncher &launch = launcherOf(r);
  launch.pad(g, x->data, y->data, dtypeSize(r, x->dtype), fill);
  launch.finish("pad");
  return true;
}

bool cast(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) {
  // F16 and BF16 have no kernel: the CPU kernel refuses them.
  if (!usableAny(r, x) || !usableAny(r, y) || !(cpu::kAnyDtype & cpu::bit(x->dtype)) ||
      !(cpu::kAnyDtype & cpu::bit(y->dtype)))
    return false;
  cpu::requireSameShape(r, "cast", "x", x, "y", y);
  if (x->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.cast(x->dtype, y->dtype, x->data, y->data, x->numel);
  launch.finish("cast");
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
  const uint64_t stream = streamKey(runSeed(r), currentStep(r), stepMicrobatch(r, microbatch), key);
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

/// A convolution's GEMMs and column matrix: the cuBLAS path or nothing.
bool convUsable(pipe_rank *r, std::initializer_list<const pipe_tensor *> tensors) {
  for (const pipe_tensor *t : tensors)
    if (!usableF32(r, t))
      return false;
  return launcherOf(r).hasGemm();
}

/// GEMM sizes cuBLAS takes (an empty dimension runs staged).
bool convGemmSizes(const ConvGeometry &g) {
  for (int64_t size : {g.batch, g.outPerGroup, g.outVolume, g.columnRows(), g.inVolume})
    if (size < 1 || !fitsInt(size))
      return false;
  return true;
}

/// The column matrix of sample n, group gr: x's own channels for a pointwise
/// kernel, else im2col into `columns`.
const float *columnMatrix(KernelLauncher &launch, const ConvGeometry &g, const float *x,
                          int64_t n, int64_t gr, const cpu::Scratch &columns) {
  const float *xGroup = x + (n * g.channels + gr * g.channelsPerGroup) * g.inVolume;
  if (g.isPointwise())
    return xGroup;
  launch.im2col(g, xGroup, columns.as<float>());
  return columns.as<float>();
}

/// `pass` of `g` by the device's convolution library (cuDNN), its workspace
/// counted as the rank's: false when the device has none or it does not take
/// the geometry.
bool libraryConv(pipe_rank *r, ConvPass pass, const ConvGeometry &g, const float *a,
                 const float *b, float *out) {
  KernelLauncher &launch = launcherOf(r);
  const int64_t bytes = launch.libraryConvWorkspace(pass, g);
  if (bytes < 0)
    return false;
  cpu::Scratch workspace(r, PIPE_F32, (bytes + 3) / 4);
  launch.libraryConv(pass, g, a, b, out, bytes > 0 ? workspace.as<float>() : nullptr, bytes);
  ++r->libraryConvCalls;
  return true;
}

/// Conv by the device's library, or as the CPU kernel computes it: per
/// (sample, group) the column matrix (x itself for a pointwise kernel), then
/// y_g = w_g col. The bias is added last.
bool conv(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *w, const pipe_tensor *bias,
          pipe_tensor *y, pipe_ints strides, pipe_ints pads, pipe_ints dilations, int64_t group) {
  if (!convUsable(r, {x, w, y}) || (bias && !usableF32(r, bias)))
    return false;
  const ConvGeometry g =
      cpu::convChecks(r, "conv", x, "x", w, "w", y, "y", strides, pads, dilations, group);
  cpu::convBiasChecks(r, bias, g);
  if (!convGemmSizes(g))
    return false;
  KernelLauncher &launch = launcherOf(r);
  if (!libraryConv(r, ConvPass::Forward, g, in(x), in(w), out(y))) {
    const bool pointwise = g.isPointwise();
    const int64_t rows = g.columnRows();
    cpu::Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t gr = 0; gr < g.group; ++gr) {
        const float *col = columnMatrix(launch, g, in(x), n, gr, columns);
        rowMajorGemm(launch, false, false, g.outPerGroup, g.outVolume, rows, 1.0f,
                     in(w) + gr * g.outPerGroup * rows, rows, 0, col, g.outVolume, 0, 0.0f,
                     out(y) + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume, 0, 1);
      }
  }
  if (bias) {
    // y [N, M, out] += bias [M], broadcast over samples and positions.
    OperandPlan plan;
    plan.rank = 3;
    plan.operands = 3;
    const int64_t shape[3] = {g.batch, g.outChannels, g.outVolume};
    const int64_t dense[3] = {g.outChannels * g.outVolume, g.outVolume, 1};
    for (int d = 0; d < 3; ++d) {
      plan.shape[d] = shape[d];
      plan.stride[0][d] = plan.stride[1][d] = dense[d];
    }
    plan.stride[2][1] = 1;
    launch.binary(PIPE_ADD, PIPE_F32, plan, out(y), out(y), in(bias));
  }
  launch.finish("conv");
  return true;
}

/// dx by the device's library, or per (sample, group) col = w_g^T dy_g, then col2im
/// (pointwise: col is dx_g).
bool convGradInput(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *w, pipe_tensor *dx,
                   pipe_ints strides, pipe_ints pads, pipe_ints dilations, int64_t group) {
  if (!convUsable(r, {dy, w, dx}))
    return false;
  const ConvGeometry g = cpu::convChecks(r, "conv_grad_input", dx, "dx", w, "w", dy, "dy",
                                         strides, pads, dilations, group);
  if (!convGemmSizes(g))
    return false;
  KernelLauncher &launch = launcherOf(r);
  if (libraryConv(r, ConvPass::GradInput, g, in(dy), in(w), out(dx))) {
    launch.finish("conv_grad_input");
    return true;
  }
  const bool pointwise = g.isPointwise();
  const int64_t rows = g.columnRows();
  cpu::Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      float *dxGroup = out(dx) + (n * g.channels + gr * g.channelsPerGroup) * g.inVolume;
      float *col = pointwise ? dxGroup : columns.as<float>();
      rowMajorGemm(launch, true, false, rows, g.outVolume, g.outPerGroup, 1.0f,
                   in(w) + gr * g.outPerGroup * rows, rows, 0,
                   in(dy) + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume, g.outVolume,
                   0, 0.0f, col, 0, 1);
      if (!pointwise)
        launch.col2im(g, col, dxGroup);
    }
  launch.finish("conv_grad_input");
  return true;
}

/// dw by the device's library, or zero, then dw_g += dy_g col^T per sample in order.
bool convGradWeight(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *dy, pipe_tensor *dw,
                    pipe_ints strides, pipe_ints pads, pipe_ints dilations, int64_t group) {
  if (!convUsable(r, {x, dy, dw}))
    return false;
  const ConvGeometry g = cpu::convChecks(r, "conv_grad_weight", x, "x", dw, "dw", dy, "dy",
                                         strides, pads, dilations, group);
  if (!convGemmSizes(g))
    return false;
  KernelLauncher &launch = launcherOf(r);
  if (libraryConv(r, ConvPass::GradWeight, g, in(x), in(dy), out(dw))) {
    launch.finish("conv_grad_weight");
    return true;
  }
  const bool pointwise = g.isPointwise();
  const int64_t rows = g.columnRows();
  launch.fill(out(dw), 0.0f, dw->numel);
  cpu::Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const float *col = columnMatrix(launch, g, in(x), n, gr, columns);
      rowMajorGemm(launch, false, true, g.outPerGroup, rows, g.outVolume, 1.0f,
                   in(dy) + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume, g.outVolume,
                   0, col, g.outVolume, 0, 1.0f, out(dw) + gr * g.outPerGroup * rows, 0, 1);
    }
  launch.finish("conv_grad_weight");
  return true;
}

bool maxPool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *indices,
             pipe_ints kernel, pipe_ints strides, pipe_ints pads, pipe_ints dilations) {
  if (!usableF32(r, x) || !usableF32(r, y) || (indices && !usableAny(r, indices)))
    return false;
  const PoolGeometry g =
      cpu::poolChecks(r, "max_pool", x, "x", y, "y", kernel, strides, pads, &dilations);
  cpu::maxPoolIndicesChecks(r, y, indices);
  if (y->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.maxPool(g, in(x), out(y), indices ? static_cast<int64_t *>(indices->data) : nullptr);
  launch.finish("max_pool");
  return true;
}

/// The indices are read by the host for the CPU kernel's checks; where one
/// leaves its (n, c) plane the CPU kernel runs staged (one serial scatter).
bool maxPoolGrad(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                 pipe_tensor *dx) {
  if (!usableF32(r, dy) || !usableF32(r, dx) || !usableAny(r, indices) ||
      indices->dtype != PIPE_I64)
    return false;
  const std::vector<char> raw = hostCopy(r, indices);
  if (!cpu::maxPoolGradChecks(r, dy, indices, raw.data(), dx))
    return false;
  if (dx->numel == 0)
    return true;
  const int64_t planes = dy->shape[0] * dy->shape[1];
  KernelLauncher &launch = launcherOf(r);
  launch.maxPoolGrad(planes, dy->numel / planes, dx->numel / planes, in(dy),
                     static_cast<const int64_t *>(indices->data), out(dx));
  launch.finish("max_pool_grad");
  return true;
}

bool averagePool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints kernel,
                 pipe_ints strides, pipe_ints pads, int32_t countIncludePad) {
  if (!usableF32(r, x) || !usableF32(r, y))
    return false;
  const PoolGeometry g =
      cpu::poolChecks(r, "average_pool", x, "x", y, "y", kernel, strides, pads, nullptr);
  if (y->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.averagePool(g, in(x), out(y), countIncludePad != 0);
  launch.finish("average_pool");
  return true;
}

bool averagePoolGrad(pipe_rank *r, const pipe_tensor *dy, pipe_tensor *dx, pipe_ints kernel,
                     pipe_ints strides, pipe_ints pads, int32_t countIncludePad) {
  if (!usableF32(r, dy) || !usableF32(r, dx))
    return false;
  const PoolGeometry g = cpu::poolChecks(r, "average_pool_grad", dx, "dx", dy, "dy", kernel,
                                         strides, pads, nullptr);
  if (dx->numel == 0)
    return true;
  KernelLauncher &launch = launcherOf(r);
  launch.averagePoolGrad(g, in(dy), out(dx), countIncludePad != 0);
  launch.finish("average_pool_grad");
  return true;
}

bool batchNormTrain(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                    const pipe_tensor *bias, pipe_tensor *runningMean, pipe_tensor *runningVar,
                    pipe_tensor *y, pipe_tensor *savedMean, pipe_tensor *savedInvstd,
                    double epsilon, double momentum) {
  if (!usableF32(r, x) || !usableF32(r, scale) || !usableF32(r, bias) || !usableF32(r, y) ||
      !usableOrAbsent(r, {runningMean, runningVar, savedMean, savedInvstd}))
    return false;
  const ChannelLayout l = cpu::batchNormTrainChecks(r, x, scale, bias, runningMean, runningVar, y,
                                                    savedMean, savedInvstd);
  if (l.channels == 0 || l.count() == 0)
    return true;
  cpu::Scratch ab(r, PIPE_F64, 2 * l.channels);
  KernelLauncher &launch = launcherOf(r);
  launch.batchNormTrain(l, in(x), in(scale), in(bias), epsilon, momentum, outOrNull(savedMean),
                        outOrNull(savedInvstd), outOrNull(runningMean), outOrNull(runningVar),
                        ab.as<double>(), out(y));
  launch.finish("batch_norm_train");
  return true;
}

bool batchNormInfer(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                    const pipe_tensor *bias, const pipe_tensor *mean, const pipe_tensor *var,
                    pipe_tensor *y, double epsilon) {
  if (!usableF32(r, x) || !usableF32(r, scale) || !usableF32(r, bias) || !usableF32(r, mean) ||
      !usableF32(r, var) || !usableF32(r, y))
    return false;
  const ChannelLayout l = cpu::batchNormInferChecks(r, x, scale, bias, mean, var, y);
  if (x->numel == 0)
    return true;
  cpu::Scratch ab(r, PIPE_F64, 2 * l.channels);
  KernelLauncher &launch = launcherOf(r);
  launch.batchNormInfer(l, in(x), in(scale), in(bias), in(mean), in(var), epsilon,
                        ab.as<double>(), out(y));
  launch.finish("batch_norm_infer");
  return true;
}

bool batchNormGrad(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                   const pipe_tensor *savedMean, const pipe_tensor *savedInvstd,
                   const pipe_tensor *dy, pipe_tensor *dx, pipe_tensor *dscale,
                   pipe_tensor *dbias) {
  if (!usableF32(r, x) || !usableF32(r, scale) || !usableF32(r, savedMean) ||
      !usableF32(r, savedInvstd) || !usableF32(r, dy) || !usableOrAbsent(r, {dx, dscale, dbias}))
    return false;
  const ChannelLayout l = cpu::batchNormGradChecks(r, x, scale, savedMean, savedInvstd, dy, dx,
                                                   dscale, dbias);
  if (l.channels == 0)
    return true;
  cpu::Scratch terms(r, PIPE_F64, 5 * l.channels);
  KernelLauncher &launch = launcherOf(r);
  launch.batchNormGrad(l, in(x), in(dy), in(scale), in(savedMean), in(savedInvstd),
                       terms.as<double>(), outOrNull(dx), outOrNull(dscale), outOrNull(dbias));
  launch.finish("batch_norm_grad");
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
    k.pad = pad;
    k.cast = cast;
    k.trilu = trilu;
    k.gather = gather;
    k.gatherGrad = gatherGrad;
    k.dropout = dropout;
    k.softmaxCrossEntropy = softmaxCrossEntropy;
    k.softmaxCrossEntropyGrad = softmaxCrossEntropyGrad;
    k.conv = conv;
    k.convGradInput = convGradInput;
    k.convGradWeight = convGradWeight;
    k.maxPool = maxPool;
    k.maxPoolGrad = maxPoolGrad;
    k.averagePool = averagePool;
    k.averagePoolGrad = averagePoolGrad;
    k.batchNormTrain = batchNormTrain;
    k.batchNormInfer = batchNormInfer;
    k.batchNormGrad = batchNormGrad;
    k.layerNorm = layerNorm;
    k.layerNormGrad = layerNormGrad;
    k.accumulate = accumulate;
    k.update = update;
    return k;
  }();
  return kernels;
}

} // namespace piperun
