//===- Kernels.cu - the CUDA backend's own kernels ------------------------===//
//
// Pointwise kernels over grid-stride loops, computing each element with the
// formulas the CPU kernels use (kernels/PointwiseMath.h, kernels/Plans.h for
// broadcasts and the optimizer updates). Launchers in Launch.h.
//
//===----------------------------------------------------------------------===//
#include "cuda/Launch.h"
#include "kernels/AxisMath.h"
#include "kernels/PointwiseMath.h"

#include <algorithm>

namespace piperun::cuda {
namespace {

using namespace piperun::pointwise;

constexpr int kThreads = 256;

/// Blocks for n elements: enough to fill the GPU, grid-stride beyond.
unsigned blocksFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

__device__ inline int64_t firstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t indexStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void fillKernel(float *y, float value, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    y[i] = value;
}

__global__ void unaryKernel(int32_t fn, const float *x, float *y, int64_t n, double alpha,
                            double beta) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    y[i] = static_cast<float>(unaryValue<double>(fn, x[i], alpha, beta));
}

__global__ void unaryGradKernel(int32_t fn, const float *saved, const float *dy, float *dx,
                                int64_t n, double alpha, double beta) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    dx[i] = static_cast<float>(
        unaryGradValue<double>(fn, saved ? saved[i] : 0.0f, dy[i], alpha, beta));
}

__global__ void binaryContiguousKernel(int32_t fn, const float *a, const float *b, float *y,
                                       int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    y[i] = binaryValue<float>(fn, a[i], b[i]);
}

__global__ void binaryBroadcastKernel(int32_t fn, const float *a, const float *b, float *y,
                                      int64_t n, BroadcastPlan plan) {
  for (int64_t i = firstIndex(); i < n; i += indexStride()) {
    int64_t offsetA, offsetB;
    plan.offsets(i, offsetA, offsetB);
    y[i] = binaryValue<float>(fn, a[offsetA], b[offsetB]);
  }
}

__global__ void broadcastScaledKernel(const float *c, int64_t rowStride, int64_t columnStride,
                                      float scale, float *y, int64_t m, int64_t n) {
  const int64_t total = m * n;
  for (int64_t i = firstIndex(); i < total; i += indexStride())
    y[i] = scale * c[(i / n) * rowStride + (i % n) * columnStride];
}

__global__ void softmaxKernel(AxisLayout l, const float *x, float *y, bool logForm) {
  for (int64_t p = firstIndex(); p < l.positions(); p += indexStride())
    softmaxPosition(l, p, x, y, logForm);
}

__global__ void softmaxGradKernel(AxisLayout l, const float *y, const float *dy, float *dx,
                                  bool logForm) {
  for (int64_t p = firstIndex(); p < l.positions(); p += indexStride())
    softmaxGradPosition(l, p, y, dy, dx, logForm);
}

__global__ void layerNormKernel(int64_t rows, int64_t width, const float *x, const float *gamma,
                                const float *beta, double epsilon, float *y, float *mean,
                                float *invstd) {
  for (int64_t row = firstIndex(); row < rows; row += indexStride())
    layerNormRow(row, width, x, gamma, beta, epsilon, y, mean, invstd);
}

__global__ void layerNormGradRowKernel(int64_t rows, int64_t width, const float *x,
                                       const float *dy, const float *gamma, const float *mean,
                                       const float *invstd, float *dx) {
  for (int64_t row = firstIndex(); row < rows; row += indexStride())
    layerNormGradRow(row, width, x, dy, gamma, mean, invstd, dx);
}

__global__ void layerNormGradColumnKernel(int64_t rows, int64_t width, const float *x,
                                          const float *dy, const float *mean,
                                          const float *invstd, float *dscale, float *dbias) {
  for (int64_t j = firstIndex(); j < width; j += indexStride())
    layerNormGradColumn(j, rows, width, x, dy, mean, invstd, dscale, dbias);
}

__global__ void reduceKernel(int32_t fn, ReduceGeometry g, const float *x, float *y) {
  for (int64_t o = firstIndex(); o < g.outputs; o += indexStride())
    y[o] = reduceOutput(fn, g, o, x);
}

template <typename U>
__global__ void stridedCopyKernel(StridedCopy plan, U *dst, const U *src, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride()) {
    int64_t to, from;
    plan.offsets(i, to, from);
    dst[to] = src[from];
  }
}

template <typename U>
void stridedCopy(cudaStream_t stream, const StridedCopy &plan, void *dst, const void *src) {
  const int64_t n = plan.elements();
  stridedCopyKernel<U><<<blocksFor(n), kThreads, 0, stream>>>(plan, static_cast<U *>(dst),
                                                              static_cast<const U *>(src), n);
}

