//===- Differentiate.cpp - the pipe-differentiate pass --------------------===//
//
// Reverse-mode differentiation of each stage, one op at a time in reverse
// program order through the ops' gradient rules. The values a rule reads from
// the forward become the stage's saved values (the forward's pipe.return
// `saved` operands, the backward's block arguments), unless they depend on
// parameters and constants only; then the backward recomputes them, as the
// memory model assumes (it charges no saved bytes for them). A stage marked
// `recompute` keeps only its inputs and received values; its backward
// computes everything else again from them.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <cmath>

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPEDIFFERENTIATE
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;
namespace nn = pipe::nn;

FailureOr<OptimizerKind> pipe::pipeline::parseOptimizer(Operation *diagnosticOp,
                                                        StringRef text) {
  if (auto kind = symbolizeOptimizerKind(text))
    return *kind;
  return diagnosticOp->emitError("unknown optimizer '")
         << text << "' (sgd, momentum, adam or adamw)";
}

namespace {

Value scalarConstant(OpBuilder &b, Location loc, double value, Type element) {
  auto type = RankedTensorType::get({}, element);
  return nn::ConstantOp::create(
      b, loc, type, cast<ElementsAttr>(DenseElementsAttr::get(type, b.getFloatAttr(element, value))));
}

Value zerosOf(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  Attribute zero = isa<FloatType>(tensor.getElementType())
                       ? Attribute(b.getFloatAttr(tensor.getElementType(), 0.0))
                       : Attribute(b.getIntegerAttr(tensor.getElementType(), 0));
  return nn::ConstantOp::create(b, loc, tensor,
                                cast<ElementsAttr>(DenseElementsAttr::get(tensor, zero)));
}

/// Replaces `op` by `replacement`, result by result for the first `count`
/// results, and erases it.
void replaceFirstResults(Operation *op, Operation *replacement, unsigned count) {
  for (unsigned i = 0; i < count; ++i)
    op->getResult(i).replaceAllUsesWith(replacement->getResult(i));
  op->erase();
}

/// Rebuilds `op` as the same op with `types` as results (a training form with
/// more results), inferring the new results' types through the op's rules.
Operation *withResults(Operation *op, unsigned count) {
  OpBuilder b(op);
  OperationState state(op->getLoc(), op->getName());
  state.addOperands(op->getOperands());
  state.propertiesAttr = op->getPropertiesAsAttribute();
  for (NamedAttribute attr : op->getDiscardableAttrs())
    state.addAttribute(attr.getName(), attr.getValue());
  SmallVector<Type> types(op->getResultTypes());
  while (types.size() < count)
    types.push_back(UnrankedTensorType::get(b.getF32Type()));
  state.addTypes(types);
  Operation *created = b.create(state);
  (void)nn::refineResultTypes(created);
  return created;
}

/// A gradient transfer the stage had as a placeholder: the gradient of
/// `value` goes to (or comes from) stage `peer` under `tag`. A gradient that
/// comes back is that of an activation `send` of the stage, whose value the
/// training forms may replace, so it is read through the send.
struct Transfer {
  Value value;
  SendOp send;
  int64_t peer, tag;
  Location loc;
  Type type;
  Value get() const { return send ? SendOp(send).getValue() : value; }
};

class StageDifferentiator : public nn::GradientEmitter {
public:
  StageDifferentiator(StageOp stage, int64_t microbatches, LossKind loss)
      : stage(stage), microbatches(microbatches), loss(loss), builder(stage.getContext()) {}

  LogicalResult run();

  // GradientEmitter
  OpBuilder &getBuilder() override { return builder; }
  Value getResultGradient(unsigned index) override {
    readResults.insert(index);
    return gradients.lookup(current->getResult(index));
  }
  bool needsGradient(unsigned index) override {
    return needsGrad.contains(current->getOperand(index));
  }
  Value getForwardValue(Value value) override;
  void addOperandGradient(unsigned index, Value gradient) override {
    addGradient(current->getOperand(index), gradient);
  }

private:
  LogicalResult collectTransfers();
  LogicalResult prepareTrainingForms();
  void addGradient(Value value, Value gradient);

