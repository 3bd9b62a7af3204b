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
#include "kernels/RandomBits.h"

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

template <typename T>
__global__ void binaryContiguousKernel(int32_t fn, const T *a, const T *b, void *y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    binaryAt<T>(fn, a[i], b[i], y, i);
}

template <typename T>
__global__ void binaryStridedKernel(int32_t fn, OperandPlan plan, const T *a, const T *b,
                                    void *y, int64_t n) {
  int64_t offset[4];
  for (int64_t i = firstIndex(); i < n; i += indexStride()) {
    plan.offsets(i, offset);
    binaryAt<T>(fn, a[offset[1]], b[offset[2]], y, offset[0]);
  }
}

template <typename T>
void binaryOf(cudaStream_t stream, int32_t fn, const OperandPlan &plan, void *y, const void *a,
              const void *b) {
  const int64_t n = plan.elements();
  const T *left = static_cast<const T *>(a), *right = static_cast<const T *>(b);
  if (plan.contiguous())
    binaryContiguousKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(fn, left, right, y, n);
  else
    binaryStridedKernel<T><<<blocksFor(n), kThreads, 0, stream>>>(fn, plan, left, right, y, n);
}

template <typename U>
__global__ void selectKernel(OperandPlan plan, U *y, const uint8_t *cond, const U *x, const U *z,
                             int64_t n) {
  int64_t offset[4];
  for (int64_t i = firstIndex(); i < n; i += indexStride()) {
    plan.offsets(i, offset);
    y[offset[0]] = cond[offset[1]] ? x[offset[2]] : z[offset[3]];
  }
}

template <typename U>
void selectOf(cudaStream_t stream, const OperandPlan &plan, void *y, const uint8_t *cond,
              const void *x, const void *z) {
  const int64_t n = plan.elements();
  selectKernel<U><<<blocksFor(n), kThreads, 0, stream>>>(
      plan, static_cast<U *>(y), cond, static_cast<const U *>(x), static_cast<const U *>(z), n);
}

template <typename U>
__global__ void triluKernel(const U *x, U *y, int64_t n, int64_t rows, int64_t columns,
                            int64_t k, bool upper) {
  for (int64_t e = firstIndex(); e < n; e += indexStride()) {
    const int64_t j = e % columns, i = (e / columns) % rows;
    y[e] = trilKeeps(i, j, k, upper) ? x[e] : U(0);
  }
}

template <typename U>
__global__ void gatherKernel(GatherGeometry g, const int64_t *index, const U *x, U *y,
                             int64_t n) {
  for (int64_t e = firstIndex(); e < n; e += indexStride())
    y[e] = x[gatherSource(g, index, e)];
}

__global__ void gatherGradKernel(GatherGeometry g, const int64_t *index, const float *dy,
                                 float *dx, int64_t columns) {
  for (int64_t column = firstIndex(); column < columns; column += indexStride())
    gatherGradColumn(g, index, column, dy, dx);
}

__global__ void padKernel(PadGeometry g, const char *x, char *y, int elementSize, uint64_t fill,
                          int64_t n) {
  for (int64_t e = firstIndex(); e < n; e += indexStride()) {
    const int64_t s = padSourceOffset(g, e);
    const char *from = s < 0 ? reinterpret_cast<const char *>(&fill) : x + s * elementSize;
    for (int b = 0; b < elementSize; ++b)
      y[e * elementSize + b] = from[b];
  }
}

__global__ void castKernel(int32_t from, int32_t to, const void *x, void *y, int64_t n) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    castElement(from, to, x, y, i);
}

/// The sum of every thread's v in a block of kThreads threads, added in one
/// fixed order; every thread gets it. `parts` holds kThreads doubles.
__device__ double blockSum(double v, double *parts) {
  parts[threadIdx.x] = v;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half)
      parts[threadIdx.x] += parts[threadIdx.x + half];
    __syncthreads();
  }
  const double total = parts[0];
  __syncthreads();
  return total;
}

