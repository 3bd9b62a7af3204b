//===- Norm.cpp - batch norm and layer norm with their gradients ----------===//
//
// Batch norm (per channel, dim 1) and layer norm (per row from `axis`) with
// their gradients; statistics in double, two passes.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"
#include "kernels/AxisMath.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

ChannelLayout checkChannels(pipe_rank *r, const char *op, const pipe_tensor *x) {
  requireTensor(r, op, "x", x);
  requireDtype(r, op, "x", x, PIPE_F32);
  requireMinRank(r, op, "x", x, 2);
  ChannelLayout layout;
  layout.batch = x->shape[0];
  layout.channels = x->shape[1];
  for (int d = 2; d < x->rank; ++d)
    layout.spatial *= x->shape[d];
  return layout;
}

void requireChannelVector(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                          int64_t channels) {
  requireTensor(r, op, arg, t);
  requireDtype(r, op, arg, t, PIPE_F32);
  const int64_t expected[1] = {channels};
  requireShape(r, op, arg, t, 1, expected);
}

// scale / bias of layer norm: the normalised dims' shape (leading 1s ignored).
void requireNormalisedShape(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                            const pipe_tensor *x, int64_t axis) {
  requireTensor(r, op, arg, t);
  requireDtype(r, op, arg, t, PIPE_F32);
  int tFirst = 0, xFirst = static_cast<int>(axis);
  while (tFirst < t->rank && t->shape[tFirst] == 1)
    ++tFirst;
  while (xFirst < x->rank && x->shape[xFirst] == 1)
    ++xFirst;
  bool same = t->rank - tFirst == x->rank - xFirst;
  for (int i = 0; same && tFirst + i < t->rank; ++i)
    same = t->shape[tFirst + i] == x->shape[xFirst + i];
  if (!same)
    fail(r, "%s: argument '%s' has shape %s, expected %s (the dims of x %s from axis %lld)", op,
         arg, shapeText(t).c_str(), shapeText(x->rank - static_cast<int>(axis), x->shape + axis).c_str(),
         shapeText(x).c_str(), static_cast<long long>(axis));
}

// mean / invstd of layer norm: x's dims before axis, 1 for the others.
void requireRowStatistic(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                         const pipe_tensor *x, int64_t axis) {
  requireTensor(r, op, arg, t);
  requireDtype(r, op, arg, t, PIPE_F32);
  int64_t expected[PIPE_MAX_RANK];
  for (int d = 0; d < x->rank; ++d)
    expected[d] = d < axis ? x->shape[d] : 1;
  requireShape(r, op, arg, t, x->rank, expected);
}

RowLayout checkLayerNorm(pipe_rank *r, const char *op, const pipe_tensor *x, int64_t axis) {
  requireTensor(r, op, "x", x);
  requireDtype(r, op, "x", x, PIPE_F32);
  if (axis < 0 || axis >= x->rank)
    fail(r, "%s: axis %lld is outside [0, %d) for x %s", op, static_cast<long long>(axis),
         x->rank, shapeText(x).c_str());
  RowLayout layout;
  for (int d = 0; d < x->rank; ++d)
    (d < axis ? layout.rows : layout.width) *= x->shape[d];
  return layout;
}

// fn(c, i) for every element i of x, (n, c) planes in parallel.
template <typename Fn> void applyPerPlane(pipe_rank *r, const ChannelLayout &l, Fn fn) {
  const int threads = threadsFor(r, l.planes() * l.spatial);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t plane = 0; plane < l.planes(); ++plane) {
    const int64_t c = plane % l.channels;
    for (int64_t i = plane * l.spatial; i < (plane + 1) * l.spatial; ++i)
      fn(c, i);
  }
}

float *floatsOrNull(pipe_tensor *t) { return t ? static_cast<float *>(t->data) : nullptr; }

} // namespace

