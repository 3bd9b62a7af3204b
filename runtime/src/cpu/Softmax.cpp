//===- Softmax.cpp - softmax and log-softmax along one axis, and gradients ===//
//
// x as [outer, axis, inner]: each (outer, inner) position is one strided
// vector. Stable forms: the maximum is subtracted before exp; sums in double.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

struct AxisLayout {
  int64_t outer = 1, length = 1, inner = 1;
  int64_t positions() const { return outer * inner; }
  // First element of position p; the vector steps by `inner`.
  int64_t start(int64_t p) const { return (p / inner) * length * inner + p % inner; }
};

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
  AxisLayout l;
  for (int d = 0; d < a->rank; ++d) {
    if (d < axis)
      l.outer *= a->shape[d];
    else if (d == axis)
      l.length = a->shape[d];
    else
      l.inner *= a->shape[d];
  }
  return l;
}

void softmaxForward(pipe_rank *r, const AxisLayout &l, const float *x, float *y, bool logForm) {
  const int threads = threadsFor(r, l.positions() * l.length * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < l.positions(); ++p) {
    const float *in = x + l.start(p);
    float *out = y + l.start(p);
    const int64_t step = l.inner;
    float maximum = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < l.length; ++i)
      maximum = std::max(maximum, in[i * step]);
    double sum = 0.0;
    for (int64_t i = 0; i < l.length; ++i)
      sum += std::exp(static_cast<double>(in[i * step]) - maximum);
    if (logForm) {
      const double logSum = maximum + std::log(sum);
      for (int64_t i = 0; i < l.length; ++i)
        out[i * step] = static_cast<float>(in[i * step] - logSum);
    } else {
      for (int64_t i = 0; i < l.length; ++i)
        out[i * step] = static_cast<float>(std::exp(static_cast<double>(in[i * step]) - maximum) / sum);
    }
  }
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
  for (int64_t p = 0; p < l.positions(); ++p) {
    const int64_t first = l.start(p), step = l.inner;
    double reduced = 0.0; // sum(dy y), or sum(dy) for log-softmax
    for (int64_t i = 0; i < l.length; ++i) {
      const int64_t at = first + i * step;
      reduced += logForm ? pdy[at] : static_cast<double>(pdy[at]) * py[at];
    }
    for (int64_t i = 0; i < l.length; ++i) {
      const int64_t at = first + i * step;
      const double value = logForm ? pdy[at] - std::exp(static_cast<double>(py[at])) * reduced
                                   : py[at] * (pdy[at] - reduced);
      pdx[at] = static_cast<float>(value);
    }
  }
}


} // namespace

extern "C" {

void pipe_k_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  PIPE_DEVICE_STAGED(r, pipe_k_softmax, x, y, axis);
  const AxisLayout l = checkAxis(r, "softmax", x, "x", y, "y", axis);
  softmaxForward(r, l, static_cast<const float *>(x->data), static_cast<float *>(y->data), false);
}

void pipe_k_log_softmax(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) {
  PIPE_DEVICE_STAGED(r, pipe_k_log_softmax, x, y, axis);
  const AxisLayout l = checkAxis(r, "log_softmax", x, "x", y, "y", axis);
  softmaxForward(r, l, static_cast<const float *>(x->data), static_cast<float *>(y->data), true);
}

void pipe_k_softmax_grad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                         pipe_tensor *dx, int64_t axis) {
  PIPE_DEVICE_STAGED(r, pipe_k_softmax_grad, y, dy, dx, axis);
  softmaxBackward(r, "softmax_grad", y, dy, dx, axis, false);
}

void pipe_k_log_softmax_grad(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                             pipe_tensor *dx, int64_t axis) {
  PIPE_DEVICE_STAGED(r, pipe_k_log_softmax_grad, y, dy, dx, axis);
  softmaxBackward(r, "log_softmax_grad", y, dy, dx, axis, true);
}

} // extern "C"