/// Blocks for one block per channel.
unsigned channelBlocksFor(int64_t channels) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(channels, 65536)));
}

// A block per channel: thread t takes the channel's elements t, t + kThreads, ...
__global__ void batchNormTrainKernel(ChannelLayout l, const float *x, const float *gamma,
                                     const float *beta, double epsilon, double momentum,
                                     float *savedMean, float *savedInvstd, float *runningMean,
                                     float *runningVar, double *ab) {
  __shared__ double parts[kThreads];
  const int64_t t = threadIdx.x;
  for (int64_t c = blockIdx.x; c < l.channels; c += gridDim.x) {
    const double mean =
        blockSum(channelSum(l, c, x, t, kThreads), parts) / static_cast<double>(l.count());
    const double squares = blockSum(channelSquares(l, c, x, mean, t, kThreads), parts);
    if (t == 0)
      batchNormTrainFinish(l, c, mean, squares, gamma, beta, epsilon, momentum, savedMean,
                           savedInvstd, runningMean, runningVar, ab);
  }
}

__global__ void batchNormInferKernel(ChannelLayout l, const float *gamma, const float *beta,
                                     const float *mean, const float *var, double epsilon,
                                     double *ab) {
  for (int64_t c = firstIndex(); c < l.channels; c += indexStride())
    batchNormInferChannel(c, gamma, beta, mean, var, epsilon, ab);
}

__global__ void batchNormElementKernel(ChannelLayout l, const double *ab, const float *x,
                                       float *y) {
  for (int64_t i = firstIndex(), n = l.batch * l.channels * l.spatial; i < n; i += indexStride())
    y[i] = batchNormValue(ab, l.channelOf(i), x[i]);
}

__global__ void batchNormGradChannelKernel(ChannelLayout l, const float *x, const float *dy,
                                           const float *gamma, const float *savedMean,
                                           const float *savedInvstd, float *dscale,
                                           float *dbias, double *terms) {
  __shared__ double parts[kThreads];
  const int64_t t = threadIdx.x;
  for (int64_t c = blockIdx.x; c < l.channels; c += gridDim.x) {
    const double mean = savedMean[c], invstd = savedInvstd[c];
    double sumDy = 0.0, sumDyXhat = 0.0;
    channelGradSums(l, c, x, dy, mean, invstd, t, kThreads, sumDy, sumDyXhat);
    sumDy = blockSum(sumDy, parts);
    sumDyXhat = blockSum(sumDyXhat, parts);
    if (t == 0)
      batchNormGradFinish(l, c, gamma, mean, invstd, sumDy, sumDyXhat, dscale, dbias, terms);
  }
}

__global__ void batchNormGradElementKernel(ChannelLayout l, const double *terms, const float *x,
                                           const float *dy, float *dx) {
  for (int64_t i = firstIndex(), n = l.batch * l.channels * l.spatial; i < n; i += indexStride())
    dx[i] = batchNormGradValue(terms, l.channelOf(i), x[i], dy[i]);
}

__global__ void im2colKernel(ConvGeometry g, const float *x, float *col) {
  for (int64_t e = firstIndex(), n = g.columnRows() * g.outVolume; e < n; e += indexStride())
    col[e] = im2colElement(g, x, e / g.outVolume, e % g.outVolume);
}

__global__ void col2imKernel(ConvGeometry g, const float *col, float *x) {
  for (int64_t e = firstIndex(), n = g.channelsPerGroup * g.inVolume; e < n; e += indexStride())
    x[e] = col2imElement(g, col, e);
}

__global__ void maxPoolKernel(PoolGeometry g, const float *x, float *y, int64_t *indices) {
  for (int64_t e = firstIndex(), n = g.planes * g.outVolume; e < n; e += indexStride()) {
    int64_t index;
    y[e] = maxPoolElement(g, x, e, &index);
    if (indices)
      indices[e] = index;
  }
}