ChannelLayout piperun::cpu::batchNormTrainChecks(
    pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale, const pipe_tensor *bias,
    const pipe_tensor *running_mean, const pipe_tensor *running_var, const pipe_tensor *y,
    const pipe_tensor *saved_mean, const pipe_tensor *saved_invstd) {
  const char *op = "batch_norm_train";
  const ChannelLayout l = checkChannels(r, op, x);
  requireChannelVector(r, op, "scale", scale, l.channels);
  requireChannelVector(r, op, "bias", bias, l.channels);
  if (running_mean)
    requireChannelVector(r, op, "running_mean", running_mean, l.channels);
  if (running_var)
    requireChannelVector(r, op, "running_var", running_var, l.channels);
  if (saved_mean)
    requireChannelVector(r, op, "saved_mean", saved_mean, l.channels);
  if (saved_invstd)
    requireChannelVector(r, op, "saved_invstd", saved_invstd, l.channels);
  requireTensor(r, op, "y", y);
  requireSameShape(r, op, "x", x, "y", y);
  requireDtype(r, op, "y", y, PIPE_F32);
  if (l.count() < 2 && l.channels > 0)
    fail(r, "%s: expected more than 1 value per channel when training, got x %s", op,
         shapeText(x).c_str());
  return l;
}

ChannelLayout piperun::cpu::batchNormInferChecks(pipe_rank *r, const pipe_tensor *x,
                                                 const pipe_tensor *scale,
                                                 const pipe_tensor *bias,
                                                 const pipe_tensor *mean, const pipe_tensor *var,
                                                 const pipe_tensor *y) {
  const char *op = "batch_norm_infer";
  const ChannelLayout l = checkChannels(r, op, x);
  requireChannelVector(r, op, "scale", scale, l.channels);
  requireChannelVector(r, op, "bias", bias, l.channels);
  requireChannelVector(r, op, "mean", mean, l.channels);
  requireChannelVector(r, op, "var", var, l.channels);
  requireTensor(r, op, "y", y);
  requireSameShape(r, op, "x", x, "y", y);
  requireDtype(r, op, "y", y, PIPE_F32);
  return l;
}

ChannelLayout piperun::cpu::batchNormGradChecks(pipe_rank *r, const pipe_tensor *x,
                                                const pipe_tensor *scale,
                                                const pipe_tensor *saved_mean,
                                                const pipe_tensor *saved_invstd,
                                                const pipe_tensor *dy, const pipe_tensor *dx,
                                                const pipe_tensor *dscale,
                                                const pipe_tensor *dbias) {
  const char *op = "batch_norm_grad";
  const ChannelLayout l = checkChannels(r, op, x);
  requireChannelVector(r, op, "scale", scale, l.channels);
  requireChannelVector(r, op, "saved_mean", saved_mean, l.channels);
  requireChannelVector(r, op, "saved_invstd", saved_invstd, l.channels);
  requireTensor(r, op, "dy", dy);
  requireSameShape(r, op, "x", x, "dy", dy);
  requireDtype(r, op, "dy", dy, PIPE_F32);
  if (dx) {
    requireTensor(r, op, "dx", dx);
    requireSameShape(r, op, "x", x, "dx", dx);
    requireDtype(r, op, "dx", dx, PIPE_F32);
  }
  if (dscale)
    requireChannelVector(r, op, "dscale", dscale, l.channels);
  if (dbias)
    requireChannelVector(r, op, "dbias", dbias, l.channels);
  return l;
}

RowLayout piperun::cpu::layerNormChecks(pipe_rank *r, const pipe_tensor *x,
                                        const pipe_tensor *scale, const pipe_tensor *bias,
                                        const pipe_tensor *y, const pipe_tensor *mean,
                                        const pipe_tensor *invstd, int64_t axis) {
  const char *op = "layer_norm";
  const RowLayout l = checkLayerNorm(r, op, x, axis);
  requireNormalisedShape(r, op, "scale", scale, x, axis);
  if (bias)
    requireNormalisedShape(r, op, "bias", bias, x, axis);
  requireTensor(r, op, "y", y);
  requireSameShape(r, op, "x", x, "y", y);
  requireDtype(r, op, "y", y, PIPE_F32);
  if (mean)
    requireRowStatistic(r, op, "mean", mean, x, axis);
  if (invstd)
    requireRowStatistic(r, op, "invstd", invstd, x, axis);
  return l;
}

