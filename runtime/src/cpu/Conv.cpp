//===- Conv.cpp - grouped N-d convolution and its gradients (im2col) ------===//
//
// Grouped convolution over 1-3 spatial dims as im2col + sgemm per (sample, group);
// dx through w^T dy then col2im, dw through dy col^T.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace piperun {
namespace cpu {

ConvGeometry convChecks(pipe_rank *r, const char *op, const pipe_tensor *x, const char *xName,
                       const pipe_tensor *w, const char *wName, const pipe_tensor *y,
                       const char *yName,
                       const pipe_ints &strides, const pipe_ints &pads,
                       const pipe_ints &dilations, int64_t group) {
  requireTensor(r, op, xName, x);
  requireTensor(r, op, wName, w);
  requireTensor(r, op, yName, y);
  requireDtype(r, op, xName, x, PIPE_F32);
  requireDtype(r, op, wName, w, PIPE_F32);
  requireDtype(r, op, yName, y, PIPE_F32);
  if (x->rank < 3 || x->rank > 5)
    fail(r, "%s: argument '%s' has rank %d (shape %s), expected 3, 4 or 5 (1-3 spatial dims)",
         op, xName, x->rank, shapeText(x).c_str());
  const int spatial = x->rank - 2;
  requireRank(r, op, wName, w, x->rank);
  requireRank(r, op, yName, y, x->rank);
  requireInts(r, op, "strides", strides, spatial);
  requireInts(r, op, "pads", pads, 2 * spatial);
  requireInts(r, op, "dilations", dilations, spatial);
  ConvGeometry g;
  g.batch = x->shape[0];
  g.channels = x->shape[1];
  g.outChannels = w->shape[0];
  g.group = group;
  if (group < 1 || g.channels % group != 0 || g.outChannels % group != 0)
    fail(r, "%s: group %lld must divide the input channels (%lld) and the output channels "
            "(%lld)",
         op, static_cast<long long>(group), static_cast<long long>(g.channels),
         static_cast<long long>(g.outChannels));
  g.channelsPerGroup = g.channels / group;
  g.outPerGroup = g.outChannels / group;
  if (w->shape[1] != g.channelsPerGroup)
    fail(r, "%s: argument '%s' %s has %lld input channels, expected %lld (%s channels %lld / "
            "group %lld)",
         op, wName, shapeText(w).c_str(), static_cast<long long>(w->shape[1]),
         static_cast<long long>(g.channelsPerGroup), xName,
         static_cast<long long>(g.channels), static_cast<long long>(group));
  int64_t expected[PIPE_MAX_RANK];
  expected[0] = g.batch;
  expected[1] = g.outChannels;
  for (int i = 0; i < spatial; ++i) {
    const int d = 3 - spatial + i;
    g.in[d] = x->shape[2 + i];
    g.kernel[d] = w->shape[2 + i];
    g.stride[d] = strides.v[i];
    g.dilation[d] = dilations.v[i];
    g.pad[d] = pads.v[i];
    const int64_t padEnd = pads.v[spatial + i];
    if (g.stride[d] < 1 || g.dilation[d] < 1)
      fail(r, "%s: strides %s and dilations %s must be positive", op,
           intsText(strides).c_str(), intsText(dilations).c_str());
    if (g.pad[d] < 0 || padEnd < 0)
      fail(r, "%s: pads %s must not be negative", op, intsText(pads).c_str());
    const int64_t span = g.dilation[d] * (g.kernel[d] - 1) + 1;
    const int64_t room = g.in[d] + g.pad[d] + padEnd - span;
    expected[2 + i] = room >= 0 ? room / g.stride[d] + 1 : 0;
    g.out[d] = expected[2 + i];
  }
  requireShape(r, op, yName, y, w->rank, expected);
  for (int d = 0; d < 3; ++d) {
    g.inVolume *= g.in[d];
    g.outVolume *= g.out[d];
    g.kernelVolume *= g.kernel[d];
  }
  return g;
}

void convBiasChecks(pipe_rank *r, const pipe_tensor *bias, const ConvGeometry &g) {
  if (!bias)
    return;
  requireTensor(r, "conv", "bias", bias);
  requireDtype(r, "conv", "bias", bias, PIPE_F32);
  const int64_t expected[1] = {g.outChannels};
  requireShape(r, "conv", "bias", bias, 1, expected);
}

} // namespace cpu
} // namespace piperun