__global__ void averagePoolKernel(PoolGeometry g, const float *x, float *y,
                                  bool countIncludePad) {
  for (int64_t e = firstIndex(), n = g.planes * g.outVolume; e < n; e += indexStride())
    y[e] = averagePoolElement(g, x, e, countIncludePad);
}

__global__ void averagePoolGradKernel(PoolGeometry g, const float *dy, float *dx,
                                      bool countIncludePad) {
  for (int64_t e = firstIndex(), n = g.planes * g.inVolume; e < n; e += indexStride())
    dx[e] = averagePoolGradElement(g, dy, e, countIncludePad);
}

__global__ void maxPoolGradKernel(int64_t planes, int64_t outPlane, int64_t inPlane,
                                  const float *dy, const int64_t *index, float *dx) {
  for (int64_t plane = firstIndex(); plane < planes; plane += indexStride())
    maxPoolGradPlane(plane, outPlane, inPlane, dy, index, dx);
}

__global__ void dropoutKernel(const float *x, float *y, uint8_t *mask, int64_t n,
                              uint64_t stream, double ratio, float scale) {
  for (int64_t i = firstIndex(); i < n; i += indexStride())
    y[i] = dropoutElement(x[i], stream, i, ratio, scale, mask ? mask + i : nullptr);
}

__global__ void crossEntropyKernel(LossGeometry g, const float *logits, const int64_t *labels,
                                   float *logProb, double *picked) {
  for (int64_t p = firstIndex(); p < g.positions; p += indexStride())
    picked[p] = crossEntropyPosition(g, p, logits, labels[p], logProb);
}

/// One thread: the positions' sum in order, as the CPU kernel.
__global__ void crossEntropyLossKernel(LossGeometry g, const double *picked, float *loss) {
  if (firstIndex() == 0)
    *loss = crossEntropyLoss(g, picked);
}

/// One thread per element of dlogits [batch, classes, inner...].
__global__ void crossEntropyGradKernel(LossGeometry g, const float *dloss, const float *logProb,
                                       const int64_t *labels, float *dlogits) {
  const int64_t block = g.classes * g.inner, n = g.positions * g.classes;
  const float gradient = *dloss;
  for (int64_t e = firstIndex(); e < n; e += indexStride()) {
    const int64_t c = (e % block) / g.inner;
    const int64_t p = (e / block) * g.inner + e % g.inner;
    dlogits[e] = crossEntropyGradValue(g, gradient, logProb[e], labels[p], c);
  }
}

/// Calls body(U{}) with an unsigned type of `elementSize` (1, 2, 4 or 8) bytes.
template <typename Body> void byElementSize(size_t elementSize, Body body) {
  switch (elementSize) {
  case 1: body(uint8_t{}); break;
  case 2: body(uint16_t{}); break;
  case 4: body(uint32_t{}); break;
  default: body(uint64_t{}); break;
  }
}

__global__ void broadcastScaledKernel(const float *c, int64_t rowStride, int64_t columnStride,
                                      float scale, float *y, int64_t m, int64_t n) {
  const int64_t total = m * n;
  for (int64_t i = firstIndex(); i < total; i += indexStride())
    y[i] = scale * c[(i / n) * rowStride + (i % n) * columnStride];
}

// --- Vectors split among a warp's lanes ---------------------------------------
// Lane k takes elements k, k + 32, ... of its warp's vector (coalesced when
// they are adjacent); the partial sums meet at lane 0 by shuffles down, in one
// fixed order, and lane 0's total goes to every lane, so that all of them
// write with the same value.

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline int laneId() { return static_cast<int>(threadIdx.x) & (kWarp - 1); }
__device__ inline int64_t warpIndex() { return firstIndex() / kWarp; }
__device__ inline int64_t warpCount() { return indexStride() / kWarp; }

__device__ inline double warpSum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(kFullMask, v, offset);
  return __shfl_sync(kFullMask, v, 0);
}

