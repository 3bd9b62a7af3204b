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

namespace {

// Sizes padded to three spatial dims (leading dims of size 1).
struct PoolGeometry {
  int64_t planes = 0; // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  int64_t inVolume = 1, outVolume = 1;
};

// Checks x-like [N, C, in...] and y-like [N, C, out...]: each out dim is the
// floor-mode size or the ceil-mode size (torch drops a last window that would
// start in the end padding).
PoolGeometry checkPool(pipe_rank *r, const char *op, const pipe_tensor *x, const char *xName,
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

// The in-bounds kernel taps [first, last) of window `o` along dim `d` of an
// average pool (dilation 1), and the window's size clipped to the padded input.
struct Span {
  int64_t first, last, padded;
};
Span averageSpan(const PoolGeometry &g, int d, int64_t o) {
  const int64_t start = o * g.stride[d] - g.pad[d];
  const int64_t end = std::min(start + g.kernel[d], g.in[d] + g.padEnd[d]);
  return {std::max<int64_t>(start, 0), std::min(end, g.in[d]), end - start};
}

} // namespace

extern "C" {

void pipe_k_max_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *indices,
                     pipe_ints kernel, pipe_ints strides, pipe_ints pads, pipe_ints dilations) {
  PIPE_DEVICE_STAGED(r, pipe_k_max_pool, x, y, indices, kernel, strides, pads, dilations);
  const char *op = "max_pool";
  const PoolGeometry g = checkPool(r, op, x, "x", y, "y", kernel, strides, pads, &dilations);
  if (indices) {
    requireTensor(r, op, "indices", indices);
    requireDtype(r, op, "indices", indices, PIPE_I64);
    requireSameShape(r, op, "y", y, "indices", indices);
  }
  const float *px = static_cast<const float *>(x->data);
  float *py = static_cast<float *>(y->data);
  int64_t *pi = indices ? static_cast<int64_t *>(indices->data) : nullptr;
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, g.planes * g.outVolume * window);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const float *in = px + plane * g.inVolume;
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          // torch's scan: taps in row-major order from the first in-bounds
          // one; a tap replaces the best when greater (so the first maximum
          // wins) or NaN.
          float best = -std::numeric_limits<float>::infinity();
          int64_t bestAt = -1;
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
            if (id < 0 || id >= g.in[0])
              continue;
            for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
              const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
              if (ih < 0 || ih >= g.in[1])
                continue;
              for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
                if (iw < 0 || iw >= g.in[2])
                  continue;
                const int64_t at = (id * g.in[1] + ih) * g.in[2] + iw;
                const float v = in[at];
                if (bestAt < 0)
                  bestAt = at;
                if (v > best || std::isnan(v)) {
                  best = v;
                  bestAt = at;
                }
              }
            }
          }
          const int64_t o = plane * g.outVolume + (od * g.out[1] + oh) * g.out[2] + ow;
          py[o] = best;
          if (pi)
            pi[o] = bestAt < 0 ? -1 : plane * g.inVolume + bestAt;
        }
  }
}

void pipe_k_max_pool_grad(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                          pipe_tensor *dx) {
  PIPE_DEVICE_STAGED(r, pipe_k_max_pool_grad, dy, indices, dx);
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
  const int64_t *pi = static_cast<const int64_t *>(indices->data);
  const float *g = static_cast<const float *>(dy->data);
  float *out = static_cast<float *>(dx->data);
  const int64_t planes = dy->shape[0] * dy->shape[1];
  const int64_t outPlane = planes ? dy->numel / planes : 0;
  const int64_t inPlane = planes ? dx->numel / planes : 0;
  // -1 marks a window with no tap inside x (it has no gradient). When every
  // index stays in its own (n, c) plane, planes accumulate in parallel.
  bool planeLocal = true;
  for (int64_t i = 0; i < dy->numel; ++i) {
    const int64_t at = pi[i];
    if (at < -1 || at >= dx->numel)
      fail(r, "%s: index %lld at position %lld is outside dx %s", op,
           static_cast<long long>(at), static_cast<long long>(i), shapeText(dx).c_str());
    if (at >= 0 && at / inPlane != i / outPlane)
      planeLocal = false;
  }
  std::fill(out, out + dx->numel, 0.0f);
  const int threads = planeLocal ? threadsFor(r, dy->numel) : 1;
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < planes; ++plane)
    for (int64_t i = plane * outPlane; i < (plane + 1) * outPlane; ++i)
      if (pi[i] >= 0)
        out[pi[i]] += g[i];
}