namespace {

// col[(c * K + k), o] = x[c, o * stride - pad + k * dilation] (0 in the padding),
// for the C/G channels of one group starting at `x`.
void im2col(pipe_rank *r, const ConvGeometry &g, const float *x, float *col) {
  const int64_t rows = g.columnRows();
  const int64_t kernelHW = g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, rows * g.outVolume);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t c = row / g.kernelVolume, k = row % g.kernelVolume;
    const int64_t kd = k / kernelHW, kh = (k / g.kernel[2]) % g.kernel[1], kw = k % g.kernel[2];
    const float *channel = x + c * g.inVolume;
    float *dst = col + row * g.outVolume;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        float *line = dst + (od * g.out[1] + oh) * g.out[2];
        const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
        if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
          std::fill(line, line + g.out[2], 0.0f);
          continue;
        }
        const float *source = channel + (id * g.in[1] + ih) * g.in[2];
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
          line[ow] = (iw >= 0 && iw < g.in[2]) ? source[iw] : 0.0f;
        }
      }
    }
  }
}

// The adjoint of im2col: x[c, ...] += col[(c * K + k), o] at the same
// positions (x zeroed by the caller). Each thread owns whole channels.
void col2im(pipe_rank *r, const ConvGeometry &g, const float *col, float *x) {
  const int64_t kernelHW = g.kernel[1] * g.kernel[2];
  const int threads = threadsFor(r, g.columnRows() * g.outVolume);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t c = 0; c < g.channelsPerGroup; ++c) {
    float *channel = x + c * g.inVolume;
    for (int64_t k = 0; k < g.kernelVolume; ++k) {
      const int64_t kd = k / kernelHW, kh = (k / g.kernel[2]) % g.kernel[1],
                    kw = k % g.kernel[2];
      const float *src = col + (c * g.kernelVolume + k) * g.outVolume;
      for (int64_t od = 0; od < g.out[0]; ++od) {
        const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
        if (id < 0 || id >= g.in[0])
          continue;
        for (int64_t oh = 0; oh < g.out[1]; ++oh) {
          const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
          if (ih < 0 || ih >= g.in[1])
            continue;
          const float *line = src + (od * g.out[1] + oh) * g.out[2];
          float *target = channel + (id * g.in[1] + ih) * g.in[2];
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            const int64_t iw = ow * g.stride[2] - g.pad[2] + kw * g.dilation[2];
            if (iw >= 0 && iw < g.in[2])
              target[iw] += line[ow];
          }
        }
      }
    }
  }
}

} // namespace

extern "C" {

void pipe_k_conv(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *w,
                 const pipe_tensor *bias, pipe_tensor *y, pipe_ints strides, pipe_ints pads,
                 pipe_ints dilations, int64_t group) {
  PIPE_DEVICE_KERNEL(r, conv, pipe_k_conv, x, w, bias, y, strides, pads, dilations, group);
  const char *op = "conv";
  const ConvGeometry g = convChecks(r, op, x, "x", w, "w", y, "y", strides, pads, dilations, group);
  convBiasChecks(r, bias, g);
  if (y->numel == 0)
    return;
  const bool pointwise = g.isPointwise();
  const int64_t rows = g.columnRows();
  Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
  const float *px = static_cast<const float *>(x->data);
  const float *pw = static_cast<const float *>(w->data);
  float *py = static_cast<float *>(y->data);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const float *xGroup = px + (n * g.channels + gr * g.channelsPerGroup) * g.inVolume;
      const float *col = xGroup;
      if (!pointwise) {
        im2col(r, g, xGroup, columns.as<float>());
        col = columns.as<float>();
      }
      float *yGroup = py + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume;
      sgemm(false, false, g.outPerGroup, g.outVolume, rows, 1.0f, pw + gr * g.outPerGroup * rows,
            rows, col, g.outVolume, 0.0f, yGroup);
    }
  if (bias) {
    const float *pb = static_cast<const float *>(bias->data);
    const int64_t planes = g.batch * g.outChannels;
    const int threads = threadsFor(r, y->numel);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t plane = 0; plane < planes; ++plane) {
      const float b = pb[plane % g.outChannels];
      float *out = py + plane * g.outVolume;
      for (int64_t i = 0; i < g.outVolume; ++i)
        out[i] += b;
    }
  }
}