/// The largest of the lanes' values (NaN never wins, as softmaxMaximum).
__device__ inline float warpMaximum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(kFullMask, v, offset);
    v = other > v ? other : v;
  }
  return __shfl_sync(kFullMask, v, 0);
}

__device__ inline double warpReduce(int32_t fn, double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = reduceCombine(fn, v, __shfl_down_sync(kFullMask, v, offset));
  return __shfl_sync(kFullMask, v, 0);
}

/// Blocks of kThreads threads for one warp per vector.
unsigned warpBlocksFor(int64_t vectors) { return blocksFor(vectors * kWarp); }

/// A vector of adjacent elements at least a warp long goes to a warp (its
/// lanes read adjacent elements); strided or short vectors, one per thread
/// (adjacent threads then read adjacent elements, or there is little to split).
bool warpPerVector(int64_t length, int64_t step) { return step == 1 && length >= kWarp; }

__global__ void softmaxWarpKernel(AxisLayout l, const float *x, float *y, bool logForm) {
  const int lane = laneId();
  for (int64_t p = warpIndex(); p < l.positions(); p += warpCount()) {
    const float maximum = warpMaximum(softmaxMaximum(l, p, x, lane, kWarp));
    const double sum = warpSum(softmaxSum(l, p, x, maximum, lane, kWarp));
    softmaxWrite(l, p, x, y, logForm, maximum, sum, lane, kWarp);
  }
}

__global__ void softmaxGradWarpKernel(AxisLayout l, const float *y, const float *dy, float *dx,
                                      bool logForm) {
  const int lane = laneId();
  for (int64_t p = warpIndex(); p < l.positions(); p += warpCount()) {
    const double reduced = warpSum(softmaxGradSum(l, p, y, dy, logForm, lane, kWarp));
    softmaxGradWrite(l, p, y, dy, dx, logForm, reduced, lane, kWarp);
  }
}

__global__ void layerNormWarpKernel(int64_t rows, int64_t width, const float *x,
                                    const float *gamma, const float *beta, double epsilon,
                                    float *y, float *mean, float *invstd) {
  const int lane = laneId();
  const double count = static_cast<double>(width);
  for (int64_t row = warpIndex(); row < rows; row += warpCount()) {
    const float *in = x + row * width;
    const double mu = width ? warpSum(rowSum(in, width, lane, kWarp)) / count : 0.0;
    const double var = width ? warpSum(rowSquares(in, width, mu, lane, kWarp)) / count : 0.0;
    layerNormWrite(row, width, x, gamma, beta, mu, 1.0 / sqrt(var + epsilon), y, mean, invstd,
                   lane, kWarp);
  }
}

__global__ void layerNormGradRowWarpKernel(int64_t rows, int64_t width, const float *x,
                                           const float *dy, const float *gamma,
                                           const float *mean, const float *invstd, float *dx) {
  const int lane = laneId();
  for (int64_t row = warpIndex(); row < rows; row += warpCount()) {
    const double mu = mean[row], inv = invstd[row];
    double sumH = 0.0, sumHXhat = 0.0;
    layerNormGradSums(row, width, x, dy, gamma, mu, inv, lane, kWarp, sumH, sumHXhat);
    sumH = warpSum(sumH);
    sumHXhat = warpSum(sumHXhat);
    layerNormGradWrite(row, width, x, dy, gamma, mu, inv, sumH / static_cast<double>(width),
                       sumHXhat / static_cast<double>(width), dx, lane, kWarp);
  }
}

__global__ void crossEntropyWarpKernel(LossGeometry g, const float *logits,
                                       const int64_t *labels, float *logProb, double *picked) {
  const int lane = laneId();
  const AxisLayout l = g.layout();
  for (int64_t p = warpIndex(); p < g.positions; p += warpCount()) {
    const float maximum = warpMaximum(softmaxMaximum(l, p, logits, lane, kWarp));
    const double sum = warpSum(softmaxSum(l, p, logits, maximum, lane, kWarp));
    if (logProb)
      softmaxWrite(l, p, logits, logProb, true, maximum, sum, lane, kWarp);
    if (lane == 0)
      picked[p] = crossEntropyPicked(g, p, logits, labels[p], maximum, sum);
  }
}

