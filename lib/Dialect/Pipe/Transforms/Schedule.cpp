//===- Schedule.cpp - the pipe-schedule pass ------------------------------===//
//
// The order of compute comes from the partitioner (its schedule generators
// and its checker are the single source of truth); this pass only adds the
// communication each F and B implies, from the stage's send/recv ops.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Actions.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "partitioner/Checker.h"
#include "partitioner/Error.h"
#include "partitioner/Schedule.h"

#include "mlir/IR/Builders.h"

#include <set>

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPESCHEDULE
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;

namespace {
/// A problem with one layer per stage and one tensor per pair of stages that
/// the pipeline's activation sends connect: enough for the partitioner's
/// generators and checker, which reason about the stage graph, not layer
/// costs. The edges are the IR's own, so a plan is checked against the
/// dependencies the stages really have (stages on parallel branches, as in a
/// general allocation, do not wait for each other).
partitioner::Problem stageGraph(PipelineOp pipeline, int64_t stages, int64_t gpus,
                                int64_t microbatches, partitioner::ScheduleKind kind) {
  partitioner::Problem problem;
  problem.name = "stages";
  for (int64_t s = 0; s < stages; ++s) {
    partitioner::Layer layer;
    layer.name = "stage" + std::to_string(s);
    layer.nodeIds = {layer.name};
    layer.forwardMs = 1;
    layer.backwardMs = 2;
    problem.layers.push_back(layer);
  }
  std::set<std::pair<int64_t, int64_t>> edges;
  pipeline.walk([&](SendOp send) {
    if (send.getKind() == TransferKind::activation)
      if (auto stage = send->getParentOfType<StageOp>())
        if (send.getPeer() >= 0 && send.getPeer() < stages && stage.getIndex() >= 0 &&
            stage.getIndex() < stages)
          edges.insert({stage.getIndex(), send.getPeer()});
  });
  for (auto [from, to] : edges) {
    partitioner::Tensor tensor;
    tensor.producer = static_cast<int>(from);
    tensor.consumers = {static_cast<int>(to)};
    tensor.bytes = 1;
    problem.tensors.push_back(tensor);
  }
  // With no tensor at all, finalize() would assume a chain; one tensor that
  // nobody consumes says the stages are independent.
  if (problem.tensors.empty())
    problem.tensors.push_back(partitioner::Tensor{0, {}, 0});
  problem.platform.gpus = static_cast<int>(gpus);
  problem.training.microbatches = microbatches;
  problem.training.schedule = kind;
  problem.finalize();
  return problem;
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
    int64_t stages = pipeline.getNumStages(), microbatches = pipeline.getMicrobatches();
    partitioner::ScheduleKind kind;
    try {
      kind = partitioner::parseScheduleKind(pipeline.getSchedule().str());
    } catch (const partitioner::Error &e) {
      return pipeline.emitOpError(e.what());
    }
    // Stage s runs on the GPU its pipe.stage names (several, when interleaved).
    partitioner::Allocation allocation;
    allocation.gpuOfStage.assign(stages, 0);
    int64_t gpus = 1;
    for (StageOp stage : pipeline.getBody().getOps<StageOp>()) {
      allocation.gpuOfStage[stage.getIndex()] = static_cast<int>(stage.getDevice());
      gpus = std::max(gpus, stage.getDevice() + 1);
    }
    for (int64_t s = 0; s < stages; ++s)
      allocation.stageOfLayer.push_back(static_cast<int>(s));
    partitioner::Problem problem;
    try {
      problem = stageGraph(pipeline, stages, gpus, microbatches, kind);
    } catch (const partitioner::Error &e) {
      return pipeline.emitOpError(e.what());
    }
    partitioner::Schedule order;
    order.kind = kind;
    order.microbatches = static_cast<int>(microbatches);
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
      try {
        order = partitioner::makeSchedule(kind, problem, allocation, static_cast<int>(microbatches));
      } catch (const partitioner::Error &e) {
        return pipeline.emitOpError("cannot build the schedule: ") << e.what();
      }
    }
    partitioner::CheckReport check;
    try {
      check = partitioner::checkSchedule(problem, allocation, order);
    } catch (const partitioner::Error &e) {
      return pipeline.emitOpError("the schedule fails the partitioner's checker: ") << e.what();
    }
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
