//===- Softmax.cpp - softmax and log-softmax along one axis, and gradients ===//
//
// x as [outer, axis, inner]: each (outer, inner) position is one strided
// vector (kernels/AxisMath.h, shared with the device kernels).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"
#include "kernels/AxisMath.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

AxisLayout checkAxis(pipe_rank *r, const char *op, const pipe_tensor *a, const char *aName,
                     const pipe_tensor *b, const char *bName, int64_t axis) {
  requireTensor(r, op, aName, a);
  requireTensor(r, op, bName, b);
  requireDtype(r, op, aName, a, PIPE_F32);
  requireDtype(r, op, bName, b, PIPE_F32);
  requireSameShape(r, op, aName, a, bName, b);
  if (axis < 0 || axis >= a->rank)
    fail(r, "%s: axis %lld is outside [0, %d) for %s %s", op, static_cast<long long>(axis),
         a->rank, aName, shapeText(a).c_str());
  return AxisLayout::of(a->rank, a->shape, axis);
}

void softmaxForward(pipe_rank *r, const AxisLayout &l, const float *x, float *y, bool logForm) {
  const int threads = threadsFor(r, l.positions() * l.length * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < l.positions(); ++p)
    softmaxPosition(l, p, x, y, logForm);
}

/// dx from the forward's output y and dy, per position along the axis:
/// softmax: dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
void softmaxBackward(pipe_rank *r, const char *op, const pipe_tensor *y, const pipe_tensor *dy,
                     pipe_tensor *dx, int64_t axis, bool logForm) {
  const AxisLayout l = checkAxis(r, op, y, "y", dy, "dy", axis);
  requireTensor(r, op, "dx", dx);
  requireDtype(r, op, "dx", dx, PIPE_F32);
  requireSameShape(r, op, "y", y, "dx", dx);
  const float *py = static_cast<const float *>(y->data);
  const float *pdy = static_cast<const float *>(dy->data);
  float *pdx = static_cast<float *>(dx->data);
  const int threads = threadsFor(r, l.positions() * l.length * 2);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < l.positions(); ++p)
    softmaxGradPosition(l, p, py, pdy, pdx, logForm);
}

} // namespace

extern "C" {

void pipe_k_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, softmax, pipe_k_softmax, x, y, axis);
  const AxisLayout l = checkAxis(r, "softmax", x, "x", y, "y", axis);
  softmaxForward(r, l, static_cast<const float *>(x->data), static_cast<float *>(y->data), false);
}

void pipe_k_log_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, logSoftmax, pipe_k_log_softmax, x, y, axis);
  const AxisLayout l = checkAxis(r, "log_softmax", x, "x", y, "y", axis);
  softmaxForward(r, l, static_cast<const float *>(x->data), static_cast<float *>(y->data), true);
}

void pipe_k_softmax_grad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                         pipe_tensor *dx, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, softmaxGrad, pipe_k_softmax_grad, y, dy, dx, axis);
  softmaxBackward(r, "softmax_grad", y, dy, dx, axis, false);
}

void pipe_k_log_softmax_grad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                             pipe_tensor *dx, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, logSoftmaxGrad, pipe_k_log_softmax_grad, y, dy, dx, axis);
  softmaxBackward(r, "log_softmax_grad", y, dy, dx, axis, true);
}

} // extern "C"
