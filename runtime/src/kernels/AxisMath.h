//===- AxisMath.h - softmax and layer norm, one vector at a time ---*- C++ -*-===//
//
// Softmax sees a tensor as [outer, axis, inner]: each (outer, inner) position
// is one vector along the axis, `inner` elements apart. Layer norm sees it as
// rows x width (the dims before the axis, and from it). The CPU kernels run
// the vectors on OpenMP threads, the CUDA kernels one vector per GPU thread,
// the emulated device in a loop; all three with these functions (compiled by
// nvcc as host and device functions). Stable forms: the maximum is
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

/// y = softmax(x) (or log-softmax) along the axis, at position p.
PIPE_AXIS_HD inline void softmaxPosition(const AxisLayout &l, int64_t p, const float *x,
                                         float *y, bool logForm) {
  const float *in = x + l.start(p);
  float *out = y + l.start(p);
  const int64_t step = l.inner;
  float maximum = -INFINITY;
  for (int64_t i = 0; i < l.length; ++i)
    maximum = in[i * step] > maximum ? in[i * step] : maximum;
  double sum = 0.0;
  for (int64_t i = 0; i < l.length; ++i)
    sum += exp(static_cast<double>(in[i * step]) - maximum);
  if (logForm) {
    const double logSum = maximum + log(sum);
    for (int64_t i = 0; i < l.length; ++i)
      out[i * step] = static_cast<float>(in[i * step] - logSum);
  } else {
    for (int64_t i = 0; i < l.length; ++i)
      out[i * step] = static_cast<float>(exp(static_cast<double>(in[i * step]) - maximum) / sum);
  }
}

/// dx from the forward's output y and dy at position p: softmax:
/// dx = y (dy - sum(dy y)); log-softmax: dx = dy - exp(y) sum(dy).
PIPE_AXIS_HD inline void softmaxGradPosition(const AxisLayout &l, int64_t p, const float *y,
                                             const float *dy, float *dx, bool logForm) {
  const int64_t first = l.start(p), step = l.inner;
  double reduced = 0.0; // sum(dy y), or sum(dy) for log-softmax
  for (int64_t i = 0; i < l.length; ++i) {
    const int64_t at = first + i * step;
    reduced += logForm ? dy[at] : static_cast<double>(dy[at]) * y[at];
  }
  for (int64_t i = 0; i < l.length; ++i) {
    const int64_t at = first + i * step;
    const double value =
        logForm ? dy[at] - exp(static_cast<double>(y[at])) * reduced : y[at] * (dy[at] - reduced);
    dx[at] = static_cast<float>(value);
  }
}

/// Layer norm of row `row` of x (width elements): y = (x - mean) invstd
/// gamma + beta (beta may be null); the row's mean and invstd into `mean`,
/// `invstd` when not null.
PIPE_AXIS_HD inline void layerNormRow(int64_t row, int64_t width, const float *x,
                                      const float *gamma, const float *beta, double epsilon,
                                      float *y, float *mean, float *invstd) {
  const float *in = x + row * width;
  float *out = y + row * width;
  double sum = 0.0;
  for (int64_t j = 0; j < width; ++j)
    sum += in[j];
  const double mu = width ? sum / static_cast<double>(width) : 0.0;
  double squares = 0.0;
  for (int64_t j = 0; j < width; ++j) {
    const double d = in[j] - mu;
    squares += d * d;
  }
  const double var = width ? squares / static_cast<double>(width) : 0.0;
  const double inv = 1.0 / sqrt(var + epsilon);
  for (int64_t j = 0; j < width; ++j) {
    const double normal = (in[j] - mu) * inv * gamma[j];
    out[j] = static_cast<float>(beta ? normal + beta[j] : normal);
  }
  if (mean)
    mean[row] = static_cast<float>(mu);
  if (invstd)
    invstd[row] = static_cast<float>(inv);
}

/// dx of row `row`. With h = dy gamma: dx = invstd (h - mean(h) - xhat mean(h xhat)).
PIPE_AXIS_HD inline void layerNormGradRow(int64_t row, int64_t width, const float *x,
                                          const float *dy, const float *gamma, const float *mean,
                                          const float *invstd, float *dx) {
  const float *in = x + row * width;
  const float *g = dy + row * width;
  const double mu = mean[row], inv = invstd[row];
  double sumH = 0.0, sumHXhat = 0.0;
  for (int64_t j = 0; j < width; ++j) {
    const double h = static_cast<double>(g[j]) * gamma[j];
    sumH += h;
    sumHXhat += h * (in[j] - mu) * inv;
  }
  const double meanH = sumH / static_cast<double>(width);
  const double meanHXhat = sumHXhat / static_cast<double>(width);
  float *out = dx + row * width;
  for (int64_t j = 0; j < width; ++j) {
    const double xhat = (in[j] - mu) * inv;
    out[j] =
        static_cast<float>(inv * (static_cast<double>(g[j]) * gamma[j] - meanH - xhat * meanHXhat));
  }
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
};

