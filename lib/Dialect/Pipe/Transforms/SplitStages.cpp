//===- SplitStages.cpp - the pipe-split-stages pass -----------------------===//
//
// Rebuilds `func @main`, whose ops carry `pipe.stage`, as a pipe.pipeline of
// stages connected by send/recv. One pass in program order: each op is cloned
// into its stage; an operand produced by another stage is received once per
// consuming stage (sent right after its producer, straight from the producing
// stage, so skip connections jump over the stages in between). The backward
// transfers mirror the forward ones with the same tags, in reverse order.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Passes.h"
#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPESPLITSTAGES
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;

namespace {
/// Constants, parameters and labels are not placed by the partitioner: every
/// stage that uses one gets its own copy (parameters: a reference with an
/// owner; labels: the runtime gives them to any rank, nothing crosses).
bool isShared(Operation *op) {
  return pipe::isParameterOrConstant(op) || isa<LabelOp>(op);
}

struct StageBuild {
  StageOp op;
  Block *block = nullptr;
  IRMapping mapping;
  SmallVector<int64_t> modelInputs, modelOutputs;
  SmallVector<Value> returned;
};

/// A value sent from stage `from` to stage `to` under `tag`.
struct Crossing {
  int64_t from, to, tag;
  Value original; // in the function
  Value sent;     // in `from`
  Value received; // in `to`
  Operation *send;
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp func) : module(module), func(func), builder(module) {}
  LogicalResult run();

private:
  LogicalResult assignStages();
  Value valueInStage(Value v, int64_t stage);
  StageBuild &at(int64_t stage) { return stages[stage]; }

  ModuleOp module;
  func::FuncOp func;
  OpBuilder builder;
  llvm::DenseMap<Operation *, int64_t> stageOf;
  /// For each shared op, the stages that use it, in increasing order.
  llvm::DenseMap<Operation *, SmallVector<int64_t>> usersOf;
  std::vector<StageBuild> stages;
  SmallVector<Crossing> crossings;
  int64_t nextTag = 0;
};

LogicalResult Splitter::assignStages() {
  int64_t maxStage = -1;
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (isShared(&op))
      continue;
    auto attr = op.getAttrOfType<IntegerAttr>(kStageAttr);
    if (!attr)
      return op.emitError("'") << op.getName() << "' has no " << kStageAttr
                               << " attribute; run pipe-partition first";
    if (attr.getInt() < 0)
      return op.emitError("stage ") << attr.getInt() << " is negative";
    stageOf[&op] = attr.getInt();
    maxStage = std::max(maxStage, attr.getInt());
  }
  int64_t count = maxStage + 1;
  if (PlanAttr plan = getModulePlan(module))
    count = std::max(count, plan.getStages());
  if (count <= 0)
    return func.emitError("nothing to split: the function has no ops");
  stages.resize(count);
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (!isShared(&op))
      continue;
    llvm::SmallSetVector<int64_t, 4> users;
    for (Operation *user : op.getUsers()) {
      auto it = stageOf.find(user);
      users.insert(it != stageOf.end() ? it->second : count - 1);
    }
    SmallVector<int64_t> sorted(users.begin(), users.end());
    llvm::sort(sorted);
    usersOf[&op] = sorted;
  }
  return success();
}

Value Splitter::valueInStage(Value v, int64_t stage) {
  StageBuild &target = at(stage);
  if (Value mapped = target.mapping.lookupOrNull(v))
    return mapped;
  builder.setInsertionPointToEnd(target.block);
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    Value local = target.block->addArgument(arg.getType(), arg.getLoc());
    target.modelInputs.push_back(arg.getArgNumber());
    target.mapping.map(v, local);
    return local;
  }
  Operation *def = v.getDefiningOp();
  if (auto param = dyn_cast<pipe::nn::ParamOp>(def)) {
    const SmallVector<int64_t> &users = usersOf[def];
    auto local = ParamOp::create(builder, param.getLoc(), param.getType(), param.getName(),
                                 param.getSource(), param.getPath(), param.getOffset(),
                                 param.getLength(), param.getTrainable(), users.front(),
                                 users);
    target.mapping.map(v, local.getResult());
    return local;
  }
  if (isShared(def)) {
    Operation *clone = builder.clone(*def);
    clone->removeAttr(kStageAttr);
    target.mapping.map(def->getResults(), clone->getResults());
    return target.mapping.lookup(v);
  }
  // Produced by another stage: send it from there, receive it here.
  int64_t from = stageOf.lookup(def);
  StageBuild &source = at(from);
  Value sent = source.mapping.lookup(v);
  int64_t tag = nextTag++;
  // Right after the producer, behind the sends already there (creation order).
  OpBuilder sourceBuilder(sent.getContext());
  sourceBuilder.setInsertionPointAfterValue(sent);
  Block *sourceBlock = sourceBuilder.getBlock();
  Block::iterator point = sourceBuilder.getInsertionPoint();
  while (point != sourceBlock->end() && isa<SendOp>(*point))
    ++point;
  sourceBuilder.setInsertionPoint(sourceBlock, point);
  auto send = SendOp::create(sourceBuilder, def->getLoc(), sent, stage, tag,
                             TransferKind::activation);
  builder.setInsertionPointToEnd(target.block);
  auto recv = RecvOp::create(builder, def->getLoc(), v.getType(), from, tag,
                             TransferKind::activation);
  target.mapping.map(v, recv.getValue());
  crossings.push_back({from, stage, tag, v, sent, recv.getValue(), send});
  return recv.getValue();
}