// --- Few outputs, long sums: slices of the inputs --------------------------
// A block of kSliceColumns x kSlices threads takes kSliceColumns adjacent
// outputs; thread (c, s) sums inputs s, s + kSlices, ... of output c, and the
// slices meet in shared memory in slice order.

constexpr int kSliceColumns = 32, kSlices = 8;

unsigned sliceBlocksFor(int64_t outputs) {
  const int64_t blocks = (outputs + kSliceColumns - 1) / kSliceColumns;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

__global__ void layerNormGradColumnSlicesKernel(int64_t rows, int64_t width, const float *x,
                                                const float *dy, const float *mean,
                                                const float *invstd, float *dscale,
                                                float *dbias) {
  __shared__ double scaleParts[kSlices][kSliceColumns], biasParts[kSlices][kSliceColumns];
  const int c = static_cast<int>(threadIdx.x), s = static_cast<int>(threadIdx.y);
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kSliceColumns; first < width;
       first += static_cast<int64_t>(gridDim.x) * kSliceColumns) {
    const int64_t j = first + c;
    double sumScale = 0.0, sumBias = 0.0;
    if (j < width)
      for (int64_t row = s; row < rows; row += kSlices)
        layerNormGradColumnTerms(row, j, width, x, dy, mean, invstd, sumScale, sumBias);
    scaleParts[s][c] = sumScale;
    biasParts[s][c] = sumBias;
    __syncthreads();
    if (s == 0 && j < width) {
      double totalScale = 0.0, totalBias = 0.0;
      for (int k = 0; k < kSlices; ++k) {
        totalScale += scaleParts[k][c];
        totalBias += biasParts[k][c];
      }
      if (dscale)
        dscale[j] = static_cast<float>(totalScale);
      if (dbias)
        dbias[j] = static_cast<float>(totalBias);
    }
    __syncthreads();
  }
}

__global__ void reduceWarpKernel(int32_t fn, ReduceGeometry g, const float *x, float *y) {
  const int lane = laneId();
  for (int64_t o = warpIndex(); o < g.outputs; o += warpCount()) {
    const double acc =
        warpReduce(fn, reducePartial(fn, g, reduceBase(g, o), x, lane, kWarp, reduceInitial(fn)));
    if (lane == 0)
      y[o] = reduceFinish(fn, g, acc);
  }
}

__global__ void reduceSlicesKernel(int32_t fn, ReduceGeometry g, const float *x, float *y) {
  __shared__ double parts[kSlices][kSliceColumns];
  const int c = static_cast<int>(threadIdx.x), s = static_cast<int>(threadIdx.y);
  for (int64_t first = static_cast<int64_t>(blockIdx.x) * kSliceColumns; first < g.outputs;
       first += static_cast<int64_t>(gridDim.x) * kSliceColumns) {
    const int64_t o = first + c;
    parts[s][c] = o < g.outputs
                      ? reducePartial(fn, g, reduceBase(g, o), x, s, kSlices, reduceInitial(fn))
                      : reduceInitial(fn);
    __syncthreads();
    if (s == 0 && o < g.outputs) {
      double acc = parts[0][c];
      for (int k = 1; k < kSlices; ++k)
        acc = reduceCombine(fn, acc, parts[k][c]);
      y[o] = reduceFinish(fn, g, acc);
    }
    __syncthreads();
  }
}

// --- One vector per thread ----------------------------------------------------

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

__global__ void reduceKernel(int32_t fn, ReduceGeometry g, const float *x, float *y) {
  for (int64_t o = firstIndex(); o < g.outputs; o += indexStride())
    y[o] = reduceOutput(fn, g, o, x);
}