void pipe_k_average_pool(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints kernel,
                         pipe_ints strides, pipe_ints pads, int32_t count_include_pad) {
  PIPE_DEVICE_STAGED(r, pipe_k_average_pool, x, y, kernel, strides, pads, count_include_pad);
  const char *op = "average_pool";
  const PoolGeometry g = checkPool(r, op, x, "x", y, "y", kernel, strides, pads, nullptr);
  const float *px = static_cast<const float *>(x->data);
  float *py = static_cast<float *>(y->data);
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, g.planes * g.outVolume * window);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    const float *in = px + plane * g.inVolume;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const Span sd = averageSpan(g, 0, od);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const Span sh = averageSpan(g, 1, oh);
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const Span sw = averageSpan(g, 2, ow);
          double sum = 0.0;
          for (int64_t id = sd.first; id < sd.last; ++id)
            for (int64_t ih = sh.first; ih < sh.last; ++ih)
              for (int64_t iw = sw.first; iw < sw.last; ++iw)
                sum += in[(id * g.in[1] + ih) * g.in[2] + iw];
          const int64_t divisor =
              count_include_pad ? sd.padded * sh.padded * sw.padded
                                : std::max<int64_t>(0, sd.last - sd.first) *
                                      std::max<int64_t>(0, sh.last - sh.first) *
                                      std::max<int64_t>(0, sw.last - sw.first);
          py[plane * g.outVolume + (od * g.out[1] + oh) * g.out[2] + ow] =
              divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
        }
      }
    }
  }
}

void pipe_k_average_pool_grad(pipe_rank *r, const pipe_tensor *dy, pipe_tensor *dx,
                              pipe_ints kernel, pipe_ints strides, pipe_ints pads,
                              int32_t count_include_pad) {
  PIPE_DEVICE_STAGED(r, pipe_k_average_pool_grad, dy, dx, kernel, strides, pads, count_include_pad);
  const char *op = "average_pool_grad";
  const PoolGeometry g = checkPool(r, op, dx, "dx", dy, "dy", kernel, strides, pads, nullptr);
  const float *pdy = static_cast<const float *>(dy->data);
  float *pdx = static_cast<float *>(dx->data);
  std::fill(pdx, pdx + dx->numel, 0.0f);
  const int64_t window = g.kernel[0] * g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, g.planes * g.outVolume * window);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < g.planes; ++plane) {
    float *in = pdx + plane * g.inVolume;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const Span sd = averageSpan(g, 0, od);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const Span sh = averageSpan(g, 1, oh);
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const Span sw = averageSpan(g, 2, ow);
          const int64_t divisor =
              count_include_pad ? sd.padded * sh.padded * sw.padded
                                : std::max<int64_t>(0, sd.last - sd.first) *
                                      std::max<int64_t>(0, sh.last - sh.first) *
                                      std::max<int64_t>(0, sw.last - sw.first);
          if (divisor <= 0)
            continue;
          const float share =
              pdy[plane * g.outVolume + (od * g.out[1] + oh) * g.out[2] + ow] /
              static_cast<float>(divisor);
          for (int64_t id = sd.first; id < sd.last; ++id)
            for (int64_t ih = sh.first; ih < sh.last; ++ih)
              for (int64_t iw = sw.first; iw < sw.last; ++iw)
                in[(id * g.in[1] + ih) * g.in[2] + iw] += share;
        }
      }
    }
  }
}

} // extern "C"
