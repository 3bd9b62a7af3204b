//===- Pool.cpp - max and average pooling over 1-3 spatial dims -----------===//
//
// Windows follow torch: window o starts at o * stride - pad_begin; y's shape
// chooses floor or ceil mode. Max pool indices are ONNX's (flat into all of x).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace piperun::cpu {

// Checks x-like [N, C, in...] and y-like [N, C, out...]: each out dim is the
// floor-mode size or the ceil-mode size (torch drops a last window that would
// start in the end padding).
PoolGeometry poolChecks(pipe_rank *r, const char *op, const pipe_tensor *x, const char *xName,
                       const pipe_tensor *y, const char *yName, const pipe_ints &kernel,
                       const pipe_ints &strides, const pipe_ints &pads,
                       const pipe_ints *dilations) {
  requireTensor(r, op, xName, x);
  requireTensor(r, op, yName, y);
  requireDtype(r, op, xName, x, PIPE_F32);
  requireDtype(r, op, yName, y, PIPE_F32);
  if (x->rank < 3 || x->rank > 5)
    fail(r, "%s: argument '%s' has rank %d (shape %s), expected 3, 4 or 5 (1-3 spatial dims)",
         op, xName, x->rank, shapeText(x).c_str());
  requireRank(r, op, yName, y, x->rank);
  const int spatial = x->rank - 2;
  requireInts(r, op, "kernel", kernel, spatial);
  requireInts(r, op, "strides", strides, spatial);
  requireInts(r, op, "pads", pads, 2 * spatial);
  if (dilations)
    requireInts(r, op, "dilations", *dilations, spatial);
  if (y->shape[0] != x->shape[0] || y->shape[1] != x->shape[1])
    fail(r, "%s: '%s' %s and '%s' %s differ in their first two dims (N, C)", op, yName,
         shapeText(y).c_str(), xName, shapeText(x).c_str());
  PoolGeometry g;
  g.planes = x->shape[0] * x->shape[1];
  for (int i = 0; i < spatial; ++i) {
    const int d = 3 - spatial + i;
    g.in[d] = x->shape[2 + i];
    g.out[d] = y->shape[2 + i];
    g.kernel[d] = kernel.v[i];
    g.stride[d] = strides.v[i];
    g.pad[d] = pads.v[i];
    g.padEnd[d] = pads.v[spatial + i];
    g.dilation[d] = dilations ? dilations->v[i] : 1;
    if (g.kernel[d] < 1 || g.stride[d] < 1 || g.dilation[d] < 1)
      fail(r, "%s: kernel %s, strides %s and dilations must be positive", op,
           intsText(kernel).c_str(), intsText(strides).c_str());
    if (g.pad[d] < 0 || g.padEnd[d] < 0)
      fail(r, "%s: pads %s must not be negative", op, intsText(pads).c_str());
    const int64_t room = g.in[d] + g.pad[d] + g.padEnd[d] - g.dilation[d] * (g.kernel[d] - 1) - 1;
    if (room < 0)
      fail(r, "%s: the window (kernel %s, dilations) is larger than the padded '%s' %s", op,
           intsText(kernel).c_str(), xName, shapeText(x).c_str());
    const int64_t floorSize = room / g.stride[d] + 1;
    int64_t ceilSize = (room + g.stride[d] - 1) / g.stride[d] + 1;
    if ((ceilSize - 1) * g.stride[d] >= g.in[d] + g.pad[d])
      --ceilSize;
    if (g.out[d] != floorSize && g.out[d] != ceilSize)
      fail(r, "%s: dim %d of '%s' %s is %lld, expected %lld (floor mode) or %lld (ceil mode)",
           op, 2 + i, yName, shapeText(y).c_str(), static_cast<long long>(g.out[d]),
           static_cast<long long>(floorSize), static_cast<long long>(ceilSize));
  }
  for (int d = 0; d < 3; ++d) {
    g.inVolume *= g.in[d];
    g.outVolume *= g.out[d];
  }
  return g;
}

void maxPoolIndicesChecks(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *indices) {
  if (!indices)
    return;
  requireTensor(r, "max_pool", "indices", indices);
  requireDtype(r, "max_pool", "indices", indices, PIPE_I64);
  requireSameShape(r, "max_pool", "y", y, "indices", indices);
}

bool maxPoolGradChecks(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                       const void *raw, const pipe_tensor *dx) {
  const char *op = "max_pool_grad";
  requireTensor(r, op, "dy", dy);
  requireTensor(r, op, "indices", indices);
  requireTensor(r, op, "dx", dx);
  requireDtype(r, op, "dy", dy, PIPE_F32);
  requireDtype(r, op, "dx", dx, PIPE_F32);
  requireDtype(r, op, "indices", indices, PIPE_I64);
  requireSameShape(r, op, "dy", dy, "indices", indices);
  requireMinRank(r, op, "dy", dy, 3);
  requireRank(r, op, "dx", dx, dy->rank);
  if (dx->shape[0] != dy->shape[0] || dx->shape[1] != dy->shape[1])
    fail(r, "%s: 'dx' %s and 'dy' %s differ in their first two dims (N, C)", op,
         shapeText(dx).c_str(), shapeText(dy).c_str());
  const int64_t *pi = static_cast<const int64_t *>(raw);
  const int64_t planes = dy->shape[0] * dy->shape[1];
  const int64_t outPlane = planes ? dy->numel / planes : 0;
  const int64_t inPlane = planes ? dx->numel / planes : 0;
  // -1 marks a window with no tap inside x (it has no gradient).
  bool planeLocal = true;
  for (int64_t i = 0; i < dy->numel; ++i) {
    const int64_t at = pi[i];
    if (at < -1 || at >= dx->numel)
      fail(r, "%s: index %lld at position %lld is outside dx %s", op,
           static_cast<long long>(at), static_cast<long long>(i), shapeText(dx).c_str());
    if (at >= 0 && at / inPlane != i / outPlane)
      planeLocal = false;
  }
  return planeLocal;
}

} // namespace piperun::cpu

