//===- AxisMath.h - softmax and layer norm, one vector at a time ---*- C++ -*-===//
//
// Softmax sees a tensor as [outer, axis, inner]: each (outer, inner) position
// is one vector along the axis, `inner` elements apart. Layer norm sees it as
// rows x width (the dims before the axis, and from it). The CPU kernels run
// the vectors on OpenMP threads, the CUDA kernels one vector per warp (or per
// GPU thread where vectors are short or strided), the emulated device in a
// loop; all three with these functions (compiled by nvcc as host and device
// functions). Stable forms: the maximum is
// subtracted before exp; sums in double. Softmax cross entropy is softmax
// along dim 1 with a label per vector.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_KERNELS_AXIS_MATH_H
#define PIPE_RUNTIME_KERNELS_AXIS_MATH_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define PIPE_AXIS_HD __host__ __device__
#else
#define PIPE_AXIS_HD
#endif

namespace piperun {

struct AxisLayout {
  int64_t outer = 1, length = 1, inner = 1;
  PIPE_AXIS_HD int64_t positions() const { return outer * inner; }
  /// The first element of position p; the vector steps by `inner`.
  PIPE_AXIS_HD int64_t start(int64_t p) const {
    return (p / inner) * length * inner + p % inner;
  }
  /// A tensor of `rank` dims `shape` seen along dim `axis` (0 <= axis < rank).
  static AxisLayout of(int rank, const int64_t *shape, int64_t axis) {
    AxisLayout l;
    for (int d = 0; d < rank; ++d) {
      if (d < axis)
        l.outer *= shape[d];
      else if (d == axis)
        l.length = shape[d];
      else
        l.inner *= shape[d];
    }
    return l;
  }
};

// Each vector's work is written as sums over a strided subset of its
// elements (from `first`, every `step`-th) and a pass that writes a subset,
// so that a CUDA warp can split one vector among its lanes and combine their
// partial sums (Kernels.cu); the whole-vector functions take every element in
// order (first 0, step 1), the order of the CPU kernels.

/// The largest of position p's elements in the subset (NaN never wins).
PIPE_AXIS_HD inline float softmaxMaximum(const AxisLayout &l, int64_t p, const float *x,
                                         int64_t first, int64_t step) {
  const float *in = x + l.start(p);
  float maximum = -INFINITY;
  for (int64_t i = first; i < l.length; i += step)
    maximum = in[i * l.inner] > maximum ? in[i * l.inner] : maximum;
  return maximum;
}

/// The subset's sum of exp(x - maximum), in double.
PIPE_AXIS_HD inline double softmaxSum(const AxisLayout &l, int64_t p, const float *x,
                                      float maximum, int64_t first, int64_t step) {
  const float *in = x + l.start(p);
  double sum = 0.0;
  for (int64_t i = first; i < l.length; i += step)
    sum += exp(static_cast<double>(in[i * l.inner]) - maximum);
  return sum;
}

/// Writes the subset of y at position p from the vector's maximum and sum.
PIPE_AXIS_HD inline void softmaxWrite(const AxisLayout &l, int64_t p, const float *x, float *y,
                                      bool logForm, float maximum, double sum, int64_t first,
                                      int64_t step) {
  const float *in = x + l.start(p);
  float *out = y + l.start(p);
  const int64_t stride = l.inner;
  if (logForm) {
    const double logSum = maximum + log(sum);
    for (int64_t i = first; i < l.length; i += step)
      out[i * stride] = static_cast<float>(in[i * stride] - logSum);
  } else {
    for (int64_t i = first; i < l.length; i += step)
      out[i * stride] = static_cast<float>(exp(static_cast<double>(in[i * stride]) - maximum) / sum);
  }
}

/// y = softmax(x) (or log-softmax) along the axis, at position p.
PIPE_AXIS_HD inline void softmaxPosition(const AxisLayout &l, int64_t p, const float *x,
                                         float *y, bool logForm) {
  const float maximum = softmaxMaximum(l, p, x, 0, 1);
  softmaxWrite(l, p, x, y, logForm, maximum, softmaxSum(l, p, x, maximum, 0, 1), 0, 1);
}

/// The subset's sum(dy y) (softmax) or sum(dy) (log-softmax), in double.
PIPE_AXIS_HD inline double softmaxGradSum(const AxisLayout &l, int64_t p, const float *y,
                                          const float *dy, bool logForm, int64_t first,
                                          int64_t step) {
  const int64_t start = l.start(p);
  double reduced = 0.0;
  for (int64_t i = first; i < l.length; i += step) {
    const int64_t at = start + i * l.inner;
    reduced += logForm ? dy[at] : static_cast<double>(dy[at]) * y[at];
  }
  return reduced;
}

/// Writes the subset of dx at position p from the vector's sum: softmax:
/// dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
PIPE_AXIS_HD inline void softmaxGradWrite(const AxisLayout &l, int64_t p, const float *y,
                                          const float *dy, float *dx, bool logForm,
                                          double reduced, int64_t first, int64_t step) {
  const int64_t start = l.start(p);
  for (int64_t i = first; i < l.length; i += step) {
    const int64_t at = start + i * l.inner;
    const double value =
        logForm ? dy[at] - exp(static_cast<double>(y[at])) * reduced : y[at] * (dy[at] - reduced);
    dx[at] = static_cast<float>(value);
  }
}

/// dx from the forward's output y and dy at position p.
PIPE_AXIS_HD inline void softmaxGradPosition(const AxisLayout &l, int64_t p, const float *y,
                                             const float *dy, float *dx, bool logForm) {
  softmaxGradWrite(l, p, y, dy, dx, logForm, softmaxGradSum(l, p, y, dy, logForm, 0, 1), 0, 1);
}

/// The subset's sum of a row's elements, and of their squared distances to mu.
PIPE_AXIS_HD inline double rowSum(const float *in, int64_t width, int64_t first, int64_t step) {
  double sum = 0.0;
  for (int64_t j = first; j < width; j += step)
    sum += in[j];
  return sum;
}
PIPE_AXIS_HD inline double rowSquares(const float *in, int64_t width, double mu, int64_t first,
                                      int64_t step) {
  double squares = 0.0;
  for (int64_t j = first; j < width; j += step) {
    const double d = in[j] - mu;
    squares += d * d;
  }
  return squares;
}

/// Writes the subset of row `row` of y = (x - mu) inv gamma + beta (beta may
/// be null) and, from `first` 0, the row's mean and invstd where not null.
PIPE_AXIS_HD inline void layerNormWrite(int64_t row, int64_t width, const float *x,
                                        const float *gamma, const float *beta, double mu,
                                        double inv, float *y, float *mean, float *invstd,
                                        int64_t first, int64_t step) {
  const float *in = x + row * width;
  float *out = y + row * width;
  for (int64_t j = first; j < width; j += step) {
    const double normal = (in[j] - mu) * inv * gamma[j];
    out[j] = static_cast<float>(beta ? normal + beta[j] : normal);
  }
  if (first == 0 && mean)
    mean[row] = static_cast<float>(mu);
  if (first == 0 && invstd)
    invstd[row] = static_cast<float>(inv);
}

/// Layer norm of row `row` of x (width elements): y = (x - mean) invstd
/// gamma + beta (beta may be null); the row's mean and invstd into `mean`,
/// `invstd` when not null.
PIPE_AXIS_HD inline void layerNormRow(int64_t row, int64_t width, const float *x,
                                      const float *gamma, const float *beta, double epsilon,
                                      float *y, float *mean, float *invstd) {
  const float *in = x + row * width;
  const double mu = width ? rowSum(in, width, 0, 1) / static_cast<double>(width) : 0.0;
  const double var = width ? rowSquares(in, width, mu, 0, 1) / static_cast<double>(width) : 0.0;
  layerNormWrite(row, width, x, gamma, beta, mu, 1.0 / sqrt(var + epsilon), y, mean, invstd, 0,
                 1);
}

/// The subset's sums of h = dy gamma and of h xhat over row `row`.
PIPE_AXIS_HD inline void layerNormGradSums(int64_t row, int64_t width, const float *x,
                                           const float *dy, const float *gamma, double mu,
                                           double inv, int64_t first, int64_t step, double &sumH,
                                           double &sumHXhat) {
  const float *in = x + row * width;
  const float *g = dy + row * width;
  for (int64_t j = first; j < width; j += step) {
    const double h = static_cast<double>(g[j]) * gamma[j];
    sumH += h;
    sumHXhat += h * (in[j] - mu) * inv;
  }
}

/// Writes the subset of dx's row: dx = invstd (h - mean(h) - xhat mean(h xhat)).
PIPE_AXIS_HD inline void layerNormGradWrite(int64_t row, int64_t width, const float *x,
                                            const float *dy, const float *gamma, double mu,
                                            double inv, double meanH, double meanHXhat,
                                            float *dx, int64_t first, int64_t step) {
  const float *in = x + row * width;
  const float *g = dy + row * width;
  float *out = dx + row * width;
  for (int64_t j = first; j < width; j += step) {
    const double xhat = (in[j] - mu) * inv;
    out[j] =
        static_cast<float>(inv * (static_cast<double>(g[j]) * gamma[j] - meanH - xhat * meanHXhat));
  }
}

/// dx of row `row`. With h = dy gamma: dx = invstd (h - mean(h) - xhat mean(h xhat)).
PIPE_AXIS_HD inline void layerNormGradRow(int64_t row, int64_t width, const float *x,
                                          const float *dy, const float *gamma, const float *mean,
                                          const float *invstd, float *dx) {
  const double mu = mean[row], inv = invstd[row];
  double sumH = 0.0, sumHXhat = 0.0;
  layerNormGradSums(row, width, x, dy, gamma, mu, inv, 0, 1, sumH, sumHXhat);
  layerNormGradWrite(row, width, x, dy, gamma, mu, inv, sumH / static_cast<double>(width),
                     sumHXhat / static_cast<double>(width), dx, 0, 1);
}

/// Adds row `row`'s terms of column j's dscale (dy xhat) and dbias (dy) sums.
PIPE_AXIS_HD inline void layerNormGradColumnTerms(int64_t row, int64_t j, int64_t width,
                                                  const float *x, const float *dy,
                                                  const float *mean, const float *invstd,
                                                  double &sumScale, double &sumBias) {
  const double g = dy[row * width + j];
  sumScale += g * (x[row * width + j] - static_cast<double>(mean[row])) * invstd[row];
  sumBias += g;
}

/// Column j's dscale and dbias (either may be null): the sums over the rows.
PIPE_AXIS_HD inline void layerNormGradColumn(int64_t j, int64_t rows, int64_t width,
                                             const float *x, const float *dy, const float *mean,
                                             const float *invstd, float *dscale, float *dbias) {
  double sumScale = 0.0, sumBias = 0.0;
  for (int64_t row = 0; row < rows; ++row)
    layerNormGradColumnTerms(row, j, width, x, dy, mean, invstd, sumScale, sumBias);
  if (dscale)
    dscale[j] = static_cast<float>(sumScale);
  if (dbias)
    dbias[j] = static_cast<float>(sumBias);
}

/// Softmax cross entropy over logits [batch, classes, inner...] (classes on
/// dim 1): `positions` = batch * inner vectors of `classes` elements `inner`
/// apart; `counted` labels are not ignoreIndex; the loss is their mean
/// times `scale`.
struct LossGeometry {
  int64_t classes = 0, inner = 1, positions = 0, counted = 0, ignoreIndex = -100;
  double scale = 1;
  PIPE_AXIS_HD int64_t start(int64_t p) const {
    return (p / inner) * classes * inner + p % inner;
  }
  /// The same vectors as softmax sees them (the log-softmax is softmax's).
  PIPE_AXIS_HD AxisLayout layout() const {
    AxisLayout l;
    l.outer = inner ? positions / inner : 0;
    l.length = classes;
    l.inner = inner;
    return l;
  }
};

/// The log-probability of `label` at position p from its log-softmax's
/// maximum and sum; 0 where the label is ignoreIndex.
PIPE_AXIS_HD inline double crossEntropyPicked(const LossGeometry &g, int64_t p,
                                              const float *logits, int64_t label, float maximum,
                                              double sum) {
  const double logSum = maximum + log(sum);
  return label == g.ignoreIndex ? 0.0 : logits[g.start(p) + label * g.inner] - logSum;
}

/// Position p of cross entropy: log-softmax over the classes into logProb
/// (may be null); returns the log-probability of `label`, 0 where it is
/// ignoreIndex.
PIPE_AXIS_HD inline double crossEntropyPosition(const LossGeometry &g, int64_t p,
                                                const float *logits, int64_t label,
                                                float *logProb) {
  const AxisLayout l = g.layout();
  const float maximum = softmaxMaximum(l, p, logits, 0, 1);
  const double sum = softmaxSum(l, p, logits, maximum, 0, 1);
  if (logProb)
    softmaxWrite(l, p, logits, logProb, true, maximum, sum, 0, 1);
  return crossEntropyPicked(g, p, logits, label, maximum, sum);
}

/// The loss from every position's picked log-probability, summed in order (an
/// ignored position's 0 changes nothing); no counted entry gives 0/0 = NaN,
/// as in torch.
PIPE_AXIS_HD inline float crossEntropyLoss(const LossGeometry &g, const double *picked) {
  double total = 0.0;
  for (int64_t p = 0; p < g.positions; ++p)
    total -= picked[p];
  const double mean = g.counted ? total / static_cast<double>(g.counted) : NAN;
  return static_cast<float>(mean * g.scale);
}

/// dlogits of class c at a position with this log-probability and label:
/// dloss scale (softmax - onehot(label)) / counted, 0 where the label is ignored.
PIPE_AXIS_HD inline float crossEntropyGradValue(const LossGeometry &g, float dloss,
                                                float logProb, int64_t label, int64_t c) {
  if (label == g.ignoreIndex)
    return 0.0f;
  const double factor =
      g.counted ? static_cast<double>(dloss) * g.scale / static_cast<double>(g.counted) : 0.0;
  const double softmax = exp(static_cast<double>(logProb));
  return static_cast<float>(factor * (softmax - (c == label ? 1.0 : 0.0)));
}

/// Every class of position p (crossEntropyGradValue).
PIPE_AXIS_HD inline void crossEntropyGradPosition(const LossGeometry &g, int64_t p, float dloss,
                                                  const float *logProb, int64_t label,
                                                  float *dlogits) {
  const int64_t first = g.start(p), step = g.inner;
  for (int64_t c = 0; c < g.classes; ++c)
    dlogits[first + c * step] = crossEntropyGradValue(g, dloss, logProb[first + c * step], label, c);
}

/// Batch norm's view of x [N, C, ...]: N blocks of C channels of `spatial`
/// elements; plane p (= n C + c) is channel p % C of sample p / C.
struct ChannelLayout {
  int64_t batch = 0, channels = 0, spatial = 1;
  PIPE_AXIS_HD int64_t count() const { return batch * spatial; }
  PIPE_AXIS_HD int64_t planes() const { return batch * channels; }
  PIPE_AXIS_HD int64_t channelOf(int64_t i) const { return (i / spatial) % channels; }
};

// A channel's sums over its elements k = first, first + step, ... in the
// order of k = n spatial + s (the whole channel, the CPU's order: first 0,
// step 1; a GPU block splits a channel among its threads). visit(i) gets each
// element's offset, walked plane by plane.
template <typename Visit>
PIPE_AXIS_HD inline void forChannel(const ChannelLayout &l, int64_t c, int64_t first,
                                    int64_t step, Visit visit) {
  for (int64_t n = 0; n < l.batch; ++n) {
    const int64_t planeStart = n * l.spatial;
    int64_t s = (first - planeStart) % step;
    if (s < 0)
      s += step;
    if (planeStart + s < first)
      s = first - planeStart;
    const int64_t base = (n * l.channels + c) * l.spatial;
    for (; s < l.spatial; s += step)
      visit(base + s);
  }
}

PIPE_AXIS_HD inline double channelSum(const ChannelLayout &l, int64_t c, const float *x,
                                      int64_t first, int64_t step) {
  double sum = 0.0;
  forChannel(l, c, first, step, [&](int64_t i) { sum += x[i]; });
  return sum;
}

PIPE_AXIS_HD inline double channelSquares(const ChannelLayout &l, int64_t c, const float *x,
                                          double mean, int64_t first, int64_t step) {
  double squares = 0.0;
  forChannel(l, c, first, step, [&](int64_t i) {
    const double d = x[i] - mean;
    squares += d * d;
  });
  return squares;
}

/// sum dy and sum dy xhat over the subset of channel c.
PIPE_AXIS_HD inline void channelGradSums(const ChannelLayout &l, int64_t c, const float *x,
                                         const float *dy, double mean, double invstd,
                                         int64_t first, int64_t step, double &sumDy,
                                         double &sumDyXhat) {
  forChannel(l, c, first, step, [&](int64_t i) {
    sumDy += dy[i];
    sumDyXhat += dy[i] * (x[i] - mean) * invstd;
  });
}

/// Training batch norm's statistics of channel c from its mean and sum of
/// squared distances to it: the saved mean and invstd and running statistics
/// (each may be null; the running variance is the unbiased one), and y = x a +
/// b's coefficients into ab[2c], ab[2c + 1].
PIPE_AXIS_HD inline void batchNormTrainFinish(const ChannelLayout &l, int64_t c, double mean,
                                              double squares, const float *gamma,
                                              const float *beta, double epsilon,
                                              double momentum, float *savedMean,
                                              float *savedInvstd, float *runningMean,
                                              float *runningVar, double *ab) {
  const int64_t count = l.count();
  const double var = squares / static_cast<double>(count);
  const double invstd = 1.0 / sqrt(var + epsilon);
  const double a = gamma[c] * invstd;
  ab[2 * c] = a;
  ab[2 * c + 1] = beta[c] - mean * a;
  if (savedMean)
    savedMean[c] = static_cast<float>(mean);
  if (savedInvstd)
    savedInvstd[c] = static_cast<float>(invstd);
  if (runningMean)
    runningMean[c] = static_cast<float>(momentum * runningMean[c] + (1.0 - momentum) * mean);
  if (runningVar) {
    const double unbiased = squares / static_cast<double>(count - 1);
    runningVar[c] = static_cast<float>(momentum * runningVar[c] + (1.0 - momentum) * unbiased);
  }
}

/// The same from x (two passes in double).
PIPE_AXIS_HD inline void batchNormTrainChannel(const ChannelLayout &l, int64_t c, const float *x,
                                               const float *gamma, const float *beta,
                                               double epsilon, double momentum,
                                               float *savedMean, float *savedInvstd,
                                               float *runningMean, float *runningVar,
                                               double *ab) {
  const double mean = channelSum(l, c, x, 0, 1) / static_cast<double>(l.count());
  batchNormTrainFinish(l, c, mean, channelSquares(l, c, x, mean, 0, 1), gamma, beta, epsilon,
                       momentum, savedMean, savedInvstd, runningMean, runningVar, ab);
}

/// Inference batch norm's coefficients of channel c from the given statistics.
PIPE_AXIS_HD inline void batchNormInferChannel(int64_t c, const float *gamma, const float *beta,
                                               const float *mean, const float *var,
                                               double epsilon, double *ab) {
  const double a = gamma[c] / sqrt(static_cast<double>(var[c]) + epsilon);
  ab[2 * c] = a;
  ab[2 * c + 1] = beta[c] - mean[c] * a;
}

/// x a + b with channel c's coefficients ab (batch norm's training and
/// inference forms).
PIPE_AXIS_HD inline float batchNormValue(const double *ab, int64_t c, float x) {
  return static_cast<float>(x * ab[2 * c] + ab[2 * c + 1]);
}

/// Batch norm's gradient, channel c, from its sums of dy and dy xhat: dbias =
/// sum dy, dscale = sum dy xhat (each may be null), and dx's coefficients into
/// terms[5c..5c+4]: mean, invstd, scale invstd, mean(dy), mean(dy xhat).
PIPE_AXIS_HD inline void batchNormGradFinish(const ChannelLayout &l, int64_t c,
                                             const float *gamma, double mean, double invstd,
                                             double sumDy, double sumDyXhat, float *dscale,
                                             float *dbias, double *terms) {
  if (dbias)
    dbias[c] = static_cast<float>(sumDy);
  if (dscale)
    dscale[c] = static_cast<float>(sumDyXhat);
  const double count = static_cast<double>(l.count());
  double *t = terms + 5 * c;
  t[0] = mean;
  t[1] = invstd;
  t[2] = gamma[c] * invstd;
  t[3] = sumDy / count;
  t[4] = sumDyXhat / count;
}

/// The same from x and dy.
PIPE_AXIS_HD inline void batchNormGradChannel(const ChannelLayout &l, int64_t c, const float *x,
                                              const float *dy, const float *gamma,
                                              const float *savedMean, const float *savedInvstd,
                                              float *dscale, float *dbias, double *terms) {
  const double mean = savedMean[c], invstd = savedInvstd[c];
  double sumDy = 0.0, sumDyXhat = 0.0;
  channelGradSums(l, c, x, dy, mean, invstd, 0, 1, sumDy, sumDyXhat);
  batchNormGradFinish(l, c, gamma, mean, invstd, sumDy, sumDyXhat, dscale, dbias, terms);
}

/// dx = scale invstd (dy - mean(dy) - xhat mean(dy xhat)) with channel c's terms.
PIPE_AXIS_HD inline float batchNormGradValue(const double *terms, int64_t c, float x, float dy) {
  const double *t = terms + 5 * c;
  const double xhat = (x - t[0]) * t[1];
  return static_cast<float>(t[2] * (dy - t[3] - xhat * t[4]));
}

} // namespace piperun

#endif // PIPE_RUNTIME_KERNELS_AXIS_MATH_H
