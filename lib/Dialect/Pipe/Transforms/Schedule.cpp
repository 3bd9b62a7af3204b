//===- Schedule.cpp - the pipe-schedule pass ------------------------------===//
//
// The order of compute comes from the partitioner (its schedule generators
// and its checker are the single source of truth); this pass only adds the
// communication each F and B implies, from the stage's send/recv ops.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Actions.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "partitioner/Planner.h"

#include "mlir/IR/Builders.h"

#include <set>

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPESCHEDULE
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;

namespace {
/// The pipeline as the partitioner's schedule generators and checker see it:
/// the GPU of each stage and the activation edges. The edges are the IR's own,
/// so a plan is checked against the dependencies the stages really have
/// (stages on parallel branches, as in a general allocation, do not wait for
/// each other).
partitioner::StagePipeline stagePipeline(PipelineOp pipeline, partitioner::ScheduleKind kind) {
  partitioner::StagePipeline stages;
  stages.gpuOfStage.assign(pipeline.getNumStages(), 0);
  for (StageOp stage : pipeline.getBody().getOps<StageOp>())
    if (stage.getIndex() >= 0 && stage.getIndex() < pipeline.getNumStages())
      stages.gpuOfStage[stage.getIndex()] = static_cast<int>(stage.getDevice());
  std::set<std::pair<int, int>> edges;
  pipeline.walk([&](SendOp send) {
    if (send.getKind() == TransferKind::activation)
      if (auto stage = send->getParentOfType<StageOp>())
        edges.insert({static_cast<int>(stage.getIndex()), static_cast<int>(send.getPeer())});
  });
  stages.activationEdges.assign(edges.begin(), edges.end());
  stages.microbatches = static_cast<int>(pipeline.getMicrobatches());
  stages.schedule = kind;
  return stages;
}

struct Transfers {
  SmallVector<RecvOp> activationIn, gradientIn;
  SmallVector<SendOp> activationOut, gradientOut;
  bool tiedParameters = false;
};

Transfers collectTransfers(StageOp stage) {
  Transfers t;
  stage.walk([&](Operation *op) {
    if (auto recv = dyn_cast<RecvOp>(op))
      (recv.getKind() == TransferKind::activation ? t.activationIn : t.gradientIn).push_back(recv);
    else if (auto send = dyn_cast<SendOp>(op))
      (send.getKind() == TransferKind::activation ? t.activationOut : t.gradientOut).push_back(send);
    else if (auto param = dyn_cast<ParamOp>(op))
      t.tiedParameters |= param.getUsers().size() > 1;
  });
  return t;
}

struct PipeSchedulePass : pipe::pipeline::impl::PipeScheduleBase<PipeSchedulePass> {
  void runOnOperation() override {
    WalkResult walk = getOperation().walk([&](PipelineOp pipeline) {
      return failed(schedule(pipeline)) ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (walk.wasInterrupted())
      signalPassFailure();
  }

  LogicalResult schedule(PipelineOp pipeline) {
    auto kind = partitioner::parseScheduleKind(pipeline.getSchedule().str());
    if (!kind)
      return pipeline.emitOpError(kind.error());
    const partitioner::StagePipeline stages = stagePipeline(pipeline, *kind);
    partitioner::Schedule order;
    order.kind = *kind;
    order.microbatches = stages.microbatches;
    PlanAttr plan = pipeline.getPlanAttr();
    ArrayAttr planned = plan ? plan.getActions() : ArrayAttr();
    if (planned) {
      // The plan attribute's verifier has checked the lists' element types.
      for (Attribute gpuList : planned) {
        order.actions.emplace_back();
        for (Attribute a : cast<ArrayAttr>(gpuList)) {
          partitioner::Action action = partitionerAction(cast<ActionAttr>(a));
          order.splitBackward |= action.kind == partitioner::ActionKind::BackwardInput;
          order.actions.back().push_back(action);
        }
      }
    } else {
      auto generated = partitioner::makeSchedule(stages);
      if (!generated)
        return pipeline.emitOpError("cannot build the schedule: ") << generated.error();
      order = std::move(*generated);
    }
    partitioner::CheckReport check = partitioner::checkSchedule(stages, order);
    if (!check.ok()) {
      auto diag = pipeline.emitOpError("the schedule fails the partitioner's checker: ")
                  << check.violations.front();
      for (size_t i = 1; i < check.violations.size() && i < 5; ++i)
        diag.attachNote() << check.violations[i];
      return diag;
    }

    Builder b(pipeline.getContext());
    for (StageOp stage : pipeline.getBody().getOps<StageOp>()) {
      int64_t gpu = stage.getDevice();
      if (gpu >= static_cast<int64_t>(order.actions.size()))
        return stage.emitOpError("device ") << gpu << " has no action list";
      Transfers t = collectTransfers(stage);
      SmallVector<Attribute> actions;
      MLIRContext *ctx = b.getContext();
      auto transfer = [&](TransferDirection direction, TransferKind kind, int64_t mb,
                          int64_t from, int64_t to, int64_t tag) {
        actions.push_back(TransferAttr::get(ctx, direction, kind, mb, from, to, tag));
      };
      int64_t self = stage.getIndex();
      for (const partitioner::Action &action : order.actions[gpu]) {
        if (action.stage != self)
          continue;
        int64_t mb = action.microbatch;
        switch (action.kind) {
        case partitioner::ActionKind::Forward:
          for (RecvOp r : t.activationIn)
            transfer(TransferDirection::recv, TransferKind::activation, mb, r.getPeer(), self,
                     r.getTag());
          actions.push_back(actionAttr(ctx, action));
          for (SendOp s : t.activationOut)
            transfer(TransferDirection::send, TransferKind::activation, mb, self, s.getPeer(),
                     s.getTag());
          break;
        case partitioner::ActionKind::Backward:
        case partitioner::ActionKind::BackwardInput:
          for (RecvOp r : t.gradientIn)
            transfer(TransferDirection::recv, TransferKind::gradient, mb, r.getPeer(), self,
                     r.getTag());
          actions.push_back(actionAttr(ctx, action));
          for (SendOp s : t.gradientOut)
            transfer(TransferDirection::send, TransferKind::gradient, mb, self, s.getPeer(),
                     s.getTag());
          break;
        case partitioner::ActionKind::BackwardWeight:
          actions.push_back(actionAttr(ctx, action));
          break;
        }
      }
      if (t.tiedParameters)
        actions.push_back(StepActionAttr::get(ctx, StepAction::reduce_tied_gradients));
      actions.push_back(StepActionAttr::get(ctx, StepAction::optimizer_step));
      stage.setActionsAttr(b.getArrayAttr(actions));
    }
    pipeline.setOrderAttr(scheduleOrderAttr(b, order));
    return success();
  }
};
} // namespace
