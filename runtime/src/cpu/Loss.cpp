//===- Loss.cpp - softmax cross entropy and its gradient -----------------===//
//
// ONNX SoftmaxCrossEntropyLoss (mean reduction, ignore_index) with classes on
// dim 1, as torch.nn.functional.cross_entropy computes it, times a scale.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

// Splits logits [N, C, d...] into N, C and the product of d..., and checks
// labels [N, d...] (I64 or I32) and every label (a class or ignore_index).
struct LossShape {
  int64_t batch = 0, classes = 0, inner = 0;
};

template <typename L>
void checkLabelValues(pipe_rank *r, const char *op, const L *labels, int64_t count,
                      int64_t classes, int64_t ignoreIndex) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (label != ignoreIndex && (label < 0 || label >= classes))
      fail(r, "%s: label %lld at flat position %lld is outside [0, %lld) and is not "
              "ignore_index %lld",
           op, static_cast<long long>(label), static_cast<long long>(i),
           static_cast<long long>(classes), static_cast<long long>(ignoreIndex));
  }
}

LossShape checkLossShapes(pipe_rank *r, const char *op, const pipe_tensor *logits,
                          const char *logitsName, const pipe_tensor *labels,
                          int64_t ignoreIndex) {
  requireTensor(r, op, logitsName, logits);
  requireTensor(r, op, "labels", labels);
  requireDtype(r, op, logitsName, logits, PIPE_F32);
  requireMinRank(r, op, logitsName, logits, 2);
  int64_t expected[PIPE_MAX_RANK];
  int rank = 0;
  expected[rank++] = logits->shape[0];
  for (int d = 2; d < logits->rank; ++d)
    expected[rank++] = logits->shape[d];
  requireShape(r, op, "labels", labels, rank, expected);
  LossShape shape;
  shape.batch = logits->shape[0];
  shape.classes = logits->shape[1];
  shape.inner = 1;
  for (int d = 2; d < logits->rank; ++d)
    shape.inner *= logits->shape[d];
  dispatchDtype<bit(PIPE_I64) | bit(PIPE_I32)>(r, op, "labels", labels->dtype, [&](auto tag) {
    using L = decltype(tag);
    checkLabelValues(r, op, static_cast<const L *>(labels->data), labels->numel, shape.classes,
                     ignoreIndex);
  });
  return shape;
}

int64_t labelAt(const pipe_tensor *labels, int64_t i) {
  if (labels->dtype == PIPE_I32)
    return static_cast<const int32_t *>(labels->data)[i];
  return static_cast<const int64_t *>(labels->data)[i];
}

} // namespace

extern "C" {

void pipe_k_softmax_cross_entropy(pipe_rank *r, const pipe_tensor *logits,
                                  const pipe_tensor *labels, pipe_tensor *loss,
                                  pipe_tensor *log_prob, int64_t ignore_index, double scale) {
  PIPE_DEVICE_STAGED(r, pipe_k_softmax_cross_entropy, logits, labels, loss, log_prob, ignore_index,
                     scale);
  const char *op = "softmax_cross_entropy";
  const LossShape shape = checkLossShapes(r, op, logits, "logits", labels, ignore_index);
  requireTensor(r, op, "loss", loss);
  requireDtype(r, op, "loss", loss, PIPE_F32);
  requireNumel(r, op, "loss", loss, 1);
  if (log_prob) {
    requireTensor(r, op, "log_prob", log_prob);
    requireDtype(r, op, "log_prob", log_prob, PIPE_F32);
    requireSameShape(r, op, "logits", logits, "log_prob", log_prob);
  }
  const int64_t classes = shape.classes, inner = shape.inner;
  const int64_t positions = shape.batch * inner;
  const float *x = static_cast<const float *>(logits->data);
  float *lp = log_prob ? static_cast<float *>(log_prob->data) : nullptr;
  // The log-probability of each position's label (0 where ignored), summed in order afterwards.
  Scratch picked(r, PIPE_F64, positions);
  double *pick = picked.as<double>();
  const int threads = threadsFor(r, positions * classes * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t n = p / inner, j = p % inner;
    const float *row = x + n * classes * inner + j;
    // log_softmax over the classes: x - (max + log sum exp(x - max)).
    float maximum = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < classes; ++c)
      maximum = std::max(maximum, row[c * inner]);
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c)
      sum += std::exp(static_cast<double>(row[c * inner]) - maximum);
    const double logSum = maximum + std::log(sum);
    if (lp) {
      float *out = lp + n * classes * inner + j;
      for (int64_t c = 0; c < classes; ++c)
        out[c * inner] = static_cast<float>(row[c * inner] - logSum);
    }
    const int64_t label = labelAt(labels, p);
    pick[p] = label == ignore_index ? 0.0 : row[label * inner] - logSum;
  }
  double total = 0.0;
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p) {
    if (labelAt(labels, p) == ignore_index)
      continue;
    total -= pick[p];
    ++counted;
  }
  // No counted entry: the mean is 0/0 = NaN, as in torch.
  const double mean = counted ? total / static_cast<double>(counted)
                              : std::numeric_limits<double>::quiet_NaN();
  static_cast<float *>(loss->data)[0] = static_cast<float>(mean * scale);
}

void pipe_k_softmax_cross_entropy_grad(pipe_rank *r, const pipe_tensor *dloss,
                                       const pipe_tensor *log_prob, const pipe_tensor *labels,
                                       pipe_tensor *dlogits, int64_t ignore_index,
                                       double scale) {
  PIPE_DEVICE_STAGED(r, pipe_k_softmax_cross_entropy_grad, dloss, log_prob, labels, dlogits,
                     ignore_index, scale);
  const char *op = "softmax_cross_entropy_grad";
  const LossShape shape = checkLossShapes(r, op, log_prob, "log_prob", labels, ignore_index);
  requireTensor(r, op, "dloss", dloss);
  requireDtype(r, op, "dloss", dloss, PIPE_F32);
  requireNumel(r, op, "dloss", dloss, 1);
  requireTensor(r, op, "dlogits", dlogits);
  requireDtype(r, op, "dlogits", dlogits, PIPE_F32);
  requireSameShape(r, op, "log_prob", log_prob, "dlogits", dlogits);
  const int64_t classes = shape.classes, inner = shape.inner;
  const int64_t positions = shape.batch * inner;
  int64_t counted = 0;
  for (int64_t p = 0; p < positions; ++p)
    counted += labelAt(labels, p) != ignore_index;
  const double factor =
      counted ? static_cast<double>(static_cast<const float *>(dloss->data)[0]) * scale /
                    static_cast<double>(counted)
              : 0.0;
  const float *lp = static_cast<const float *>(log_prob->data);
  float *dx = static_cast<float *>(dlogits->data);
  const int threads = threadsFor(r, positions * classes * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < positions; ++p) {
    const int64_t n = p / inner, j = p % inner;
    const int64_t offset = n * classes * inner + j;
    const int64_t label = labelAt(labels, p);
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t at = offset + c * inner;
      if (label == ignore_index) {
        dx[at] = 0.0f;
        continue;
      }
      const double softmax = std::exp(static_cast<double>(lp[at]));
      dx[at] = static_cast<float>(factor * (softmax - (c == label ? 1.0 : 0.0)));
    }
  }
}

} // extern "C"