extern "C" {

void pipe_k_max_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *indices,
                     pipe_ints kernel, pipe_ints strides, pipe_ints pads, pipe_ints dilations) {
  PIPE_DEVICE_KERNEL(r, maxPool, pipe_k_max_pool, x, y, indices, kernel, strides, pads,
                     dilations);
  const PoolGeometry g =
      poolChecks(r, "max_pool", x, "x", y, "y", kernel, strides, pads, &dilations);
  maxPoolIndicesChecks(r, y, indices);
  const float *px = static_cast<const float *>(x->data);
  float *py = static_cast<float *>(y->data);
  int64_t *pi = indices ? static_cast<int64_t *>(indices->data) : nullptr;
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t outputs = g.planes * g.outVolume;
  const int threads = threadsFor(r, outputs * window);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t e = 0; e < outputs; ++e) {
    int64_t at;
    py[e] = maxPoolElement(g, px, e, &at);
    if (pi)
      pi[e] = at;
  }
}

void pipe_k_max_pool_grad(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                          pipe_tensor *dx) {
  PIPE_DEVICE_KERNEL(r, maxPoolGrad, pipe_k_max_pool_grad, dy, indices, dx);
  requireTensor(r, "max_pool_grad", "indices", indices);
  const int64_t *pi = static_cast<const int64_t *>(indices->data);
  // When every index stays in its own (n, c) plane, planes accumulate in parallel.
  const bool planeLocal = maxPoolGradChecks(r, dy, indices, pi, dx);
  const float *g = static_cast<const float *>(dy->data);
  float *out = static_cast<float *>(dx->data);
  const int64_t planes = dy->shape[0] * dy->shape[1];
  if (!planeLocal) {
    std::fill(out, out + dx->numel, 0.0f);
    for (int64_t i = 0; i < dy->numel; ++i)
      if (pi[i] >= 0)
        out[pi[i]] += g[i];
    return;
  }
  const int64_t outPlane = planes ? dy->numel / planes : 0;
  const int64_t inPlane = planes ? dx->numel / planes : 0;
  const int threads = threadsFor(r, dy->numel);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < planes; ++plane)
    maxPoolGradPlane(plane, outPlane, inPlane, g, pi, out);
}

void pipe_k_average_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints kernel,
                         pipe_ints strides, pipe_ints pads, int32_t count_include_pad) {
  PIPE_DEVICE_KERNEL(r, averagePool, pipe_k_average_pool, x, y, kernel, strides, pads,
                     count_include_pad);
  const PoolGeometry g =
      poolChecks(r, "average_pool", x, "x", y, "y", kernel, strides, pads, nullptr);
  const float *px = static_cast<const float *>(x->data);
  float *py = static_cast<float *>(y->data);
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int64_t outputs = g.planes * g.outVolume;
  const int threads = threadsFor(r, outputs * window);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t e = 0; e < outputs; ++e)
    py[e] = averagePoolElement(g, px, e, count_include_pad != 0);
}

void pipe_k_average_pool_grad(pipe_rank *r, const pipe_tensor *dy, pipe_tensor *dx,
                              pipe_ints kernel, pipe_ints strides, pipe_ints pads,
                              int32_t count_include_pad) {
  PIPE_DEVICE_KERNEL(r, averagePoolGrad, pipe_k_average_pool_grad, dy, dx, kernel, strides, pads,
                     count_include_pad);
  const PoolGeometry g =
      poolChecks(r, "average_pool_grad", dx, "dx", dy, "dy", kernel, strides, pads, nullptr);
  const float *pdy = static_cast<const float *>(dy->data);
  float *pdx = static_cast<float *>(dx->data);
  std::fill(pdx, pdx + dx->numel, 0.0f);
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, g.planes * g.outVolume * window);
  // Each window's share goes to its taps, windows in order (a device computes
  // each dx element as the same sum: averagePoolGradElement).
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    float *in = pdx + plane * g.inVolume;
    for (int64_t o = plane * g.outVolume; o < (plane + 1) * g.outVolume; ++o) {
      PoolSpan s[3];
      const float share = averagePoolShare(g, pdy, o, count_include_pad != 0, s);
      if (averageDivisor(s, count_include_pad != 0) <= 0)
        continue;
      for (int64_t id = s[0].first; id < s[0].last; ++id)
        for (int64_t ih = s[1].first; ih < s[1].last; ++ih)
          for (int64_t iw = s[2].first; iw < s[2].last; ++iw)
            in[(id * g.in[1] + ih) * g.in[2] + iw] += share;
    }
  }
}

} // extern "C"