template <typename U>
__global__ void stridedCopyKernel(OperandPlan plan, U *dst, const U *src, int64_t n) {
  int64_t offset[4];
  for (int64_t i = firstIndex(); i < n; i += indexStride()) {
    plan.offsets(i, offset);
    dst[offset[0]] = src[offset[1]];
  }
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

void launchBinary(cudaStream_t stream, int32_t fn, int32_t dtype, const OperandPlan &plan,
                  void *y, const void *a, const void *b) {
  switch (dtype) {
  case PIPE_F32: binaryOf<float>(stream, fn, plan, y, a, b); break;
  case PIPE_I64: binaryOf<int64_t>(stream, fn, plan, y, a, b); break;
  case PIPE_I32: binaryOf<int32_t>(stream, fn, plan, y, a, b); break;
  default: binaryOf<uint8_t>(stream, fn, plan, y, a, b); break;
  }
}

void launchSelect(cudaStream_t stream, const OperandPlan &plan, size_t elementSize, void *y,
                  const uint8_t *cond, const void *x, const void *z) {
  byElementSize(elementSize, [&](auto tag) {
    selectOf<decltype(tag)>(stream, plan, y, cond, x, z);
  });
}

void launchTrilu(cudaStream_t stream, const void *x, void *y, size_t elementSize,
                 int64_t matrices, int64_t rows, int64_t columns, int64_t k, bool upper) {
  const int64_t n = matrices * rows * columns;
  byElementSize(elementSize, [&](auto tag) {
    using U = decltype(tag);
    triluKernel<U><<<blocksFor(n), kThreads, 0, stream>>>(
        static_cast<const U *>(x), static_cast<U *>(y), n, rows, columns, k, upper);
  });
}

void launchGather(cudaStream_t stream, const GatherGeometry &g, const int64_t *index,
                  const void *x, void *y, size_t elementSize) {
  const int64_t n = g.outer * g.count * g.inner;
  byElementSize(elementSize, [&](auto tag) {
    using U = decltype(tag);
    gatherKernel<U><<<blocksFor(n), kThreads, 0, stream>>>(g, index, static_cast<const U *>(x),
                                                           static_cast<U *>(y), n);
  });
}

void launchGatherGrad(cudaStream_t stream, const GatherGeometry &g, const int64_t *index,
                      const float *dy, float *dx) {
  const int64_t columns = g.outer * g.inner;
  gatherGradKernel<<<blocksFor(columns), kThreads, 0, stream>>>(g, index, dy, dx, columns);
}

void launchPad(cudaStream_t stream, const PadGeometry &g, const void *x, void *y,
               size_t elementSize, uint64_t fill) {
  int64_t n = 1;
  for (int d = 0; d < g.rank; ++d)
    n *= g.yShape[d];
  padKernel<<<blocksFor(n), kThreads, 0, stream>>>(g, static_cast<const char *>(x),
                                                   static_cast<char *>(y),
                                                   static_cast<int>(elementSize), fill, n);
}

void launchCast(cudaStream_t stream, int32_t from, int32_t to, const void *x, void *y,
                int64_t n) {
  castKernel<<<blocksFor(n), kThreads, 0, stream>>>(from, to, x, y, n);
}

void launchBatchNormTrain(cudaStream_t stream, const ChannelLayout &l, const float *x,
                          const float *gamma, const float *beta, double epsilon, double momentum,
                          float *savedMean, float *savedInvstd, float *runningMean,
                          float *runningVar, double *ab, float *y) {
  batchNormTrainKernel<<<channelBlocksFor(l.channels), kThreads, 0, stream>>>(
      l, x, gamma, beta, epsilon, momentum, savedMean, savedInvstd, runningMean, runningVar, ab);
  batchNormElementKernel<<<blocksFor(l.batch * l.channels * l.spatial), kThreads, 0, stream>>>(
      l, ab, x, y);
}

void launchBatchNormInfer(cudaStream_t stream, const ChannelLayout &l, const float *x,
                          const float *gamma, const float *beta, const float *mean,
                          const float *var, double epsilon, double *ab, float *y) {
  batchNormInferKernel<<<blocksFor(l.channels), kThreads, 0, stream>>>(l, gamma, beta, mean, var,
                                                                       epsilon, ab);
  batchNormElementKernel<<<blocksFor(l.batch * l.channels * l.spatial), kThreads, 0, stream>>>(
      l, ab, x, y);
}

void launchBatchNormGrad(cudaStream_t stream, const ChannelLayout &l, const float *x,
                         const float *dy, const float *gamma, const float *savedMean,
                         const float *savedInvstd, double *terms, float *dx, float *dscale,
                         float *dbias) {
  batchNormGradChannelKernel<<<channelBlocksFor(l.channels), kThreads, 0, stream>>>(
      l, x, dy, gamma, savedMean, savedInvstd, dscale, dbias, terms);
  if (dx)
    batchNormGradElementKernel<<<blocksFor(l.batch * l.channels * l.spatial), kThreads, 0,
                                 stream>>>(l, terms, x, dy, dx);
}

void launchIm2col(cudaStream_t stream, const ConvGeometry &g, const float *x, float *col) {
  im2colKernel<<<blocksFor(g.columnRows() * g.outVolume), kThreads, 0, stream>>>(g, x, col);
}

void launchCol2im(cudaStream_t stream, const ConvGeometry &g, const float *col, float *x) {
  col2imKernel<<<blocksFor(g.channelsPerGroup * g.inVolume), kThreads, 0, stream>>>(g, col, x);
}

void launchMaxPool(cudaStream_t stream, const PoolGeometry &g, const float *x, float *y,
                   int64_t *indices) {
  maxPoolKernel<<<blocksFor(g.planes * g.outVolume), kThreads, 0, stream>>>(g, x, y, indices);
}

void launchAveragePool(cudaStream_t stream, const PoolGeometry &g, const float *x, float *y,
                       bool countIncludePad) {
  averagePoolKernel<<<blocksFor(g.planes * g.outVolume), kThreads, 0, stream>>>(
      g, x, y, countIncludePad);
}

void launchAveragePoolGrad(cudaStream_t stream, const PoolGeometry &g, const float *dy, float *dx,
                           bool countIncludePad) {
  averagePoolGradKernel<<<blocksFor(g.planes * g.inVolume), kThreads, 0, stream>>>(
      g, dy, dx, countIncludePad);
}

void launchMaxPoolGrad(cudaStream_t stream, int64_t planes, int64_t outPlane, int64_t inPlane,
                       const float *dy, const int64_t *index, float *dx) {
  maxPoolGradKernel<<<blocksFor(planes), kThreads, 0, stream>>>(planes, outPlane, inPlane, dy,
                                                                index, dx);
}

void launchDropout(cudaStream_t stream, const float *x, float *y, uint8_t *mask, int64_t n,
                   uint64_t key, double ratio, float scale) {
  dropoutKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, mask, n, key, ratio, scale);
}

