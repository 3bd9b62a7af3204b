//===- Launch.h - the CUDA kernels' launchers (Kernels.cu) ----------*- C++ -*-===//
//
// Plain C++ declarations, so host code compiled by the C++ compiler
// (CudaDevice.cpp, the device's KernelLauncher) launches what nvcc compiled.
// Every launcher queues its kernel on `stream` and returns; the caller checks
// and waits (CudaDevice::finish). n counts elements; every pointer is device
// memory of the current GPU.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_CUDA_LAUNCH_H
#define PIPE_RUNTIME_CUDA_LAUNCH_H

#include "kernels/AxisMath.h"
#include "kernels/Plans.h"
#include "kernels/WindowMath.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace piperun::cuda {

void launchFill(cudaStream_t stream, float *y, float value, int64_t n);
/// y = f(x) element by element (pipe_unary `fn`, in double, rounded once).
void launchUnary(cudaStream_t stream, int32_t fn, const float *x, float *y, int64_t n,
                 double alpha, double beta);
/// dx = f'(saved) dy; `saved` may be null for functions that keep nothing.
void launchUnaryGrad(cudaStream_t stream, int32_t fn, const float *saved, const float *dy,
                     float *dx, int64_t n, double alpha, double beta);
/// y = a (fn) b over `plan` (operands y, a, b), inputs of `dtype`
/// (KernelLauncher::binary).
void launchBinary(cudaStream_t stream, int32_t fn, int32_t dtype, const OperandPlan &plan,
                  void *y, const void *a, const void *b);
/// y = cond ? x : z over `plan` (operands y, cond, x, z).
void launchSelect(cudaStream_t stream, const OperandPlan &plan, size_t elementSize, void *y,
                  const uint8_t *cond, const void *x, const void *z);
/// Trilu of contiguous matrices; gather and its gradient (one thread per
/// (outer, inner) column, the indices in order); dropout; cross entropy
/// (one thread per position, then one thread sums the loss in order) and its
/// gradient (KernelLauncher's entries of the same names).
void launchTrilu(cudaStream_t stream, const void *x, void *y, size_t elementSize,
                 int64_t matrices, int64_t rows, int64_t columns, int64_t k, bool upper);
void launchGather(cudaStream_t stream, const GatherGeometry &g, const int64_t *index,
                  const void *x, void *y, size_t elementSize);
void launchGatherGrad(cudaStream_t stream, const GatherGeometry &g, const int64_t *index,
                      const float *dy, float *dx);
void launchDropout(cudaStream_t stream, const float *x, float *y, uint8_t *mask, int64_t n,
                   uint64_t key, double ratio, float scale);
/// Cross entropy: a warp per position where its classes are adjacent, else a
/// thread; its gradient, a thread per element.
void launchCrossEntropy(cudaStream_t stream, const LossGeometry &g, const float *logits,
                        const int64_t *labels, float *logProb, double *picked, float *loss);
void launchCrossEntropyGrad(cudaStream_t stream, const LossGeometry &g, const float *dloss,
                            const float *logProb, const int64_t *labels, float *dlogits);
/// Pad, one thread per element of y; cast, one per element.
void launchPad(cudaStream_t stream, const PadGeometry &g, const void *x, void *y,
               size_t elementSize, uint64_t fill);
void launchCast(cudaStream_t stream, int32_t from, int32_t to, const void *x, void *y, int64_t n);
/// Batch norm: statistics and gradient sums a block per channel, then one
/// thread per element (KernelLauncher's entries of the same names).
void launchBatchNormTrain(cudaStream_t stream, const ChannelLayout &l, const float *x,
                          const float *gamma, const float *beta, double epsilon, double momentum,
                          float *savedMean, float *savedInvstd, float *runningMean,
                          float *runningVar, double *ab, float *y);
void launchBatchNormInfer(cudaStream_t stream, const ChannelLayout &l, const float *x,
                          const float *gamma, const float *beta, const float *mean,
                          const float *var, double epsilon, double *ab, float *y);
void launchBatchNormGrad(cudaStream_t stream, const ChannelLayout &l, const float *x,
                         const float *dy, const float *gamma, const float *savedMean,
                         const float *savedInvstd, double *terms, float *dx, float *dscale,
                         float *dbias);
/// One group's column matrix and its adjoint (one thread per element);
/// pooling and its gradients (one thread per element, max pooling's gradient
/// one per plane): KernelLauncher's entries of the same names.
void launchIm2col(cudaStream_t stream, const ConvGeometry &g, const float *x, float *col);
void launchCol2im(cudaStream_t stream, const ConvGeometry &g, const float *col, float *x);
void launchMaxPool(cudaStream_t stream, const PoolGeometry &g, const float *x, float *y,
                   int64_t *indices);
void launchAveragePool(cudaStream_t stream, const PoolGeometry &g, const float *x, float *y,
                       bool countIncludePad);
void launchAveragePoolGrad(cudaStream_t stream, const PoolGeometry &g, const float *dy, float *dx,
                           bool countIncludePad);
void launchMaxPoolGrad(cudaStream_t stream, int64_t planes, int64_t outPlane, int64_t inPlane,
                       const float *dy, const int64_t *index, float *dx);
/// y[i, j] = scale * c[i * rowStride + j * columnStride], y of m x n.
void launchBroadcastScaled(cudaStream_t stream, const float *c, int64_t rowStride,
                           int64_t columnStride, float scale, float *y, int64_t m, int64_t n);
/// Softmax (log-softmax) along the axis of `l`: a warp per position where its
/// elements are adjacent, else a thread (Kernels.cu).
void launchSoftmax(cudaStream_t stream, const AxisLayout &l, const float *x, float *y,
                   bool logForm);
void launchSoftmaxGrad(cudaStream_t stream, const AxisLayout &l, const float *y, const float *dy,
                       float *dx, bool logForm);
/// Layer norm, a warp per row (a thread for rows under 32); its gradient: dx
/// the same, dscale and dbias by slices of the rows per column. Null outputs
/// are skipped.
void launchLayerNorm(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                     const float *gamma, const float *beta, double epsilon, float *y,
                     float *mean, float *invstd);
void launchLayerNormGrad(cudaStream_t stream, int64_t rows, int64_t width, const float *x,
                         const float *dy, const float *gamma, const float *mean,
                         const float *invstd, float *dx, float *dscale, float *dbias);
/// A float reduction: a warp per output over adjacent inputs, slices per
/// output when outputs are few, else a thread per output.
void launchReduce(cudaStream_t stream, int32_t fn, const ReduceGeometry &g, const float *x,
                  float *y);
/// `plan` (operands dst, src) over elements of `elementSize` (1, 2, 4 or 8) bytes.
void launchStridedCopy(cudaStream_t stream, const OperandPlan &plan, void *dst, const void *src,
                       size_t elementSize);
/// into += from.
void launchAccumulate(cudaStream_t stream, float *into, const float *from, int64_t n);
/// torch.optim.SGD (buffer null: no momentum).
void launchSgd(cudaStream_t stream, float *p, const float *g, float *buffer, int64_t n, float lr,
               float decay, float momentum, bool firstStep);
/// torch.optim.Adam / AdamW.
void launchAdam(cudaStream_t stream, float *p, const float *g, float *m, float *v, int64_t n,
                const AdamStep &step);

} // namespace piperun::cuda

#endif // PIPE_RUNTIME_CUDA_LAUNCH_H
