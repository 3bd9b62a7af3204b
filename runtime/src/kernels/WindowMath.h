//===- WindowMath.h - convolution and pooling windows, element by element -*- C++ -*-===//
//
// The geometry of convolution (im2col) and pooling over 1-3 spatial dims, and
// each output element as a function of its inputs, in the CPU kernels' order
// of summation: shared by the CPU kernels (cpu/Conv.cpp, cpu/Pool.cpp), the
// CUDA kernels and the emulated device. Every size is padded to three spatial
// dims (leading dims of size 1), so one loop nest serves 1-D, 2-D and 3-D.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_KERNELS_WINDOWMATH_H
#define PIPE_RUNTIME_KERNELS_WINDOWMATH_H

#include "kernels/Plans.h"

#include <cstdint>

namespace piperun {

/// Grouped convolution x [N, C, in...] * w [M, C/G, kernel...] -> [N, M, out...].
struct ConvGeometry {
  int64_t batch = 0, channels = 0, outChannels = 0, group = 1;
  int64_t channelsPerGroup = 0, outPerGroup = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};
  int64_t inVolume = 1, outVolume = 1, kernelVolume = 1;

  /// Rows of the column matrix of one group.
  PIPE_PLAN_HD int64_t columnRows() const { return channelsPerGroup * kernelVolume; }
  /// A 1x1 kernel with stride 1 and no padding at either end (out equal to
  /// in) reads x as its own column matrix.
  PIPE_PLAN_HD bool isPointwise() const {
    for (int d = 0; d < 3; ++d)
      if (kernel[d] != 1 || stride[d] != 1 || pad[d] != 0 || out[d] != in[d])
        return false;
    return true;
  }
  /// The (d, h, w) taps of kernel position k.
  PIPE_PLAN_HD void tap(int64_t k, int64_t *t) const {
    t[2] = k % kernel[2];
    t[1] = (k / kernel[2]) % kernel[1];
    t[0] = k / (kernel[1] * kernel[2]);
  }
};

/// Which product of a convolution a library call computes: y from (x, w), dx
/// from (dy, w), or dw from (x, dy); each overwrites its output.
enum class ConvPass { Forward, GradInput, GradWeight };

/// Whether padding every dim by its start pad at both ends gives the output
/// size of `g`: the convolution is then the same as with its own end pads,
/// and a library that takes one pad per dim (cuDNN) computes it.
inline bool symmetricPadsGiveTheOutput(const ConvGeometry &g) {
  for (int d = 0; d < 3; ++d) {
    const int64_t span = g.in[d] + 2 * g.pad[d] - g.dilation[d] * (g.kernel[d] - 1) - 1;
    if (span < 0 || span / g.stride[d] + 1 != g.out[d])
      return false;
  }
  return true;
}

/// Column-matrix element (row, o) of one group's channels starting at `x`:
/// x[c, o * stride - pad + tap * dilation], 0 in the padding (row = c * K + k).
PIPE_PLAN_HD inline float im2colElement(const ConvGeometry &g, const float *x, int64_t row,
                                        int64_t o) {
  const int64_t c = row / g.kernelVolume;
  int64_t t[3], at = 0;
  g.tap(row % g.kernelVolume, t);
  int64_t rest = o;
  int64_t position[3];
  position[2] = rest % g.out[2];
  rest /= g.out[2];
  position[1] = rest % g.out[1];
  position[0] = rest / g.out[1];
  for (int d = 0; d < 3; ++d) {
    const int64_t i = position[d] * g.stride[d] - g.pad[d] + t[d] * g.dilation[d];
    if (i < 0 || i >= g.in[d])
      return 0.0f;
    at = at * g.in[d] + i;
  }
  return x[c * g.inVolume + at];
}

