//===- Optimizer.cpp - torch.optim's SGD, momentum, Adam and AdamW ---------===//
//
// One update of one parameter on its owner rank, element by element in fp32
// with the same operation order as torch.optim's single-tensor implementations
// (SGD: dampening 0, no Nesterov, the momentum buffer starts as the first
// gradient; Adam: L2 decay added to the gradient, bias-corrected moments;
// AdamW: decoupled decay p *= 1 - lr * wd first).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <cmath>

namespace piperun {
namespace {

void sgd(const OptimizerConfig &o, int64_t n, float *p, const float *g, float *buffer,
         bool firstStep) {
  const float lr = static_cast<float>(o.lr), decay = static_cast<float>(o.weightDecay),
              momentum = static_cast<float>(o.momentum);
  for (int64_t i = 0; i < n; ++i)
    sgdElement(p[i], g[i], buffer ? buffer + i : nullptr, lr, decay, momentum, firstStep);
}

void adam(const OptimizerConfig &o, int64_t step, int64_t n, float *p, const float *g, float *m,
          float *v) {
  const AdamStep s = adamStepOf(o, step);
  for (int64_t i = 0; i < n; ++i)
    adamElement(p[i], g[i], m[i], v[i], s);
}

} // namespace

AdamStep adamStepOf(const OptimizerConfig &o, int64_t step) {
  // Scalars as torch computes them (Python floats), then used in fp32 kernels.
  const double correction1 = 1 - std::pow(o.beta1, static_cast<double>(step));
  const double correction2 = 1 - std::pow(o.beta2, static_cast<double>(step));
  AdamStep s{};
  s.stepSize = static_cast<float>(-(o.lr / correction1));
  s.correction2Sqrt = static_cast<float>(std::sqrt(correction2));
  s.beta1 = static_cast<float>(o.beta1);
  s.beta2 = static_cast<float>(o.beta2);
  s.oneMinusBeta1 = static_cast<float>(1 - o.beta1);
  s.oneMinusBeta2 = static_cast<float>(1 - o.beta2);
  s.eps = static_cast<float>(o.eps);
  s.decay = static_cast<float>(o.weightDecay);
  s.shrink = static_cast<float>(1 - o.lr * o.weightDecay);
  s.decoupled = o.kind == PIPE_ADAMW;
  return s;
}

} // namespace piperun

using namespace piperun;

extern "C" {

void pipe_set_optimizer(pipe_rank *r, int32_t kind, double lr, double momentum, double beta1,
                        double beta2, double eps, double weight_decay) {
  if (kind < PIPE_SGD || kind > PIPE_ADAMW)
    fail(r, "pipe_set_optimizer: unknown optimizer kind %d", kind);
  for (const Parameter &p : r->params)
    if (p.declared)
      fail(r, "pipe_set_optimizer: called after parameter %s was declared", p.name.c_str());
  if (!(lr >= 0) || !(weight_decay >= 0) || !(momentum >= 0) || !(eps >= 0))
    fail(r, "pipe_set_optimizer: lr %g, momentum %g, eps %g and weight decay %g must be >= 0", lr,
         momentum, eps, weight_decay);
  if ((kind == PIPE_ADAM || kind == PIPE_ADAMW) &&
      !(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1))
    fail(r, "pipe_set_optimizer: Adam's betas (%g, %g) must lie in [0, 1)", beta1, beta2);
  r->optimizer = OptimizerConfig{true, kind, lr, momentum, beta1, beta2, eps, weight_decay};
}

void pipe_update(pipe_rank *r, int32_t id) {
  Parameter &p = parameterOf(r, id, "pipe_update");
  if (!p.trainable)
    fail(r, "pipe_update: parameter %s is not trainable", p.name.c_str());
  if (p.owner != r->id)
    fail(r, "pipe_update: parameter %s is owned by rank %d", p.name.c_str(), p.owner);
  if (!r->optimizer.set)
    fail(r, "pipe_update: no optimizer (pipe_set_optimizer was not called)");
  if (r->settings.replicas > 1 && r->averagedStep != r->step)
    fail(r,
         "pipe_update: the gradient of parameter %s is not averaged over the %d replicas "
         "(pipe_all_reduce_grads must come before the updates of each step)",
         p.name.c_str(), r->settings.replicas);
  const int64_t n = p.value->numel;
  ++p.updates;
  if (Device *device = deviceOf(r))
    if (const DeviceKernels *native = nativeKernels(device);
        native && native->update && onDevice(r, [&] { return native->update(r, p); }))
      return;
  HostAccess host(r);
  auto *value = static_cast<float *>(host.write(p.value));
  auto *grad = static_cast<const float *>(host.read(p.gradient));
  switch (r->optimizer.kind) {
  case PIPE_SGD:
    sgd(r->optimizer, n, value, grad, nullptr, false);
    break;
  case PIPE_MOMENTUM:
    sgd(r->optimizer, n, value, grad, static_cast<float *>(host.write(p.state[0])),
        p.updates == 1);
    break;
  case PIPE_ADAM:
  case PIPE_ADAMW:
    adam(r->optimizer, p.updates, n, value, grad, static_cast<float *>(host.write(p.state[0])),
         static_cast<float *>(host.write(p.state[1])));
    break;
  }
  host.commit();
}

} // extern "C"
