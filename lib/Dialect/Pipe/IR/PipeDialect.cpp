//===- PipeDialect.cpp - the pipe dialect and its verifiers ---------------===//
//
// Constraint ids (`pipeline_c2`, ...) are listed in docs/pipe-dialect.md and
// each has a case in test/Dialect/Pipe/invalid.mlir.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <tuple>

using namespace mlir;
using namespace pipe::pipeline;

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include "pipe/Dialect/Pipe/IR/PipeOpsDialect.cpp.inc"
#include "pipe/Dialect/Pipe/IR/PipeEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeAttrs.cpp.inc"

/// The first NameLoc in `loc` or nested in it, in the order Location::walk visits
/// them (the location, then its parts in order), without the walker's callbacks
/// and cache: the lowering asks this of every op.
static NameLoc firstNameLoc(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name;
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations())
      if (NameLoc name = firstNameLoc(part))
        return name;
    return {};
  }
  if (auto call = dyn_cast<CallSiteLoc>(loc)) {
    if (NameLoc name = firstNameLoc(call.getCallee()))
      return name;
    return firstNameLoc(call.getCaller());
  }
  if (auto opaque = dyn_cast<OpaqueLoc>(loc))
    return firstNameLoc(opaque.getFallbackLocation());
  if (isa<FileLineColRange, UnknownLoc>(loc))
    return {};
  return loc->findInstanceOf<NameLoc>(); // a location kind not listed above
}

StringRef pipe::pipeline::nodeNameOf(Location loc) {
  if (NameLoc name = firstNameLoc(loc))
    return name.getName().getValue();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    if (auto tag = dyn_cast_or_null<StringAttr>(fused.getMetadata()))
      return tag.getValue();
  return {};
}

std::string pipe::pipeline::formatDouble(double value) {
  // Fewest digits that read back exactly (at most 17 for a double).
  for (int digits = 1; digits <= 17; ++digits) {
    std::string text = llvm::formatv("{0}", llvm::format("%.*g", digits, value)).str();
    if (std::strtod(text.c_str(), nullptr) == value) {
      // MLIR float literals need a '.' before any exponent ("1.0e-08").
      if (text.find('.') == std::string::npos && std::isfinite(value)) {
        size_t exponent = text.find_first_of("eE");
        text.insert(exponent == std::string::npos ? text.size() : exponent, ".0");
      }
      return text;
    }
  }
  return llvm::formatv("{0}", llvm::format("%.17g", value)).str();
}

FailureOr<FloatAttr> pipe::pipeline::parseF64Attr(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return FloatAttr::get(Float64Type::get(parser.getContext()), value);
}

PlanAttr pipe::pipeline::getModulePlan(Operation *module) {
  auto *dialect = module->getContext()->getOrLoadDialect<PipeDialect>();
  return dialect->getPlanAttrHelper().getAttr(module);
}

void pipe::pipeline::setModulePlan(Operation *module, PlanAttr plan) {
  auto *dialect = module->getContext()->getOrLoadDialect<PipeDialect>();
  dialect->getPlanAttrHelper().setAttr(module, plan);
}

FailureOr<llvm::APFloat> pipe::pipeline::parseDouble(AsmParser &parser) {
  double value;
  if (parser.parseFloat(value))
    return failure();
  return llvm::APFloat(value);
}

