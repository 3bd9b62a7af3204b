//===- Schedule.cpp - the pipe-schedule pass ------------------------------===//
//
// The order of compute comes from the partitioner (its schedule generators
// and its checker are the single source of truth); this pass only adds the
// communication each F and B implies, from the stage's send/recv ops.
//
//===----------------------------------------------------------------------===//
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
    if (send.getKind() == "activation")
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

/// Parses "F3@s1", "B0@s2", "Bi4@s0", "W4@s0".
FailureOr<partitioner::Action> parseAction(StringRef text) {
  partitioner::Action action;
  if (text.consume_front("Bi"))
    action.kind = partitioner::ActionKind::BackwardInput;
  else if (text.consume_front("F"))
    action.kind = partitioner::ActionKind::Forward;
  else if (text.consume_front("B"))
    action.kind = partitioner::ActionKind::Backward;
  else if (text.consume_front("W"))
    action.kind = partitioner::ActionKind::BackwardWeight;
  else
    return failure();
  auto [mb, stage] = text.split("@s");
  int mbValue, stageValue;
  if (mb.getAsInteger(10, mbValue) || stage.getAsInteger(10, stageValue))
    return failure();
  action.microbatch = mbValue;
  action.stage = stageValue;
  return action;
}

/// The checked order as the typed attribute the lowering reads.
ArrayAttr typedOrder(Builder &b, const partitioner::Schedule &order) {
  SmallVector<Attribute> gpus;
  for (const auto &list : order.actions) {
    SmallVector<Attribute> actions;
    for (const partitioner::Action &action : list) {
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
      actions.push_back(ActionAttr::get(b.getContext(), kind, action.microbatch, action.stage));
    }
    gpus.push_back(b.getArrayAttr(actions));
  }
  return b.getArrayAttr(gpus);
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
      (recv.getKind() == "activation" ? t.activationIn : t.gradientIn).push_back(recv);
    else if (auto send = dyn_cast<SendOp>(op))
      (send.getKind() == "activation" ? t.activationOut : t.gradientOut).push_back(send);
    else if (auto param = dyn_cast<ParamOp>(op))
      t.tiedParameters |= param.getUsers().size() > 1;
  });
  return t;
}

/// The partitioner's transfer action (one vocabulary with plan.json) and the
/// tensor it moves: "SEND_F3@s1->s2 tag=7".
std::string transfer(bool send, bool gradient, int microbatch, int64_t from, int64_t to,
                     int64_t tag) {
  return partitioner::transferAction(send, gradient, microbatch, static_cast<int>(from),
                                     static_cast<int>(to)) +
         " tag=" + std::to_string(tag);
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
    ArrayAttr planned;
    if (auto plan = pipeline.getPlanAttr())
      planned = plan.getAs<ArrayAttr>("actions");
    if (planned) {
      for (Attribute gpuList : planned) {
        auto list = dyn_cast<ArrayAttr>(gpuList);
        if (!list)
          return pipeline.emitOpError("plan.actions must be a list per GPU");
        order.actions.emplace_back();
        for (Attribute a : list) {
          auto text = dyn_cast<StringAttr>(a);
          FailureOr<partitioner::Action> action =
              text ? parseAction(text.getValue()) : FailureOr<partitioner::Action>(failure());
          if (failed(action))
            return pipeline.emitOpError("cannot read plan action ") << a;
          order.splitBackward |= action->kind == partitioner::ActionKind::BackwardInput;
          order.actions.back().push_back(*action);
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
      auto add = [&](const std::string &s) { actions.push_back(b.getStringAttr(s)); };
      int64_t self = stage.getIndex();
      for (const partitioner::Action &action : order.actions[gpu]) {
        if (action.stage != self)
          continue;
        int mb = action.microbatch;
        switch (action.kind) {
        case partitioner::ActionKind::Forward:
          for (RecvOp r : t.activationIn)
            add(transfer(false, false, mb, r.getPeer(), self, r.getTag()));
          add(partitioner::toString(action));
          for (SendOp s : t.activationOut)
            add(transfer(true, false, mb, self, s.getPeer(), s.getTag()));
          break;
        case partitioner::ActionKind::Backward:
        case partitioner::ActionKind::BackwardInput:
          for (RecvOp r : t.gradientIn)
            add(transfer(false, true, mb, r.getPeer(), self, r.getTag()));
          add(partitioner::toString(action));
          for (SendOp s : t.gradientOut)
            add(transfer(true, true, mb, self, s.getPeer(), s.getTag()));
          break;
        case partitioner::ActionKind::BackwardWeight:
          add(partitioner::toString(action));
          break;
        }
      }
      if (t.tiedParameters)
        add(partitioner::kReduceTiedGradientsAction);
      add(partitioner::kOptimizerStepAction);
      stage.setActionsAttr(b.getArrayAttr(actions));
    }
    pipeline.setOrderAttr(typedOrder(b, order));
    return success();
  }
};
} // namespace