void pipe_k_conv_grad_input(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *w,
                            pipe_tensor *dx, pipe_ints strides, pipe_ints pads,
                            pipe_ints dilations, int64_t group) {
  PIPE_DEVICE_KERNEL(r, convGradInput, pipe_k_conv_grad_input, dy, w, dx, strides, pads, dilations, group);
  const char *op = "conv_grad_input";
  const ConvGeometry g =
      convChecks(r, op, dx, "dx", w, "w", dy, "dy", strides, pads, dilations, group);
  if (dx->numel == 0)
    return;
  float *pdx = static_cast<float *>(dx->data);
  const bool pointwise = g.isPointwise();
  const int64_t rows = g.columnRows();
  if (!pointwise)
    std::fill(pdx, pdx + dx->numel, 0.0f);
  Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
  const float *pdy = static_cast<const float *>(dy->data);
  const float *pw = static_cast<const float *>(w->data);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      float *dxGroup = pdx + (n * g.channels + gr * g.channelsPerGroup) * g.inVolume;
      const float *dyGroup = pdy + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume;
      // col = w_g^T dy_g: [C/G * K, M/G] x [M/G, O].
      float *col = pointwise ? dxGroup : columns.as<float>();
      sgemm(true, false, rows, g.outVolume, g.outPerGroup, 1.0f,
            pw + gr * g.outPerGroup * rows, rows, dyGroup, g.outVolume, 0.0f, col);
      if (!pointwise)
        col2im(r, g, col, dxGroup);
    }
}

void pipe_k_conv_grad_weight(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *dy,
                             pipe_tensor *dw, pipe_ints strides, pipe_ints pads,
                             pipe_ints dilations, int64_t group) {
  PIPE_DEVICE_KERNEL(r, convGradWeight, pipe_k_conv_grad_weight, x, dy, dw, strides, pads, dilations, group);
  const char *op = "conv_grad_weight";
  const ConvGeometry g = convChecks(r, op, x, "x", dw, "dw", dy, "dy", strides, pads, dilations, group);
  float *pdw = static_cast<float *>(dw->data);
  std::fill(pdw, pdw + dw->numel, 0.0f);
  if (dy->numel == 0 || x->numel == 0)
    return;
  const bool pointwise = g.isPointwise();
  const int64_t rows = g.columnRows();
  Scratch columns(r, PIPE_F32, pointwise ? 1 : rows * g.outVolume);
  const float *px = static_cast<const float *>(x->data);
  const float *pdy = static_cast<const float *>(dy->data);
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t gr = 0; gr < g.group; ++gr) {
      const float *xGroup = px + (n * g.channels + gr * g.channelsPerGroup) * g.inVolume;
      const float *col = xGroup;
      if (!pointwise) {
        im2col(r, g, xGroup, columns.as<float>());
        col = columns.as<float>();
      }
      const float *dyGroup = pdy + (n * g.outChannels + gr * g.outPerGroup) * g.outVolume;
      // dw_g += dy_g col^T: [M/G, O] x [O, C/G * K].
      sgemm(false, true, g.outPerGroup, rows, g.outVolume, 1.0f, dyGroup, g.outVolume, col,
            g.outVolume, 1.0f, pdw + gr * g.outPerGroup * rows);
    }
}

} // extern "C"
