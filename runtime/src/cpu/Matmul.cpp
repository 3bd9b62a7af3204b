//===- Matmul.cpp - numpy matmul and ONNX Gemm through cblas_sgemm --------===//
//
// F32 matrix products, one sgemm per matrix: numpy batch broadcasting, and
// batches folded into one call when the right operand is shared.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"
#include "Run.h"

#include <cblas.h>

#include <cstdlib>
#include <iterator>

using namespace piperun;
using namespace piperun::cpu;

void piperun::cpu::sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
           const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *y) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      y[i] = beta == 0.0f ? 0.0f : beta * y[i];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, y, static_cast<int>(n));
}

void piperun::cpu::setBlasThreads(int threads) { openblas_set_num_threads(std::max(1, threads)); }

std::string piperun::blasKernels() {
  const char *name = openblas_get_corename();
  return name ? name : "";
}

std::string piperun::betterBlasKernels() {
  if (std::getenv("OPENBLAS_CORETYPE"))
    return "";
  // The kernel sets of OpenBLAS's x86-64 builds that use no AVX.
  static const char *const kSse[] = {"Prescott", "Core2",   "Penryn",       "Dunnington", "Nehalem",
                                     "Atom",     "Opteron", "Opteron_SSE3", "Barcelona",  "Bobcat"};
  const std::string chosen = blasKernels();
  if (std::find(std::begin(kSse), std::end(kSse), chosen) == std::end(kSse))
    return "";
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  if (avx512 && __builtin_cpu_supports("avx512bf16"))
    return "Cooperlake";
  if (avx512)
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return "";
}