RowLayout piperun::cpu::layerNormGradChecks(pipe_rank *r, const pipe_tensor *x,
                                            const pipe_tensor *scale, const pipe_tensor *mean,
                                            const pipe_tensor *invstd, const pipe_tensor *dy,
                                            const pipe_tensor *dx, const pipe_tensor *dscale,
                                            const pipe_tensor *dbias, int64_t axis) {
  const char *op = "layer_norm_grad";
  const RowLayout l = checkLayerNorm(r, op, x, axis);
  requireNormalisedShape(r, op, "scale", scale, x, axis);
  requireRowStatistic(r, op, "mean", mean, x, axis);
  requireRowStatistic(r, op, "invstd", invstd, x, axis);
  requireTensor(r, op, "dy", dy);
  requireSameShape(r, op, "x", x, "dy", dy);
  requireDtype(r, op, "dy", dy, PIPE_F32);
  if (dx) {
    requireTensor(r, op, "dx", dx);
    requireSameShape(r, op, "x", x, "dx", dx);
    requireDtype(r, op, "dx", dx, PIPE_F32);
  }
  if (dscale)
    requireNormalisedShape(r, op, "dscale", dscale, x, axis);
  if (dbias)
    requireNormalisedShape(r, op, "dbias", dbias, x, axis);
  return l;
}

extern "C" {

void pipe_k_batch_norm_train(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                             const pipe_tensor *bias, pipe_tensor *running_mean,
                             pipe_tensor *running_var, pipe_tensor *y, pipe_tensor *saved_mean,
                             pipe_tensor *saved_invstd, double epsilon, double momentum) {
  PIPE_DEVICE_KERNEL(r, batchNormTrain, pipe_k_batch_norm_train, x, scale, bias, running_mean,
                     running_var, y, saved_mean, saved_invstd, epsilon, momentum);
  const ChannelLayout l = batchNormTrainChecks(r, x, scale, bias, running_mean, running_var, y,
                                               saved_mean, saved_invstd);
  const float *px = static_cast<const float *>(x->data);
  std::vector<double> ab(static_cast<size_t>(2 * l.channels));
  const int threads = threadsFor(r, x->numel * 3);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t c = 0; c < l.channels; ++c)
    batchNormTrainChannel(l, c, px, static_cast<const float *>(scale->data),
                          static_cast<const float *>(bias->data), epsilon, momentum,
                          floatsOrNull(saved_mean), floatsOrNull(saved_invstd),
                          floatsOrNull(running_mean), floatsOrNull(running_var), ab.data());
  float *py = static_cast<float *>(y->data);
  applyPerPlane(r, l,
                [&](int64_t c, int64_t i) { py[i] = batchNormValue(ab.data(), c, px[i]); });
}

void pipe_k_batch_norm_infer(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                             const pipe_tensor *bias, const pipe_tensor *mean,
                             const pipe_tensor *var, pipe_tensor *y, double epsilon) {
  PIPE_DEVICE_KERNEL(r, batchNormInfer, pipe_k_batch_norm_infer, x, scale, bias, mean, var, y,
                     epsilon);
  const ChannelLayout l = batchNormInferChecks(r, x, scale, bias, mean, var, y);
  std::vector<double> ab(static_cast<size_t>(2 * l.channels));
  for (int64_t c = 0; c < l.channels; ++c)
    batchNormInferChannel(c, static_cast<const float *>(scale->data),
                          static_cast<const float *>(bias->data),
                          static_cast<const float *>(mean->data),
                          static_cast<const float *>(var->data), epsilon, ab.data());
  const float *px = static_cast<const float *>(x->data);
  float *py = static_cast<float *>(y->data);
  applyPerPlane(r, l,
                [&](int64_t c, int64_t i) { py[i] = batchNormValue(ab.data(), c, px[i]); });
}