void launchCrossEntropy(cudaStream_t stream, const LossGeometry &g, const float *logits,
                        const int64_t *labels, float *logProb, double *picked, float *loss) {
  if (g.positions > 0 && warpPerVector(g.classes, g.inner))
    crossEntropyWarpKernel<<<warpBlocksFor(g.positions), kThreads, 0, stream>>>(
        g, logits, labels, logProb, picked);
  else if (g.positions > 0)
    crossEntropyKernel<<<blocksFor(g.positions), kThreads, 0, stream>>>(g, logits, labels,
                                                                        logProb, picked);
  crossEntropyLossKernel<<<1, 1, 0, stream>>>(g, picked, loss);
}

void launchCrossEntropyGrad(cudaStream_t stream, const LossGeometry &g, const float *dloss,
                            const float *logProb, const int64_t *labels, float *dlogits) {
  crossEntropyGradKernel<<<blocksFor(g.positions * g.classes), kThreads, 0, stream>>>(
      g, dloss, logProb, labels, dlogits);
}

void launchBroadcastScaled(cudaStream_t stream, const float *c, int64_t rowStride,
                           int64_t columnStride, float scale, float *y, int64_t m, int64_t n) {
  broadcastScaledKernel<<<blocksFor(m * n), kThreads, 0, stream>>>(c, rowStride, columnStride,
                                                                   scale, y, m, n);
}