  StageOp stage;
  int64_t microbatches;
  LossKind loss;
  OpBuilder builder;
  Block *forward = nullptr, *backward = nullptr;
  SmallVector<Transfer> gradientsIn, gradientsOut;
  llvm::DenseSet<Value> needsGrad, staticValues;
  llvm::DenseMap<Value, Value> gradients, inBackward;
  SmallVector<Value> saved;
  Operation *current = nullptr;
  /// The results whose gradient the current op's rule read.
  llvm::SmallDenseSet<unsigned> readResults;
  bool failedRule = false;
};

LogicalResult StageDifferentiator::collectTransfers() {
  // The activation sends of this stage, by (peer, tag): a gradient receive
  // with the same pair brings their gradient back.
  llvm::DenseMap<std::pair<int64_t, int64_t>, SendOp> sentValues;
  for (Operation &op : *forward)
    if (auto send = dyn_cast<SendOp>(op); send && send.getKind() == TransferKind::activation)
      sentValues[{send.getPeer(), send.getTag()}] = send;
  SmallVector<Operation *> erase;
  for (Operation &op : *forward) {
    if (auto recv = dyn_cast<RecvOp>(op); recv && recv.getKind() == TransferKind::gradient) {
      SendOp sent = sentValues.lookup({recv.getPeer(), recv.getTag()});
      if (!sent)
        return recv.emitOpError("receives a gradient for tag ")
               << recv.getTag() << " but the stage sends no activation under it";
      gradientsIn.push_back(
          {Value(), sent, recv.getPeer(), recv.getTag(), recv.getLoc(), recv.getType()});
      erase.push_back(recv);
    } else if (auto send = dyn_cast<SendOp>(op); send && send.getKind() == TransferKind::gradient) {
      auto grad = send.getValue().getDefiningOp<GradOp>();
      if (!grad)
        return send.emitOpError("sends a gradient that is not a pipe.grad placeholder");
      gradientsOut.push_back({grad.getValue(), SendOp(), send.getPeer(), send.getTag(),
                              send.getLoc(), grad.getType()});
      erase.push_back(send);
    }
  }
  for (Operation *op : erase)
    op->erase();
  for (Operation &op : llvm::make_early_inc_range(*forward))
    if (auto grad = dyn_cast<GradOp>(op)) {
      if (!grad.use_empty())
        return grad.emitOpError("is used by something other than a gradient send");
      grad.erase();
    }
  return success();
}

/// Training forms: what a backward needs that the inference form does not
/// produce becomes a result (the memory model charges it as saved).
LogicalResult StageDifferentiator::prepareTrainingForms() {
  for (Operation &op : llvm::make_early_inc_range(*forward)) {
    bool inputNeedsGrad = op.getNumOperands() > 0 && needsGrad.contains(op.getOperand(0));
    // Layer norm's scale and bias gradients read the statistics too.
    bool anyOperandNeedsGrad =
        llvm::any_of(op.getOperands(), [&](Value v) { return needsGrad.contains(v); });
    if (auto bn = dyn_cast<nn::BatchNormOp>(op)) {
      if (bn.getTrainingMode() == 0 && bn.getRunningStats().empty())
        continue;
      for (Value stat : bn.getRunningStats())
        if (!stat.use_empty())
          return bn.emitOpError("uses its updated running statistics as values; training "
                                "updates them in place");
      OpBuilder b(bn);
      auto train = nn::BatchNormTrainOp::create(
          b, bn.getLoc(),
          TypeRange{bn.getOutput().getType(), UnrankedTensorType::get(b.getF32Type()),
                    UnrankedTensorType::get(b.getF32Type())},
          bn.getInput(), bn.getScale(), bn.getBias(), bn.getMean(), bn.getVar(),
          bn.getEpsilonAttr(), bn.getMomentumAttr());
      (void)nn::refineResultTypes(train);
      replaceFirstResults(bn, train, 1);
    } else if (auto ln = dyn_cast<nn::LayerNormOp>(op)) {
      if (ln.getStatistics().size() != 2 && anyOperandNeedsGrad)
        replaceFirstResults(ln, withResults(ln, 3), ln->getNumResults());
    } else if (auto pool = dyn_cast<nn::MaxPoolOp>(op)) {
      if (!pool.getIndices() && inputNeedsGrad)
        replaceFirstResults(pool, withResults(pool, 2), 1);
    } else if (auto pool = dyn_cast<nn::GlobalMaxPoolOp>(op)) {
      if (!inputNeedsGrad)
        continue;
      // A max pool whose window is the whole spatial extent, with indices.
      auto type = cast<RankedTensorType>(pool.getInput().getType());
      OpBuilder b(pool);
      auto indices = RankedTensorType::get(
          cast<RankedTensorType>(pool.getOutput().getType()).getShape(), b.getI64Type());
      auto max = nn::MaxPoolOp::create(
          b, pool.getLoc(), TypeRange{pool.getOutput().getType(), indices},
          ValueRange{pool.getInput()},
          {b.getNamedAttr("kernel_shape",
                          b.getDenseI64ArrayAttr(type.getShape().drop_front(2)))});
      replaceFirstResults(pool, max, 1);
    } else if (auto dropout = dyn_cast<nn::DropoutOp>(op)) {
      if (!dropout.getMask() && inputNeedsGrad)
        replaceFirstResults(dropout, withResults(dropout, 2), 1);
    }
  }
  return success();
}

Value StageDifferentiator::getForwardValue(Value value) {
  if (Value known = inBackward.lookup(value))
    return known;
  if (staticValues.contains(value)) {
    // Parameters, constants and what is computed from them only (from the
    // stage's inputs too when it recomputes): computed again here. The ops
    // it needs are cloned in program order, without recursion (a recomputed
    // stage can be a chain of thousands of ops).
    SmallVector<Operation *> needed;
    llvm::DenseSet<Operation *> seen;
    SmallVector<Value> pending{value};
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      if (inBackward.count(v) || !staticValues.contains(v))
        continue;
      Operation *def = v.getDefiningOp();
      if (!seen.insert(def).second)
        continue;
      needed.push_back(def);
      llvm::append_range(pending, def->getOperands());
    }
    llvm::sort(needed, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    for (Operation *def : needed) {
      IRMapping mapping;
      for (Value operand : def->getOperands())
        mapping.map(operand, getForwardValue(operand)); // cloned already, or kept
      Operation *clone = builder.clone(*def, mapping);
      // The forward has updated the running statistics already: with momentum
      // 1 the update keeps them exactly (running = 1 x running + 0 x batch).
      if (auto bn = dyn_cast<nn::BatchNormTrainOp>(clone))
        bn.setMomentumAttr(builder.getF32FloatAttr(1.0f));
      for (auto [original, copy] : llvm::zip(def->getResults(), clone->getResults()))
        inBackward[original] = copy;
    }
    return inBackward.lookup(value);
  }
  Value argument = backward->addArgument(value.getType(), value.getLoc());
  saved.push_back(value);
  inBackward[value] = argument;
  return argument;
}

void StageDifferentiator::addGradient(Value value, Value gradient) {
  if (!gradient || !needsGrad.contains(value))
    return;
  if (gradient.getType() != value.getType()) {
    Operation *at = current ? current : stage.getOperation();
    at->emitOpError("gradient rule produced ")
        << gradient.getType() << " for a value of type " << value.getType();
    failedRule = true;
    return;
  }
  Value &slot = gradients[value];
  if (!slot) {
    slot = gradient;
    return;
  }
  slot = nn::AddOp::create(builder, gradient.getLoc(), TypeRange{value.getType()},
                           ValueRange{slot, gradient})
             ->getResult(0);
}

LogicalResult StageDifferentiator::run() {
  forward = &stage.getBody().front();
  if (!stage.getBackward().empty())
    return stage.emitOpError("already has a backward region");
  if (failed(collectTransfers()))
    return failure();

  auto isSeed = [&](Value v) {
    if (auto param = v.getDefiningOp<ParamOp>())
      return param.getTrainable();
    return llvm::any_of(gradientsOut, [&](const Transfer &t) { return t.get() == v; });
  };
  // What the stage's backward starts from: its loss, the activations whose
  // gradient comes back, and without a loss its model outputs.
  auto isSink = [&](Value v) {
    for (Operation *user : v.getUsers())
      if (isa<LossOp>(user) || (loss == LossKind::none && isa<ReturnOp>(user)))
        return true;
    return llvm::any_of(gradientsIn, [&](const Transfer &t) { return t.get() == v; });
  };
  needsGrad = pipe::computeGradientFlow(*forward, isSeed, isSink);
  if (failed(prepareTrainingForms()))
    return failure();
  needsGrad = pipe::computeGradientFlow(*forward, isSeed, isSink);

  // The micro-batch loss, scaled so that the step averages over all of them.
  SmallVector<LossOp> losses(forward->getOps<LossOp>());
  for (LossOp lossOp : losses) {
    OpBuilder b(lossOp);
    Type element = cast<ShapedType>(lossOp.getValue().getType()).getElementType();
    Value scale = scalarConstant(b, lossOp.getLoc(), 1.0 / static_cast<double>(microbatches),
                                 element);
    Value scaled = nn::MulOp::create(b, lossOp.getLoc(), TypeRange{lossOp.getValue().getType()},
                                     ValueRange{lossOp.getValue(), scale})
                       ->getResult(0);
    lossOp.getValueMutable().assign(scaled);
  }
  needsGrad = pipe::computeGradientFlow(*forward, isSeed, isSink);

  // A stage that recomputes keeps only its inputs (model inputs, labels and
  // other sources without operands) and what it receives: every other value is
  // computed again in the backward from them.
  auto isKeptInput = [&](Value v) {
    if (!stage.getRecompute())
      return false;
    Operation *def = v.getDefiningOp();
    return !def || isa<RecvOp>(def) || def->getNumOperands() == 0;
  };
  for (Operation &op : *forward) {
    bool isStatic = isa<ParamOp>(op) || op.hasTrait<OpTrait::ConstantLike>() ||
                    (op.getNumOperands() > 0 && !isa<RecvOp, SendOp, LossOp>(op) &&
                     llvm::all_of(op.getOperands(), [&](Value v) {
                       return staticValues.contains(v) || isKeptInput(v);
                     }));
    if (isStatic)
      for (Value r : op.getResults())
        staticValues.insert(r);
  }

  backward = new Block();
  stage.getBackward().push_back(backward);
  builder.setInsertionPointToEnd(backward);

  // Seeds: gradients from later stages, the loss, or the output gradients.
  for (const Transfer &in : gradientsIn) {
    Value received = RecvOp::create(builder, in.loc, in.type, in.peer, in.tag,
                                    TransferKind::gradient);
    addGradient(in.get(), received);
  }
  for (LossOp lossOp : losses) {
    Value one = scalarConstant(builder, lossOp.getLoc(), 1.0,
                               cast<ShapedType>(lossOp.getValue().getType()).getElementType());
    addGradient(lossOp.getValue(), one);
  }
  auto ret = cast<ReturnOp>(forward->getTerminator());
  if (loss == LossKind::none) {
    for (auto [position, value] : llvm::enumerate(ret.getValues())) {
      if (!needsGrad.contains(value))
        continue;
      int64_t index = stage.getModelOutputs()[position];
      addGradient(value, OutputGradOp::create(builder, ret.getLoc(), value.getType(), index));
    }
  }

  // A parameter's gradient is accumulated into its buffer after the rule of
  // each op that reads it, one part at a time, so that the backward never holds
  // a part while other rules run (as the memory model counts it): a weight read
  // by two ops (a bidirectional layer's directions, a tied embedding) is not
  // summed across the backward between them. The users are the ops the loop
  // below visits: not the return (a parameter returned as a model output gets
  // its gradient from the ops that read it, or from its output gradient before
  // them).
  for (Operation &op : *forward)
    if (auto param = dyn_cast<ParamOp>(op); param && param.getTrainable()) {
      bool read = llvm::any_of(param.getValue().getUsers(), [&](Operation *user) {
        return user->getBlock() == forward && user != ret.getOperation();
      });
      // Read by no op: its gradient, if any, is complete already.
      if (!read)
        if (Value gradient = gradients.lookup(param.getValue()))
          AccumulateGradOp::create(builder, param.getLoc(), gradient, getForwardValue(param));
    }
  auto accumulateParts = [&](Operation &op) {
    for (Value operand : op.getOperands()) {
      auto param = operand.getDefiningOp<ParamOp>();
      if (!param || !param.getTrainable())
        continue;
      if (Value gradient = gradients.lookup(operand)) {
        AccumulateGradOp::create(builder, param.getLoc(), gradient, getForwardValue(param));
        gradients.erase(operand);
      }
    }
  };

  // The gradient of a received activation goes back as soon as it is complete:
  // once its first reader in the forward (so every reader) is differentiated. It
  // is freed with the send instead of being held to the end of the backward. One
  // that no op of the forward reads goes back at the end.
  llvm::SmallVector<Operation *> firstReader(gradientsOut.size(), nullptr);
  for (auto [i, out] : llvm::enumerate(gradientsOut))
    for (Operation *user : out.get().getUsers())
      if (Operation *reader = forward->findAncestorOpInBlock(*user);
          reader && reader != ret.getOperation() &&
          (!firstReader[i] || reader->isBeforeInBlock(firstReader[i])))
        firstReader[i] = reader;
  auto sendGradient = [&](size_t index) {
    const Transfer &out = gradientsOut[index];
    Value gradient = gradients.lookup(out.get());
    if (!gradient)
      gradient = zerosOf(builder, out.loc, out.type);
    SendOp::create(builder, out.loc, gradient, out.peer, out.tag, TransferKind::gradient);
  };
  auto sendGradientsReadFirstBy = [&](Operation *op) {
    for (size_t i = 0; i < gradientsOut.size(); ++i)
      if (firstReader[i] == op)
        sendGradient(i);
  };

  // Reverse program order: each op's rule, once the gradients of its results
  // are complete.
  for (Operation &op : llvm::reverse(*forward)) {
    if (&op == ret.getOperation())
      continue;
    bool anyResultGradient =
        llvm::any_of(op.getResults(), [&](Value r) { return gradients.count(r); });
    bool anyOperandNeeds =
        llvm::any_of(op.getOperands(), [&](Value v) { return needsGrad.contains(v); });
    if (anyResultGradient && anyOperandNeeds) {
      auto rule = dyn_cast<nn::GradientOpInterface>(op);
      if (!rule && nn::isComposite(&op))
        return op.emitOpError("is differentiated as its unrolled cells: run "
                              "nn-expand-composites before pipe-differentiate (the planning "
                              "pipeline does)");
      if (!rule)
        return op.emitOpError("has no gradient rule, and it is on a path from a trainable "
                              "parameter to the loss");
      current = &op;
      readResults.clear();
      if (failed(rule.emitGradient(*this)) || failedRule)
        return failure();
      current = nullptr;
      // A rule that never reads a result's gradient drops it: the training
      // would be silently wrong.
      for (OpResult result : op.getResults())
        if (gradients.count(result) && !readResults.contains(result.getResultNumber()))
          return op.emitOpError("result #")
                 << result.getResultNumber()
                 << " is on a path to the loss, and the op's gradient rule only "
                    "differentiates through its other results";
    }
    accumulateParts(op);
    sendGradientsReadFirstBy(&op);
  }

  sendGradientsReadFirstBy(nullptr); // read by no op of the forward
  ReturnOp::create(builder, stage.getLoc(), ValueRange());

  OpBuilder atEnd(ret);
  ReturnOp::create(atEnd, ret.getLoc(), ret.getValues(), saved);
  ret.erase();
  return success();
}

struct PipeDifferentiatePass : pipe::pipeline::impl::PipeDifferentiateBase<PipeDifferentiatePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<LossKind> lossKind = parseLossKind(module, loss);
    FailureOr<OptimizerKind> optimizerKind = parseOptimizer(module, optimizer);
    if (failed(lossKind) || failed(optimizerKind))
      return signalPassFailure();
    for (double value : {lr.getValue(), momentum.getValue(), beta1.getValue(), beta2.getValue(),
                         eps.getValue(), weightDecay.getValue()})
      if (!std::isfinite(value) || value < 0) {
        module.emitError("optimizer settings must be finite and non-negative");
        return signalPassFailure();
      }
    bool any = false;
    WalkResult walk = module.walk([&](PipelineOp pipeline) {
      any = true;
      bool hasLoss = false;
      pipeline.walk([&](LossOp) { hasLoss = true; });
      if (hasLoss != (*lossKind != LossKind::none)) {
        pipeline.emitOpError(hasLoss ? "carries a loss but loss=none was asked for"
                                     : "carries no loss (run pipe-attach-loss before "
                                       "partitioning) but loss=")
            << (hasLoss ? "" : loss.getValue());
        return WalkResult::interrupt();
      }
      for (StageOp stage : pipeline.getBody().getOps<StageOp>()) {
        StageDifferentiator differentiator(stage, pipeline.getMicrobatches(), *lossKind);
        if (failed(differentiator.run()))
          return WalkResult::interrupt();
      }
      Builder b(pipeline.getContext());
      auto f64 = [&](double v) { return b.getF64FloatAttr(v); };
      pipeline.setTrainingAttr(TrainingAttr::get(
          pipeline.getContext(), *lossKind, *optimizerKind, f64(lr), f64(momentum), f64(beta1),
          f64(beta2), f64(eps), f64(weightDecay)));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();
    if (!any) {
      module.emitError("pipe-differentiate needs a pipe.pipeline (run pipe-split-stages first)");
      return signalPassFailure();
    }
  }
};
} // namespace