void pipe_k_batch_norm_grad(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                            const pipe_tensor *saved_mean, const pipe_tensor *saved_invstd,
                            const pipe_tensor *dy, pipe_tensor *dx, pipe_tensor *dscale,
                            pipe_tensor *dbias) {
  PIPE_DEVICE_KERNEL(r, batchNormGrad, pipe_k_batch_norm_grad, x, scale, saved_mean, saved_invstd,
                     dy, dx, dscale, dbias);
  const ChannelLayout l =
      batchNormGradChecks(r, x, scale, saved_mean, saved_invstd, dy, dx, dscale, dbias);
  const float *px = static_cast<const float *>(x->data);
  const float *pdy = static_cast<const float *>(dy->data);
  std::vector<double> terms(static_cast<size_t>(5 * l.channels));
  const int threads = threadsFor(r, x->numel * 3);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t c = 0; c < l.channels; ++c)
    batchNormGradChannel(l, c, px, pdy, static_cast<const float *>(scale->data),
                         static_cast<const float *>(saved_mean->data),
                         static_cast<const float *>(saved_invstd->data), floatsOrNull(dscale),
                         floatsOrNull(dbias), terms.data());
  if (!dx)
    return;
  float *pdx = static_cast<float *>(dx->data);
  applyPerPlane(r, l, [&](int64_t c, int64_t i) {
    pdx[i] = batchNormGradValue(terms.data(), c, px[i], pdy[i]);
  });
}

void pipe_k_layer_norm(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                       const pipe_tensor *bias, pipe_tensor *y, pipe_tensor *mean,
                       pipe_tensor *invstd, int64_t axis, double epsilon) {
  PIPE_DEVICE_KERNEL(r, layerNorm, pipe_k_layer_norm, x, scale, bias, y, mean, invstd, axis,
                     epsilon);
  const RowLayout l = layerNormChecks(r, x, scale, bias, y, mean, invstd, axis);
  const float *px = static_cast<const float *>(x->data);
  const float *gamma = static_cast<const float *>(scale->data);
  const float *beta = bias ? static_cast<const float *>(bias->data) : nullptr;
  float *py = static_cast<float *>(y->data);
  float *pm = mean ? static_cast<float *>(mean->data) : nullptr;
  float *ps = invstd ? static_cast<float *>(invstd->data) : nullptr;
  const int threads = threadsFor(r, x->numel * 3);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t row = 0; row < l.rows; ++row)
    layerNormRow(row, l.width, px, gamma, beta, epsilon, py, pm, ps);
}

void pipe_k_layer_norm_grad(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                            const pipe_tensor *mean, const pipe_tensor *invstd,
                            const pipe_tensor *dy, pipe_tensor *dx, pipe_tensor *dscale,
                            pipe_tensor *dbias, int64_t axis) {
  PIPE_DEVICE_KERNEL(r, layerNormGrad, pipe_k_layer_norm_grad, x, scale, mean, invstd, dy, dx,
                     dscale, dbias, axis);
  const RowLayout l =
      layerNormGradChecks(r, x, scale, mean, invstd, dy, dx, dscale, dbias, axis);
  const float *px = static_cast<const float *>(x->data);
  const float *pdy = static_cast<const float *>(dy->data);
  const float *gamma = static_cast<const float *>(scale->data);
  const float *pm = static_cast<const float *>(mean->data);
  const float *ps = static_cast<const float *>(invstd->data);
  const int64_t width = l.width, rows = l.rows;
  const int threads = threadsFor(r, x->numel * 4);
  if (dx) {
    float *pdx = static_cast<float *>(dx->data);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t row = 0; row < rows; ++row)
      layerNormGradRow(row, width, px, pdy, gamma, pm, ps, pdx);
  }
  if (dscale || dbias) {
    // Column sums over the rows; each thread owns a range of columns.
    Scratch sums(r, PIPE_F64, 2 * width);
    double *sumScale = sums.as<double>(), *sumBias = sumScale + width;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      int team = 1, id = 0;
#ifdef _OPENMP
      team = omp_get_num_threads();
      id = omp_get_thread_num();
#endif
      const int64_t first = width * id / team, last = width * (id + 1) / team;
      for (int64_t j = first; j < last; ++j)
        sumScale[j] = sumBias[j] = 0.0;
      for (int64_t row = 0; row < rows; ++row)
        for (int64_t j = first; j < last; ++j)
          layerNormGradColumnTerms(row, j, width, px, pdy, pm, ps, sumScale[j], sumBias[j]);
    }
    for (int64_t j = 0; j < width; ++j) {
      if (dscale)
        static_cast<float *>(dscale->data)[j] = static_cast<float>(sumScale[j]);
      if (dbias)
        static_cast<float *>(dbias->data)[j] = static_cast<float>(sumBias[j]);
    }
  }
}

} // extern "C"