void launchSoftmax(cudaStream_t stream, const AxisLayout &l, const float *x, float *y,
                   bool logForm) {
  if (warpPerVector(l.length, l.inner))
    softmaxWarpKernel<<<warpBlocksFor(l.positions()), kThreads, 0, stream>>>(l, x, y, logForm);
  else
    softmaxKernel<<<blocksFor(l.positions()), kThreads, 0, stream>>>(l, x, y, logForm);
}

void launchSoftmaxGrad(cudaStream_t stream, const AxisLayout &l, const float *y, const float *dy,
                       float *dx, bool logForm) {
  if (warpPerVector(l.length, l.inner))
    softmaxGradWarpKernel<<<warpBlocksFor(l.positions()), kThreads, 0, stream>>>(l, y, dy, dx,
                                                                                 logForm);
  else
    softmaxGradKernel<<<blocksFor(l.positions()), kThreads, 0, stream>>>(l, y, dy, dx, logForm);
}

void launchLayerNorm(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                     const float *gamma, const float *beta, double epsilon, float *y,
                     float *mean, float *invstd) {
  if (warpPerVector(width, 1))
    layerNormWarpKernel<<<warpBlocksFor(rows), kThreads, 0, stream>>>(
        rows, width, x, gamma, beta, epsilon, y, mean, invstd);
  else
    layerNormKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, x, gamma, beta,
                                                              epsilon, y, mean, invstd);
}

void launchLayerNormGrad(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                         const float *dy, const float *gamma, const float *mean,
                         const float *invstd, float *dx, float *dscale, float *dbias) {
  if (dx && warpPerVector(width, 1))
    layerNormGradRowWarpKernel<<<warpBlocksFor(rows), kThreads, 0, stream>>>(
        rows, width, x, dy, gamma, mean, invstd, dx);
  else if (dx)
    layerNormGradRowKernel<<<blocksFor(rows), kThreads, 0, stream>>>(rows, width, x, dy, gamma,
                                                                     mean, invstd, dx);
  if (dscale || dbias)
    layerNormGradColumnSlicesKernel<<<sliceBlocksFor(width), dim3(kSliceColumns, kSlices), 0,
                                      stream>>>(rows, width, x, dy, mean, invstd, dscale, dbias);
}

void launchReduce(cudaStream_t stream, int32_t fn, const ReduceGeometry &g, const float *x,
                  float *y) {
  // The innermost reduced dim adjacent in memory: a warp per output. Fewer
  // outputs than threads to fill the GPU with long sums: slices per output.
  const bool adjacent = g.reducedRank > 0 && g.reducedStride[g.reducedRank - 1] == 1;
  if (adjacent && g.reduceCount >= kWarp)
    reduceWarpKernel<<<warpBlocksFor(g.outputs), kThreads, 0, stream>>>(fn, g, x, y);
  else if (g.outputs < 65536 && g.reduceCount >= 4 * kSlices)
    reduceSlicesKernel<<<sliceBlocksFor(g.outputs), dim3(kSliceColumns, kSlices), 0, stream>>>(
        fn, g, x, y);
  else
    reduceKernel<<<blocksFor(g.outputs), kThreads, 0, stream>>>(fn, g, x, y);
}

void launchStridedCopy(cudaStream_t stream, const OperandPlan &plan, void *dst, const void *src,
                       size_t elementSize) {
  const int64_t n = plan.elements();
  byElementSize(elementSize, [&](auto tag) {
    using U = decltype(tag);
    stridedCopyKernel<U><<<blocksFor(n), kThreads, 0, stream>>>(plan, static_cast<U *>(dst),
                                                                static_cast<const U *>(src), n);
  });
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
