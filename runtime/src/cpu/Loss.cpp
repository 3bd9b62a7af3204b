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

LossGeometry lossChecks(pipe_rank *r, const char *op, const pipe_tensor *logits,
                        const char *logitsName, const pipe_tensor *labels,
                        const void *labelValues, int64_t ignoreIndex, double scale) {
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
  LossGeometry g;
  g.classes = logits->shape[1];
  for (int d = 2; d < logits->rank; ++d)
    g.inner *= logits->shape[d];
  g.positions = logits->shape[0] * g.inner;
  g.ignoreIndex = ignoreIndex;
  g.scale = scale;
  dispatchDtype<bit(PIPE_I64) | bit(PIPE_I32)>(r, op, "labels", labels->dtype, [&](auto tag) {
    using L = decltype(tag);
    const L *values = static_cast<const L *>(labelValues);
    checkLabelValues(r, op, values, labels->numel, g.classes, ignoreIndex);
    for (int64_t p = 0; p < g.positions; ++p)
      g.counted += static_cast<int64_t>(values[p]) != ignoreIndex;
  });
  return g;
}

int64_t labelAt(const pipe_tensor *labels, int64_t i) {
  if (labels->dtype == PIPE_I32)
    return static_cast<const int32_t *>(labels->data)[i];
  return static_cast<const int64_t *>(labels->data)[i];
}

} // namespace

LossGeometry piperun::cpu::crossEntropyChecks(pipe_rank *r, const pipe_tensor *logits,
                                              const pipe_tensor *labels,
                                              const void *labelValues, const pipe_tensor *loss,
                                              const pipe_tensor *log_prob, int64_t ignore_index,
                                              double scale) {
  const char *op = "softmax_cross_entropy";
  const LossGeometry g =
      lossChecks(r, op, logits, "logits", labels, labelValues, ignore_index, scale);
  requireTensor(r, op, "loss", loss);
  requireDtype(r, op, "loss", loss, PIPE_F32);
  requireNumel(r, op, "loss", loss, 1);
  if (log_prob) {
    requireTensor(r, op, "log_prob", log_prob);
    requireDtype(r, op, "log_prob", log_prob, PIPE_F32);
    requireSameShape(r, op, "logits", logits, "log_prob", log_prob);
  }
  return g;
}

LossGeometry piperun::cpu::crossEntropyGradChecks(pipe_rank *r, const pipe_tensor *dloss,
                                                  const pipe_tensor *log_prob,
                                                  const pipe_tensor *labels,
                                                  const void *labelValues,
                                                  const pipe_tensor *dlogits,
                                                  int64_t ignore_index, double scale) {
  const char *op = "softmax_cross_entropy_grad";
  const LossGeometry g =
      lossChecks(r, op, log_prob, "log_prob", labels, labelValues, ignore_index, scale);
  requireTensor(r, op, "dloss", dloss);
  requireDtype(r, op, "dloss", dloss, PIPE_F32);
  requireNumel(r, op, "dloss", dloss, 1);
  requireTensor(r, op, "dlogits", dlogits);
  requireDtype(r, op, "dlogits", dlogits, PIPE_F32);
  requireSameShape(r, op, "log_prob", log_prob, "dlogits", dlogits);
  return g;
}

extern "C" {

void pipe_k_softmax_cross_entropy(pipe_rank *r, const pipe_tensor *logits,
                                  const pipe_tensor *labels, pipe_tensor *loss,
                                  pipe_tensor *log_prob, int64_t ignore_index, double scale) {
  PIPE_DEVICE_KERNEL(r, softmaxCrossEntropy, pipe_k_softmax_cross_entropy, logits, labels, loss,
                     log_prob, ignore_index, scale);
  const LossGeometry g =
      crossEntropyChecks(r, logits, labels, labels->data, loss, log_prob, ignore_index, scale);
  const float *x = static_cast<const float *>(logits->data);
  float *lp = log_prob ? static_cast<float *>(log_prob->data) : nullptr;
  // The log-probability of each position's label (0 where ignored), summed in
  // order afterwards.
  Scratch picked(r, PIPE_F64, g.positions);
  double *pick = picked.as<double>();
  const int threads = threadsFor(r, g.positions * g.classes * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < g.positions; ++p)
    pick[p] = crossEntropyPosition(g, p, x, labelAt(labels, p), lp);
  static_cast<float *>(loss->data)[0] = crossEntropyLoss(g, pick);
}

void pipe_k_softmax_cross_entropy_grad(pipe_rank *r, const pipe_tensor *dloss,
                                       const pipe_tensor *log_prob, const pipe_tensor *labels,
                                       pipe_tensor *dlogits, int64_t ignore_index,
                                       double scale) {
  PIPE_DEVICE_KERNEL(r, softmaxCrossEntropyGrad, pipe_k_softmax_cross_entropy_grad, dloss,
                     log_prob, labels, dlogits, ignore_index, scale);
  const LossGeometry g = crossEntropyGradChecks(r, dloss, log_prob, labels, labels->data,
                                                dlogits, ignore_index, scale);
  const float seed = static_cast<const float *>(dloss->data)[0];
  const float *lp = static_cast<const float *>(log_prob->data);
  float *dx = static_cast<float *>(dlogits->data);
  const int threads = threadsFor(r, g.positions * g.classes * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t p = 0; p < g.positions; ++p)
    crossEntropyGradPosition(g, p, seed, lp, labelAt(labels, p), dx);
}

} // extern "C"
