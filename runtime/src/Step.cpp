//===- Step.cpp - steps, actions, nodes and the loss -----------------------===//
//
// The clock of a rank: pipe_step_begin/end bracket a training step (gradients
// zeroed, then the end-of-step checks: no open action, every saved slot taken
// back, no workspace or received tensor left), pipe_action_begin/end the
// schedule's actions (the measured trace and period), pipe_node the ONNX node
// of the kernels that follow (error messages, per-node time).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <cstring>

namespace piperun {
void checkSlotsEmpty(pipe_rank *r); // SavedSlots.cpp
}

using namespace piperun;

static void checkStopped(pipe_rank *r) {
  if (r->transport)
    r->transport->checkStopped();
}

extern "C" {

void pipe_declare_node(pipe_rank *r, int32_t id, const char *name) {
  r->nodeNames[id] = name && *name ? name : "#" + std::to_string(id);
}

void pipe_step_begin(pipe_rank *r) {
  checkStopped(r);
  if (r->inStep)
    fail(r, "pipe_step_begin: step %lld has not ended", static_cast<long long>(r->step));
  for (Parameter &p : r->params)
    if (p.gradient)
      zeroTensor(r, p.gradient);
  reapSends(r);
  r->inStep = true;
  r->current = StepRecord{};
  r->current.step = r->step;
  r->current.startMs = nowMs(r);
}

void pipe_step_end(pipe_rank *r) {
  if (!r->inStep)
    fail(r, "pipe_step_end without pipe_step_begin");
  if (r->inAction)
    fail(r, "pipe_step_end: action %s has not ended", actionName(r->action).c_str());
  closeNode(r);
  checkSlotsEmpty(r);
  reapSends(r);
  // The slots are empty: a SAVED tensor left is a restored one never freed.
  int64_t workspace = r->memory.live(PIPE_MEM_WORKSPACE) + r->memory.live(PIPE_MEM_SAVED);
  int64_t received = r->memory.live(PIPE_MEM_COMM) - r->pendingSendBytes;
  if (workspace > 0 || received > 0) {
    const TensorBox *left = anyTransientTensor(r);
    std::string example;
    if (left)
      example = ", e.g. " + describe(&left->tensor) +
                (left->node >= 0 ? " made in node " + nodeName(r, left->node)
                                 : std::string(" made outside any node"));
    fail(r,
         "step %lld ended with %lld bytes of workspace and %lld bytes of received tensors "
         "still allocated (a missing pipe_free%s)",
         static_cast<long long>(r->step), static_cast<long long>(workspace),
         static_cast<long long>(received), example.c_str());
  }
  r->current.endMs = nowMs(r);
  r->steps.push_back(r->current);
  r->inStep = false;
  ++r->step;
  if (r->stepEnded)
    r->stepEnded(transportRank(r, r->id), r->steps.back());
}

void pipe_action_begin(pipe_rank *r, int32_t kind, int32_t stage, int32_t microbatch) {
  checkStopped(r);
  if (!r->inStep)
    fail(r, "pipe_action_begin outside a step");
  if (r->inAction)
    fail(r, "pipe_action_begin: action %s has not ended", actionName(r->action).c_str());
  if (kind < PIPE_ACTION_FORWARD || kind > PIPE_ACTION_OPTIMIZER)
    fail(r, "pipe_action_begin: unknown action kind %d", kind);
  closeNode(r);
  reapSends(r);
  r->inAction = true;
  r->action = ActionRecord{kind, stage, microbatch, r->step, nowMs(r), 0};
  r->waitMsAtActionBegin = r->waitMs;
}

void pipe_action_end(pipe_rank *r) {
  if (!r->inAction)
    fail(r, "pipe_action_end without pipe_action_begin");
  closeNode(r);
  reapSends(r);
  r->action.endMs = nowMs(r);
  r->action.waitMs = r->waitMs - r->waitMsAtActionBegin;
  r->actions.push_back(r->action);
  r->inAction = false;
}

void pipe_node(pipe_rank *r, int32_t node) {
  checkStopped(r);
  closeNode(r);
  r->currentNode = node;
  r->nodeStartMs = nowMs(r);
  ++r->nodeTimes[node].calls;
}

void pipe_loss(pipe_rank *r, const pipe_tensor *loss) {
  boxOf(r, loss, "pipe_loss");
  if (!r->inStep)
    fail(r, "pipe_loss outside a step");
  if (loss->numel != 1 || (loss->dtype != PIPE_F32 && loss->dtype != PIPE_F64))
    fail(r, "pipe_loss: the loss is %s, not one f32 or f64", describe(loss).c_str());
  HostAccess host(r);
  const void *value = host.read(loss);
  r->current.loss += loss->dtype == PIPE_F32 ? static_cast<const float *>(value)[0]
                                             : static_cast<const double *>(value)[0];
  r->current.hasLoss = true;
}

} // extern "C"