/// Position p of cross entropy: log-softmax over the classes into logProb
/// (may be null); returns the log-probability of `label`, 0 where it is
/// ignoreIndex.
PIPE_AXIS_HD inline double crossEntropyPosition(const LossGeometry &g, int64_t p,
                                                const float *logits, int64_t label,
                                                float *logProb) {
  const float *row = logits + g.start(p);
  const int64_t step = g.inner;
  float maximum = -INFINITY;
  for (int64_t c = 0; c < g.classes; ++c)
    maximum = row[c * step] > maximum ? row[c * step] : maximum;
  double sum = 0.0;
  for (int64_t c = 0; c < g.classes; ++c)
    sum += exp(static_cast<double>(row[c * step]) - maximum);
  const double logSum = maximum + log(sum);
  if (logProb) {
    float *out = logProb + g.start(p);
    for (int64_t c = 0; c < g.classes; ++c)
      out[c * step] = static_cast<float>(row[c * step] - logSum);
  }
  return label == g.ignoreIndex ? 0.0 : row[label * step] - logSum;
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

/// dlogits at position p: dloss scale (softmax - onehot(label)) / counted,
/// 0 where the label is ignored.
PIPE_AXIS_HD inline void crossEntropyGradPosition(const LossGeometry &g, int64_t p, float dloss,
                                                  const float *logProb, int64_t label,
                                                  float *dlogits) {
  const double factor =
      g.counted ? static_cast<double>(dloss) * g.scale / static_cast<double>(g.counted) : 0.0;
  const int64_t first = g.start(p), step = g.inner;
  for (int64_t c = 0; c < g.classes; ++c) {
    const int64_t at = first + c * step;
    if (label == g.ignoreIndex) {
      dlogits[at] = 0.0f;
      continue;
    }
    const double softmax = exp(static_cast<double>(logProb[at]));
    dlogits[at] = static_cast<float>(factor * (softmax - (c == label ? 1.0 : 0.0)));
  }
}

/// Batch norm's view of x [N, C, ...]: N blocks of C channels of `spatial`
/// elements; plane p (= n C + c) is channel p % C of sample p / C.
struct ChannelLayout {
  int64_t batch = 0, channels = 0, spatial = 1;
  PIPE_AXIS_HD int64_t count() const { return batch * spatial; }
  PIPE_AXIS_HD int64_t planes() const { return batch * channels; }
  PIPE_AXIS_HD int64_t channelOf(int64_t i) const { return (i / spatial) % channels; }
};

/// Training batch norm's statistics of channel c (two passes in double): the
/// saved mean and invstd and running statistics (each may be null; the
/// running variance is the unbiased one), and y = x a + b's coefficients
/// into ab[2c], ab[2c + 1].
PIPE_AXIS_HD inline void batchNormTrainChannel(const ChannelLayout &l, int64_t c, const float *x,
                                               const float *gamma, const float *beta,
                                               double epsilon, double momentum,
                                               float *savedMean, float *savedInvstd,
                                               float *runningMean, float *runningVar,
                                               double *ab) {
  const int64_t count = l.count();
  double sum = 0.0;
  for (int64_t n = 0; n < l.batch; ++n) {
    const float *plane = x + (n * l.channels + c) * l.spatial;
    for (int64_t k = 0; k < l.spatial; ++k)
      sum += plane[k];
  }
  const double mean = sum / static_cast<double>(count);
  double squares = 0.0;
  for (int64_t n = 0; n < l.batch; ++n) {
    const float *plane = x + (n * l.channels + c) * l.spatial;
    for (int64_t k = 0; k < l.spatial; ++k) {
      const double d = plane[k] - mean;
      squares += d * d;
    }
  }
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

/// Batch norm's gradient, channel c: dbias = sum dy, dscale = sum dy xhat
/// (each may be null), and dx's coefficients into terms[5c..5c+4]: mean,
/// invstd, scale invstd, mean(dy), mean(dy xhat).
PIPE_AXIS_HD inline void batchNormGradChannel(const ChannelLayout &l, int64_t c, const float *x,
                                              const float *dy, const float *gamma,
                                              const float *savedMean, const float *savedInvstd,
                                              float *dscale, float *dbias, double *terms) {
  const double mean = savedMean[c], invstd = savedInvstd[c];
  double sumDy = 0.0, sumDyXhat = 0.0;
  for (int64_t n = 0; n < l.batch; ++n) {
    const int64_t base = (n * l.channels + c) * l.spatial;
    for (int64_t i = base; i < base + l.spatial; ++i) {
      sumDy += dy[i];
      sumDyXhat += dy[i] * (x[i] - mean) * invstd;
    }
  }
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

/// dx = scale invstd (dy - mean(dy) - xhat mean(dy xhat)) with channel c's terms.
PIPE_AXIS_HD inline float batchNormGradValue(const double *terms, int64_t c, float x, float dy) {
  const double *t = terms + 5 * c;
  const double xhat = (x - t[0]) * t[1];
  return static_cast<float>(t[2] * (dy - t[3] - xhat * t[4]));
}

} // namespace piperun

#endif // PIPE_RUNTIME_KERNELS_AXIS_MATH_H