LogicalResult PlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               StringRef algorithm, StringRef schedule, StringRef objective,
                               int64_t stages, int64_t gpus, int64_t microbatches,
                               int64_t microBatchSize, StringRef target, StringRef dtype,
                               StringRef optimizer, StringRef memoryLimit, StringRef linkModel,
                               llvm::APFloat periodMs, llvm::APFloat iterationMs,
                               llvm::APFloat lowerBoundMs, llvm::APFloat bubble,
                               DenseI64ArrayAttr gpuOfStage,
                               ArrayAttr stageMetrics, ArrayAttr actions, int64_t parameters,
                               int64_t forwardFlops, DenseI64ArrayAttr recomputeStages,
                               int64_t replicas, StringRef replicaLayout) {
  if (stages < 1 || gpus < 1 || microbatches < 1 || microBatchSize < 0 || replicas < 1)
    return emitError() << "plan: stages, gpus, microbatches and replicas must be at least 1, "
                          "micro_batch_size at least 0";
  if (replicaLayout != "pipeline-major" && replicaLayout != "stage-major")
    return emitError() << "plan: replica_layout must be pipeline-major or stage-major, got '"
                       << replicaLayout << "'";
  if (gpuOfStage) {
    if (gpuOfStage.size() != stages)
      return emitError() << "plan: gpu_of_stage has " << gpuOfStage.size() << " entries for "
                         << stages << " stages";
    for (int64_t gpu : gpuOfStage.asArrayRef())
      if (gpu < 0 || gpu >= gpus)
        return emitError() << "plan: gpu_of_stage names GPU " << gpu << " of " << gpus;
  }
  if (recomputeStages)
    for (int64_t stage : recomputeStages.asArrayRef())
      if (stage < 0 || stage >= stages)
        return emitError() << "plan: recompute_stages names stage " << stage << " of "
                           << stages;
  if (stageMetrics) {
    if (static_cast<int64_t>(stageMetrics.size()) != stages)
      return emitError() << "plan: stage_metrics has " << stageMetrics.size()
                         << " entries for " << stages << " stages";
    if (!llvm::all_of(stageMetrics, [](Attribute a) { return isa<StageMetricsAttr>(a); }))
      return emitError() << "plan: stage_metrics must hold #pipe.stage_metrics";
  }
  if (actions) {
    if (static_cast<int64_t>(actions.size()) > gpus)
      return emitError() << "plan: actions has " << actions.size() << " lists for " << gpus
                         << " GPUs";
    for (Attribute list : actions) {
      auto gpuActions = dyn_cast<ArrayAttr>(list);
      if (!gpuActions)
        return emitError() << "plan: actions must be a list of #pipe.action per GPU";
      for (Attribute a : gpuActions) {
        auto action = dyn_cast<ActionAttr>(a);
        if (!action)
          return emitError() << "plan: actions must be a list of #pipe.action per GPU";
        if (action.getStage() < 0 || action.getStage() >= stages || action.getMb() < 0 ||
            action.getMb() >= microbatches)
          return emitError() << "plan: action " << action << " is outside " << stages
                             << " stages and " << microbatches << " micro-batches";
      }
    }
  }
  auto nonNegative = [](const llvm::APFloat &value) {
    return !value.isNaN() && !value.isNegative();
  };
  if (!nonNegative(periodMs) || !nonNegative(iterationMs) || !nonNegative(lowerBoundMs) ||
      !nonNegative(bubble))
    return emitError() << "plan: times and the bubble must be non-negative";
  if (parameters < 0 || forwardFlops < 0)
    return emitError() << "plan: parameters and forward_flops must be non-negative";
  return success();
}

void PipeDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pipe/Dialect/Pipe/IR/PipeAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "pipe/Dialect/Pipe/IR/PipeOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeOps.cpp.inc"

/// The index of the stage enclosing `op`, if any.
static std::optional<int64_t> enclosingStage(Operation *op) {
  if (auto stage = op->getParentOfType<StageOp>())
    return stage.getIndex();
  return std::nullopt;
}

static std::optional<int64_t> enclosingStageCount(Operation *op) {
  if (auto pipeline = op->getParentOfType<PipelineOp>())
    return pipeline.getNumStages();
  return std::nullopt;
}

// [send_c1]/[recv_c1] (kind is activation or gradient) are the attribute's type.
static LogicalResult verifyTransfer(Operation *op, int64_t peer, StringRef prefix) {
  auto self = enclosingStage(op);
  auto count = enclosingStageCount(op);
  if (peer < 0 || (count && peer >= *count))
    return op->emitOpError("[") << prefix << "_c2] peer stage " << peer << " does not exist";
  if (self && *self == peer)
    return op->emitOpError("[") << prefix << "_c2] peer stage " << peer
                                << " is the stage itself";
  return success();
}

LogicalResult SendOp::verify() {
  return verifyTransfer(getOperation(), getPeer(), "send");
}

LogicalResult RecvOp::verify() {
  return verifyTransfer(getOperation(), getPeer(), "recv");
}

LogicalResult ParamOp::verify() {
  // [param_c1] (source is file, external or inline) is the attribute's type.
  if (!llvm::is_contained(getUsers(), getOwner()))
    return emitOpError("[param_c2] owner stage ") << getOwner() << " is not among its users";
  if (auto self = enclosingStage(getOperation()))
    if (!llvm::is_contained(getUsers(), *self))
      return emitOpError("[param_c3] stage ") << *self << " uses the parameter but is not "
                                              << "among its users";
  return success();
}