__global__ void accumulateKernel(float *into, const float *from, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    into[i] += from[i];
}

__global__ void sgdKernel(float *p, const float *g, float *buffer, int64_t n, float lr,
                          float decay, float momentum, bool firstStep) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    sgdElement(p[i], g[i], buffer ? buffer + i : nullptr, lr, decay, momentum, firstStep);
}

__global__ void adamKernel(float *p, const float *g, float *m, float *v, int64_t n,
                           AdamStep s) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    adamElement(p[i], g[i], m[i], v[i], s);
}

} // namespace

void launchFill(cudaStream_t stream, float *y, float value, int64_t n) {
  fillKernel<<<blocksFor(n), kThreads, 0, stream>>>(y, value, n);
}

void launchUnary(cudaStream_t stream, int32_t fn, const float *x, float *y, int64_t n,
                 double alpha, double beta) {
  unaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(fn, x, y, n, alpha, beta);
}

void launchUnaryGrad(cudaStream_t stream, int32_t fn, const float *saved, const float *dy,
                     float *dx, int64_t n, double alpha, double beta) {
  unaryGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(fn, saved, dy, dx, n, alpha, beta);
}

void launchBinary(cudaStream_t stream, int32_t fn, const float *a, const float *b, float *y,
                  const BroadcastPlan &plan) {
  const int64_t n = plan.elements();
  if (plan.contiguous)
    binaryContiguousKernel<<<blocksFor(n), kThreads, 0, stream>>>(fn, a, b, y, n);
  else
    binaryBroadcastKernel<<<blocksFor(n), kThreads, 0, stream>>>(fn, a, b, y, n, plan);
}

void launchBroadcastScaled(cudaStream_t stream, const float *c, int64_t rowStride,
                           int64_t columnStride, float scale, float *y, int64_t m, int64_t n) {
  broadcastScaledKernel<<<blocksFor(m * n), kThreads, 0, stream>>>(c, rowStride, columnStride,
                                                                   scale, y, m, n);
}

void launchSoftmax(cudaStream_t stream, const AxisLayout &l, const float *x, float *y,
                   bool logForm) {
  softmaxKernel<<<blocksFor(l.positions()), kThreads, 0, stream>>>(l, x, y, logForm);
}

void launchSoftmaxGrad(cudaStream_t stream, const AxisLayout &l, const float *y, const float *dy,
                       float *dx, bool logForm) {
  softmaxGradKernel<<<blocksFor(l.positions()), kThreads, 0, stream>>>(l, y, dy, dx, logForm);
}

void launchLayerNorm(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                     const float *gamma, const float *beta, double epsilon, float *y,
                     float *mean, float *invstd) {
  layerNormKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, x, gamma, beta, epsilon,
                                                            y, mean, invstd);
}

void launchLayerNormGrad(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                         const float *dy, const float *gamma, const float *mean,
                         const float *invstd, float *dx, float *dscale, float *dbias) {
  if (dx)
    layerNormGradRowKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, x, dy, gamma,
                                                                     mean, invstd, dx);
  if (dscale || dbias)
    layerNormGradColumnKernel<<<blocksFor(width), kThreads, 0, stream>>>(
        rows, width, x, dy, mean, invstd, dscale, dbias);
}

void launchReduce(cudaStream_t stream, int32_t fn, const ReduceGeometry &g, const float *x,
                  float *y) {
  reduceKernel<<<blocksFor(g.outputs), kThreads, 0, stream>>>(fn, g, x, y);
}

void launchStridedCopy(cudaStream_t stream, const StridedCopy &plan, void *dst, const void *src,
                       size_t elementSize) {
  switch (elementSize) {
  case 1: stridedCopy<uint8_t>(stream, plan, dst, src); break;
  case 2: stridedCopy<uint16_t>(stream, plan, dst, src); break;
  case 4: stridedCopy<uint32_t>(stream, plan, dst, src); break;
  default: stridedCopy<uint64_t>(stream, plan, dst, src); break;
  }
}

void launchAccumulate(cudaStream_t stream, float *into, const float *from, int64_t n) {
  accumulateKernel<<<blocksFor(n), kThreads, 0, stream>>>(into, from, n);
}

void launchSgd(cudaStream_t stream, float *p, const float *g, float *buffer, int64_t n, float lr,
               float decay, float momentum, bool firstStep) {
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, buffer, n, lr, decay, momentum,
                                                   firstStep);
}

void launchAdam(cudaStream_t stream, float *p, const float *g, float *m, float *v, int64_t n,
                const AdamStep &step) {
  adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(p, g, m, v, n, step);
}

} // namespace piperun::cuda