LogicalResult Splitter::run() {
  if (failed(assignStages()))
    return failure();
  int64_t count = stages.size();
  int64_t microbatches = 1;
  std::string schedule = "1f1b";
  PlanAttr plan = getModulePlan(module);
  if (plan) {
    microbatches = plan.getMicrobatches();
    schedule = plan.getSchedule().str();
  }
  builder.setInsertionPoint(func);
  auto pipeline = PipelineOp::create(builder, func.getLoc(), func.getSymName(), count,
                                     microbatches, schedule, plan, ArrayAttr(),
                                     TrainingAttr());
  // The plan moves onto the pipeline it describes.
  if (plan)
    module->removeAttr(PipeDialect::PlanAttrHelper::getNameStr());
  Block *pipelineBody = new Block();
  pipeline.getBody().push_back(pipelineBody);
  builder.setInsertionPointToEnd(pipelineBody);
  // The plan may put several stages on one GPU (interleaved schedules).
  DenseI64ArrayAttr gpuOfStage = plan ? plan.getGpuOfStage() : DenseI64ArrayAttr();
  for (int64_t s = 0; s < count; ++s) {
    int64_t device = gpuOfStage && s < gpuOfStage.size() ? gpuOfStage[s] : s;
    auto stage = StageOp::create(builder, func.getLoc(), "stage" + std::to_string(s), s, device,
                                 builder.getDenseI64ArrayAttr({}),
                                 builder.getDenseI64ArrayAttr({}), ArrayAttr());
    if (plan && plan.getRecomputeStages() &&
        llvm::is_contained(plan.getRecomputeStages().asArrayRef(), s))
      stage.setRecompute(true);
    stages[s].op = stage;
    stages[s].block = new Block();
    stage.getBody().push_back(stages[s].block);
  }

  Block &body = func.getBody().front();
  for (Operation &op : body.without_terminator()) {
    if (isShared(&op))
      continue;
    int64_t s = stageOf.lookup(&op);
    for (Value operand : op.getOperands())
      valueInStage(operand, s);
    builder.setInsertionPointToEnd(at(s).block);
    Operation *clone = builder.clone(op, at(s).mapping);
    clone->removeAttr(kStageAttr);
  }
  // Model outputs come from the stage that produces them (the last stage for
  // arguments and constants returned as they are).
  for (auto [index, value] : llvm::enumerate(body.getTerminator()->getOperands())) {
    Operation *def = value.getDefiningOp();
    int64_t s = def && stageOf.count(def) ? stageOf.lookup(def) : count - 1;
    at(s).returned.push_back(valueInStage(value, s));
    at(s).modelOutputs.push_back(index);
  }
  // Each stage receives first, and from each peer in the order that peer sends:
  // a transport that matches messages in issue order (NCCL, MPI without tags)
  // then pairs every send with its receive.
  llvm::DenseMap<Operation *, unsigned> position;
  for (StageBuild &stage : stages) {
    unsigned index = 0;
    for (Operation &op : *stage.block)
      position[&op] = index++;
  }
  for (int64_t s = 0; s < count; ++s) {
    SmallVector<std::tuple<int64_t, unsigned, Operation *>> incoming;
    for (const Crossing &c : crossings)
      if (c.to == s)
        incoming.emplace_back(c.from, position.lookup(c.send), c.received.getDefiningOp());
    llvm::sort(incoming, [](const auto &a, const auto &b) {
      return std::make_pair(std::get<0>(a), std::get<1>(a)) <
             std::make_pair(std::get<0>(b), std::get<1>(b));
    });
    for (auto &entry : llvm::reverse(incoming))
      std::get<2>(entry)->moveBefore(&at(s).block->front());
  }
  // Backward transfers: the gradient of every received activation that needs
  // one (it depends on a trainable parameter; integer and boolean values, such
  // as masks, never do) goes back to its producer with the same tag, latest
  // crossing first.
  llvm::DenseSet<Value> needsGrad = pipe::computeFunctionGradientFlow(body);
  for (const Crossing &c : llvm::reverse(crossings)) {
    if (!needsGrad.contains(c.original))
      continue;
    builder.setInsertionPointToEnd(at(c.from).block);
    RecvOp::create(builder, c.sent.getLoc(), c.sent.getType(), c.to, c.tag,
                   TransferKind::gradient);
    builder.setInsertionPointToEnd(at(c.to).block);
    auto grad = GradOp::create(builder, c.received.getLoc(), c.received.getType(), c.received);
    SendOp::create(builder, c.received.getLoc(), grad, c.from, c.tag, TransferKind::gradient);
  }
  for (StageBuild &stage : stages) {
    builder.setInsertionPointToEnd(stage.block);
    ReturnOp::create(builder, func.getLoc(), stage.returned);
    stage.op.setModelInputsAttr(builder.getDenseI64ArrayAttr(stage.modelInputs));
    stage.op.setModelOutputsAttr(builder.getDenseI64ArrayAttr(stage.modelOutputs));
  }
  func.erase();
  return success();
}

struct PipeSplitStagesPass
    : pipe::pipeline::impl::PipeSplitStagesBase<PipeSplitStagesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    func::FuncOp main = mainFunction(module);
    if (!main) {
      module.emitError("pipe-split-stages needs a function with a body");
      return signalPassFailure();
    }
    Splitter splitter(module, main);
    if (failed(splitter.run()))
      signalPassFailure();
  }
};
} // namespace