LogicalResult StageOp::verify() {
  if (getIndex() < 0 || getDevice() < 0)
    return emitOpError("[stage_c1] index and device must be non-negative");
  Block &body = getBody().front();
  if (body.getNumArguments() != getModelInputs().size())
    return emitOpError("[stage_c2] has ") << body.getNumArguments()
                                          << " arguments but model_inputs lists "
                                          << getModelInputs().size();
  auto ret = dyn_cast<ReturnOp>(body.getTerminator());
  if (!ret)
    return emitOpError("[stage_c3] must end with pipe.return");
  if (ret.getValues().size() != getModelOutputs().size())
    return emitOpError("[stage_c3] returns ") << ret.getValues().size()
                                              << " values but model_outputs lists "
                                              << getModelOutputs().size();
  if (getBackward().empty()) {
    if (!ret.getSaved().empty())
      return emitOpError("[stage_c4] keeps ") << ret.getSaved().size()
                                              << " values for a backward it does not have";
    return success();
  }
  Block &backward = getBackward().front();
  if (backward.getArgumentTypes() != ret.getSaved().getTypes())
    return emitOpError("[stage_c4] the backward's arguments must be the forward's saved "
                       "values: ")
           << backward.getNumArguments() << " arguments for " << ret.getSaved().size()
           << " saved values, or their types differ";
  auto end = dyn_cast<ReturnOp>(backward.getTerminator());
  if (!end || !end.getValues().empty() || !end.getSaved().empty())
    return emitOpError("[stage_c5] the backward must end with a pipe.return of no values");
  return success();
}

LogicalResult LossOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getValue().getType());
  if (!type || type.getRank() != 0 || !isa<FloatType>(type.getElementType()))
    return emitOpError("[loss_c1] the loss must be a scalar float tensor, not ")
           << getValue().getType();
  return success();
}

LogicalResult AccumulateGradOp::verify() {
  auto param = getParam().getDefiningOp<ParamOp>();
  if (!param)
    return emitOpError("[accumulate_grad_c1] accumulates into a value that is not a "
                       "pipe.param");
  if (!param.getTrainable())
    return emitOpError("[accumulate_grad_c1] parameter '")
           << param.getName() << "' is not trainable";
  if (param.getType() != getGradient().getType())
    return emitOpError("[accumulate_grad_c2] gradient type ")
           << getGradient().getType() << " differs from the parameter's " << param.getType();
  return success();
}

LogicalResult PipelineOp::verifyRegions() {
  int64_t count = getNumStages();
  if (count < 1)
    return emitOpError("[pipeline_c1] num_stages must be at least 1, got ") << count;
  if (getMicrobatches() < 1)
    return emitOpError("[pipeline_c4] microbatches must be at least 1, got ")
           << getMicrobatches();
  SmallVector<StageOp> stages(count);
  for (Operation &op : getBody().front()) {
    auto stage = dyn_cast<StageOp>(op);
    if (!stage)
      return op.emitOpError("[pipeline_c1] only pipe.stage ops may appear in a pipeline");
    if (stage.getIndex() >= count)
      return stage.emitOpError("[pipeline_c1] index ")
             << stage.getIndex() << " is out of range for " << count << " stages";
    if (stages[stage.getIndex()])
      return stage.emitOpError("[pipeline_c1] index ") << stage.getIndex() << " is repeated";
    stages[stage.getIndex()] = stage;
  }
  for (int64_t i = 0; i < count; ++i)
    if (!stages[i])
      return emitOpError("[pipeline_c1] stage ") << i << " is missing";

  // Every send has exactly one receive with the same (from, to, tag, kind) and
  // the same type, and vice versa.
  using Key = std::tuple<int64_t, int64_t, int64_t, TransferKind>;
  std::map<Key, SendOp> sends;
  std::map<Key, RecvOp> recvs;
  for (StageOp stage : stages) {
    WalkResult walk = stage.walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op)) {
        Key key{stage.getIndex(), send.getPeer(), send.getTag(), send.getKind()};
        if (!sends.emplace(key, send).second) {
          send.emitOpError("[pipeline_c2] repeats the tag ") << send.getTag() << " to stage "
                                                             << send.getPeer();
          return WalkResult::interrupt();
        }
      } else if (auto recv = dyn_cast<RecvOp>(op)) {
        Key key{recv.getPeer(), stage.getIndex(), recv.getTag(), recv.getKind()};
        if (!recvs.emplace(key, recv).second) {
          recv.emitOpError("[pipeline_c2] repeats the tag ") << recv.getTag() << " from stage "
                                                             << recv.getPeer();
          return WalkResult::interrupt();
        }
      }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  for (auto &[key, send] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end())
      return send.emitOpError("[pipeline_c2] has no matching pipe.recv in stage ")
             << send.getPeer();
    if (it->second.getType() != send.getValue().getType()) {
      auto diag = send.emitOpError("[pipeline_c3] sends ")
                  << send.getValue().getType() << " but the matching receive expects "
                  << it->second.getType();
      diag.attachNote(it->second.getLoc()) << "the receive";
      return diag;
    }
  }
  for (auto &[key, recv] : recvs)
    if (!sends.count(key))
      return recv.emitOpError("[pipeline_c2] has no matching pipe.send in stage ")
             << recv.getPeer();
  return success();
}