/// Element `e` (c * inVolume + spatial offset) of im2col's adjoint: the sum of
/// the column entries that read it, in order of kernel position (the CPU's
/// col2im adds them in that order onto zero).
PIPE_PLAN_HD inline float col2imElement(const ConvGeometry &g, const float *col, int64_t e) {
  const int64_t c = e / g.inVolume;
  int64_t rest = e % g.inVolume, position[3];
  position[2] = rest % g.in[2];
  rest /= g.in[2];
  position[1] = rest % g.in[1];
  position[0] = rest / g.in[1];
  float sum = 0.0f;
  for (int64_t k = 0; k < g.kernelVolume; ++k) {
    int64_t t[3], o = 0;
    g.tap(k, t);
    bool reads = true;
    for (int d = 0; d < 3 && reads; ++d) {
      const int64_t shifted = position[d] + g.pad[d] - t[d] * g.dilation[d];
      if (shifted < 0 || shifted % g.stride[d] != 0 || shifted / g.stride[d] >= g.out[d])
        reads = false;
      else
        o = o * g.out[d] + shifted / g.stride[d];
    }
    if (reads)
      sum += col[(c * g.kernelVolume + k) * g.outVolume + o];
  }
  return sum;
}

/// Max or average pooling of x [N, C, in...] -> y [N, C, out...]; window o
/// starts at o * stride - pad (torch's convention, floor or ceil mode).
struct PoolGeometry {
  int64_t planes = 0; // N * C
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, padEnd[3] = {0, 0, 0};
  int64_t dilation[3] = {1, 1, 1};
  int64_t inVolume = 1, outVolume = 1;

  /// The spatial coordinates of offset `o` in a plane of `sizes`.
  PIPE_PLAN_HD static void coordinates(int64_t o, const int64_t *sizes, int64_t *at) {
    at[2] = o % sizes[2];
    o /= sizes[2];
    at[1] = o % sizes[1];
    at[0] = o / sizes[1];
  }
};

/// The in-bounds taps [first, last) of an average pool's window o along dim
/// d (dilation 1), and the window's size clipped to the padded input.
struct PoolSpan {
  int64_t first, last, padded;
};
PIPE_PLAN_HD inline PoolSpan averageSpan(const PoolGeometry &g, int d, int64_t o) {
  const int64_t start = o * g.stride[d] - g.pad[d];
  const int64_t paddedEnd = g.in[d] + g.padEnd[d];
  const int64_t end = start + g.kernel[d] < paddedEnd ? start + g.kernel[d] : paddedEnd;
  return {start > 0 ? start : 0, end < g.in[d] ? end : g.in[d], end - start};
}

/// The divisor of window (sd, sh, sw): the padded window, or its taps inside x.
PIPE_PLAN_HD inline int64_t averageDivisor(const PoolSpan *s, bool countIncludePad) {
  int64_t divisor = 1;
  for (int d = 0; d < 3; ++d) {
    const int64_t inside = s[d].last - s[d].first;
    divisor *= countIncludePad ? s[d].padded : (inside > 0 ? inside : 0);
  }
  return divisor;
}

/// Output element e (plane * outVolume + offset) of max pooling, and the flat
/// index into x of the tap it took (-1: no tap inside x). torch's scan: taps
/// in row-major order, a tap replaces the best when greater (so the first
/// maximum wins) or NaN.
PIPE_PLAN_HD inline float maxPoolElement(const PoolGeometry &g, const float *x, int64_t e,
                                         int64_t *index) {
  const int64_t plane = e / g.outVolume;
  int64_t o[3];
  PoolGeometry::coordinates(e % g.outVolume, g.out, o);
  const float *in = x + plane * g.inVolume;
  float best = -INFINITY;
  int64_t bestAt = -1;
  for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
    const int64_t id = o[0] * g.stride[0] - g.pad[0] + kd * g.dilation[0];
    if (id < 0 || id >= g.in[0])
      continue;
    for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
      const int64_t ih = o[1] * g.stride[1] - g.pad[1] + kh * g.dilation[1];
      if (ih < 0 || ih >= g.in[1])
        continue;
      for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
        const int64_t iw = o[2] * g.stride[2] - g.pad[2] + kw * g.dilation[2];
        if (iw < 0 || iw >= g.in[2])
          continue;
        const int64_t at = (id * g.in[1] + ih) * g.in[2] + iw;
        const float v = in[at];
        if (bestAt < 0)
          bestAt = at;
        if (v > best || v != v) {
          best = v;
          bestAt = at;
        }
      }
    }
  }
  *index = bestAt < 0 ? -1 : plane * g.inVolume + bestAt;
  return best;
}