namespace {

void requireBlasSize(pipe_rank *r, const char *op, int64_t m, int64_t n, int64_t k) {
  const int64_t limit = std::numeric_limits<int>::max();
  if (m > limit || n > limit || k > limit)
    fail(r, "%s: matrix dims M=%lld N=%lld K=%lld exceed the BLAS int range", op,
         static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
}

} // namespace

extern "C" {

void pipe_k_matmul(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, pipe_tensor *y) {
  PIPE_DEVICE_KERNEL(r, matmul, pipe_k_matmul, a, b, y);
  const char *op = "matmul";
  requireTensor(r, op, "a", a);
  requireTensor(r, op, "b", b);
  requireTensor(r, op, "y", y);
  requireDtype(r, op, "a", a, PIPE_F32);
  requireDtype(r, op, "b", b, PIPE_F32);
  requireDtype(r, op, "y", y, PIPE_F32);
  requireMinRank(r, op, "a", a, 1);
  requireMinRank(r, op, "b", b, 1);

  // 1-D operands are promoted: a [K] -> [1, K], b [K] -> [K, 1].
  const int ra = a->rank, rb = b->rank;
  const int64_t m = ra >= 2 ? a->shape[ra - 2] : 1;
  const int64_t k = a->shape[ra - 1];
  const int64_t kb = rb >= 2 ? b->shape[rb - 2] : b->shape[0];
  const int64_t n = rb >= 2 ? b->shape[rb - 1] : 1;
  if (k != kb)
    fail(r, "%s: inner dims differ: 'a' %s has K=%lld, 'b' %s has K=%lld", op,
         shapeText(a).c_str(), static_cast<long long>(k), shapeText(b).c_str(),
         static_cast<long long>(kb));
  requireBlasSize(r, op, m, n, k);

  // Batch dims: numpy broadcast of a's and b's leading dims.
  const int batchA = ra >= 2 ? ra - 2 : 0, batchB = rb >= 2 ? rb - 2 : 0;
  const int batchRank = std::max(batchA, batchB);
  int64_t batchShape[PIPE_MAX_RANK] = {}, strideA[PIPE_MAX_RANK] = {},
          strideB[PIPE_MAX_RANK] = {};
  int64_t countA = 1, countB = 1;
  {
    int64_t stepA = m * k, stepB = k * n;
    for (int d = batchRank - 1; d >= 0; --d) {
      const int da = d - (batchRank - batchA), db = d - (batchRank - batchB);
      const int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
      if (sa != sb && sa != 1 && sb != 1)
        fail(r, "%s: batch dims do not broadcast: 'a' %s, 'b' %s", op, shapeText(a).c_str(),
             shapeText(b).c_str());
      batchShape[d] = std::max(sa, sb);
      if (sa == 0 || sb == 0)
        batchShape[d] = 0;
      strideA[d] = sa == 1 ? 0 : stepA;
      strideB[d] = sb == 1 ? 0 : stepB;
      stepA *= sa;
      stepB *= sb;
      countA *= sa;
      countB *= sb;
    }
  }
  int64_t expected[PIPE_MAX_RANK + 2];
  int expectedRank = 0;
  for (int d = 0; d < batchRank; ++d)
    expected[expectedRank++] = batchShape[d];
  if (ra >= 2)
    expected[expectedRank++] = m;
  if (rb >= 2)
    expected[expectedRank++] = n;
  requireShape(r, op, "y", y, expectedRank, expected);

  const float *pa = static_cast<const float *>(a->data);
  const float *pb = static_cast<const float *>(b->data);
  float *py = static_cast<float *>(y->data);
  int64_t batches = 1;
  for (int d = 0; d < batchRank; ++d)
    batches *= batchShape[d];
  if (batches == 0)
    return;
  if (countB == 1 && countA == batches) {
    // One right operand for every batch: a's batches are rows of one matrix.
    requireBlasSize(r, op, batches * m, n, k);
    sgemm(false, false, batches * m, n, k, 1.0f, pa, k, pb, n, 0.0f, py);
    return;
  }
  int64_t index[PIPE_MAX_RANK] = {};
  for (int64_t batch = 0; batch < batches; ++batch) {
    int64_t offsetA = 0, offsetB = 0;
    for (int d = 0; d < batchRank; ++d) {
      offsetA += index[d] * strideA[d];
      offsetB += index[d] * strideB[d];
    }
    sgemm(false, false, m, n, k, 1.0f, pa + offsetA, k, pb + offsetB, n, 0.0f,
          py + batch * m * n);
    for (int d = batchRank - 1; d >= 0; --d) {
      if (++index[d] < batchShape[d])
        break;
      index[d] = 0;
    }
  }
}

void pipe_k_gemm(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, const pipe_tensor *c,
                 pipe_tensor *y, double alpha, double beta, int32_t trans_a, int32_t trans_b) {
  PIPE_DEVICE_KERNEL(r, gemm, pipe_k_gemm, a, b, c, y, alpha, beta, trans_a, trans_b);
  const char *op = "gemm";
  requireTensor(r, op, "a", a);
  requireTensor(r, op, "b", b);
  requireTensor(r, op, "y", y);
  requireDtype(r, op, "a", a, PIPE_F32);
  requireDtype(r, op, "b", b, PIPE_F32);
  requireDtype(r, op, "y", y, PIPE_F32);
  requireRank(r, op, "a", a, 2);
  requireRank(r, op, "b", b, 2);
  const int64_t m = trans_a ? a->shape[1] : a->shape[0];
  const int64_t k = trans_a ? a->shape[0] : a->shape[1];
  const int64_t kb = trans_b ? b->shape[1] : b->shape[0];
  const int64_t n = trans_b ? b->shape[0] : b->shape[1];
  if (k != kb)
    fail(r, "%s: inner dims differ: op(a) of %s has K=%lld, op(b) of %s has K=%lld "
            "(trans_a=%d, trans_b=%d)",
         op, shapeText(a).c_str(), static_cast<long long>(k), shapeText(b).c_str(),
         static_cast<long long>(kb), trans_a, trans_b);
  requireBlasSize(r, op, m, n, k);
  const int64_t expected[2] = {m, n};
  requireShape(r, op, "y", y, 2, expected);

  float *py = static_cast<float *>(y->data);
  float betaY = 0.0f;
  if (c && beta != 0.0) {
    requireTensor(r, op, "c", c);
    requireDtype(r, op, "c", c, PIPE_F32);
    // c broadcasts to [M, N] (unidirectionally: y keeps its shape).
    StridedLoop loop;
    planExpand(r, op, y, "y", c, "c", loop);
    const float *pc = static_cast<const float *>(c->data);
    const float scale = static_cast<float>(beta);
    forEachRow(r, loop, [&](const int64_t *offsets, int64_t length, const int64_t *step) {
      for (int64_t i = 0; i < length; ++i)
        py[offsets[0] + i] = scale * pc[offsets[1] + i * step[1]];
    });
    betaY = 1.0f;
  } else if (c) {
    requireTensor(r, op, "c", c);
  }
  sgemm(trans_a != 0, trans_b != 0, m, n, k, static_cast<float>(alpha),
        static_cast<const float *>(a->data), a->shape[1], static_cast<const float *>(b->data),
        b->shape[1], betaY, py);
}

} // extern "C"
