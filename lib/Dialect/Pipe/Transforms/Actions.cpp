//===- Actions.cpp - schedule actions between the partitioner and IR -------===//
#include "pipe/Dialect/Pipe/Transforms/Actions.h"

using namespace mlir;
using namespace pipe::pipeline;

ActionAttr pipe::pipeline::actionAttr(MLIRContext *context, const partitioner::Action &action) {
  ActionKind kind = ActionKind::forward;
  switch (action.kind) {
  case partitioner::ActionKind::Forward:
    kind = ActionKind::forward;
    break;
  case partitioner::ActionKind::Backward:
    kind = ActionKind::backward;
    break;
  case partitioner::ActionKind::BackwardInput:
    kind = ActionKind::backward_input;
    break;
  case partitioner::ActionKind::BackwardWeight:
    kind = ActionKind::backward_weight;
    break;
  }
  return ActionAttr::get(context, kind, action.microbatch, action.stage);
}

partitioner::Action pipe::pipeline::partitionerAction(ActionAttr action) {
  partitioner::Action out;
  switch (action.getKind()) {
  case ActionKind::forward:
    out.kind = partitioner::ActionKind::Forward;
    break;
  case ActionKind::backward:
    out.kind = partitioner::ActionKind::Backward;
    break;
  case ActionKind::backward_input:
    out.kind = partitioner::ActionKind::BackwardInput;
    break;
  case ActionKind::backward_weight:
    out.kind = partitioner::ActionKind::BackwardWeight;
    break;
  }
  out.microbatch = static_cast<int>(action.getMb());
  out.stage = static_cast<int>(action.getStage());
  return out;
}

ArrayAttr pipe::pipeline::scheduleOrderAttr(Builder &b, const partitioner::Schedule &schedule) {
  SmallVector<Attribute> gpus;
  for (const auto &list : schedule.actions) {
    SmallVector<Attribute> actions;
    for (const partitioner::Action &action : list)
      actions.push_back(actionAttr(b.getContext(), action));
    gpus.push_back(b.getArrayAttr(actions));
  }
  return b.getArrayAttr(gpus);
}