/// Output element e of average pooling: the window's sum in double, divided
/// once (0 for a window with no divisor).
PIPE_PLAN_HD inline float averagePoolElement(const PoolGeometry &g, const float *x, int64_t e,
                                             bool countIncludePad) {
  const int64_t plane = e / g.outVolume;
  int64_t o[3];
  PoolGeometry::coordinates(e % g.outVolume, g.out, o);
  PoolSpan s[3];
  for (int d = 0; d < 3; ++d)
    s[d] = averageSpan(g, d, o[d]);
  const float *in = x + plane * g.inVolume;
  double sum = 0.0;
  for (int64_t id = s[0].first; id < s[0].last; ++id)
    for (int64_t ih = s[1].first; ih < s[1].last; ++ih)
      for (int64_t iw = s[2].first; iw < s[2].last; ++iw)
        sum += in[(id * g.in[1] + ih) * g.in[2] + iw];
  const int64_t divisor = averageDivisor(s, countIncludePad);
  return divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.0f;
}

/// The share of output element e that each tap of its window receives in
/// average pooling's gradient (0 for a window with no divisor).
PIPE_PLAN_HD inline float averagePoolShare(const PoolGeometry &g, const float *dy, int64_t e,
                                           bool countIncludePad, PoolSpan *s) {
  int64_t o[3];
  PoolGeometry::coordinates(e % g.outVolume, g.out, o);
  for (int d = 0; d < 3; ++d)
    s[d] = averageSpan(g, d, o[d]);
  const int64_t divisor = averageDivisor(s, countIncludePad);
  return divisor > 0 ? dy[e] / static_cast<float>(divisor) : 0.0f;
}

/// Element e of average pooling's gradient dx: the shares of the windows
/// holding it, added onto zero in order of output position (the CPU's order).
PIPE_PLAN_HD inline float averagePoolGradElement(const PoolGeometry &g, const float *dy,
                                                 int64_t e, bool countIncludePad) {
  const int64_t plane = e / g.inVolume;
  int64_t i[3], low[3], high[3];
  PoolGeometry::coordinates(e % g.inVolume, g.in, i);
  // Windows o with o * stride - pad <= i < o * stride - pad + kernel.
  for (int d = 0; d < 3; ++d) {
    const int64_t top = i[d] + g.pad[d];
    high[d] = top / g.stride[d];
    if (high[d] > g.out[d] - 1)
      high[d] = g.out[d] - 1;
    const int64_t from = top - g.kernel[d] + 1;
    low[d] = from <= 0 ? 0 : (from + g.stride[d] - 1) / g.stride[d];
  }
  float sum = 0.0f;
  for (int64_t od = low[0]; od <= high[0]; ++od)
    for (int64_t oh = low[1]; oh <= high[1]; ++oh)
      for (int64_t ow = low[2]; ow <= high[2]; ++ow) {
        const int64_t o = plane * g.outVolume + (od * g.out[1] + oh) * g.out[2] + ow;
        PoolSpan s[3];
        const float share = averagePoolShare(g, dy, o, countIncludePad, s);
        // Its taps stop at x's end; a window with no divisor has none inside x.
        bool inside = true;
        for (int d = 0; d < 3; ++d)
          if (i[d] < s[d].first || i[d] >= s[d].last)
            inside = false;
        if (inside)
          sum += share;
      }
  return sum;
}

/// Plane `plane` of max pooling's gradient: zero, then dy[i] added at
/// index[i] in order of i (the CPU's order; each index in this plane or -1).
PIPE_PLAN_HD inline void maxPoolGradPlane(int64_t plane, int64_t outPlane, int64_t inPlane,
                                          const float *dy, const int64_t *index, float *dx) {
  for (int64_t j = plane * inPlane; j < (plane + 1) * inPlane; ++j)
    dx[j] = 0.0f;
  for (int64_t i = plane * outPlane; i < (plane + 1) * outPlane; ++i)
    if (index[i] >= 0)
      dx[index[i]] += dy[i];
}

} // namespace piperun

#endif // PIPE_RUNTIME_KERNELS_WINDOWMATH_H
