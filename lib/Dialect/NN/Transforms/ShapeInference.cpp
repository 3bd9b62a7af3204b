//===- ShapeInference.cpp - the nn-shape-inference pass -------------------===//
//
// One forward sweep over a function in program order: every op's operands are
// already refined when it is visited, so a DAG needs no fixed-point loop.
// Each nn op is re-typed, then folded when its operands are constants; ops
// left dead by folding are erased at the end.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/Transforms/Passes.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"


using namespace mlir;

namespace pipe::nn {
#define GEN_PASS_DEF_NNSHAPEINFERENCE
#include "pipe/Dialect/NN/Transforms/Passes.h.inc"
} // namespace pipe::nn

using namespace pipe::nn;

/// The values that stand for the results of `op` once folded (materialised
/// constants or existing values), or nullopt when it does not fold.
static std::optional<SmallVector<Value>> foldOp(Operation *op, OpBuilder &builder) {
  if (op->hasTrait<OpTrait::ConstantLike>())
    return std::nullopt;
  SmallVector<Attribute> constants;
  for (Value operand : op->getOperands()) {
    Attribute attr;
    constants.push_back(matchPattern(operand, m_Constant(&attr)) ? attr : Attribute());
  }
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(constants, folded)) || folded.empty())
    return std::nullopt;
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPoint(op);
  SmallVector<Value> replacements;
  for (auto [result, value] : llvm::zip(op->getResults(), folded)) {
    if (auto v = dyn_cast<Value>(value)) {
      replacements.push_back(v);
      continue;
    }
    Operation *constant = op->getDialect()->materializeConstant(
        builder, cast<Attribute>(value), result.getType(), op->getLoc());
    if (!constant)
      return std::nullopt;
    replacements.push_back(constant->getResult(0));
  }
  return replacements;
}

FailureOr<SmallVector<Value>> pipe::nn::inferAndFold(Operation *op, OpBuilder &builder) {
  if (failed(refineResultTypes(op)))
    return failure();
  if (auto replacements = foldOp(op, builder)) {
    for (auto [result, replacement] : llvm::zip(op->getResults(), *replacements))
      result.replaceAllUsesWith(replacement);
    return *replacements;
  }
  return SmallVector<Value>(op->getResults());
}

/// The first operand of `op` that keeps its result shape unknown, if any.
static std::string describeUnknownOperand(Operation *op) {
  for (auto [index, operand] : llvm::enumerate(op->getOperands())) {
    if (!hasStaticShape(operand))
      return "operand #" + std::to_string(index) + " has no static shape";
    Attribute attr;
    if (!matchPattern(operand, m_Constant(&attr)) && getRankedType(operand).getRank() <= 1 &&
        isa<IntegerType>(getRankedType(operand).getElementType()))
      return "operand #" + std::to_string(index) +
             " is an integer tensor that is not a compile-time constant";
  }
  return "its operands do not determine it";
}

LogicalResult pipe::nn::inferShapesInFunction(func::FuncOp func, bool requireStatic) {
  if (func.getBody().empty())
    return success();
  OpBuilder builder(func.getContext());
  for (Block &block : func.getBody()) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      if (!isa<NNDialect>(op.getDialect()))
        continue;
      if (failed(inferAndFold(&op, builder)))
        return failure();
    }
  }
  // Erase what folding left dead, users before producers.
  for (Block &block : func.getBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isa<NNDialect>(op.getDialect()) && op.use_empty() && isPure(&op) &&
          !isa<ParamOp>(op))
        op.erase();

  // The function returns what its terminator returns.
  Block &entry = func.getBody().front();
  Operation *terminator = entry.getTerminator();
  func.setType(FunctionType::get(func.getContext(), entry.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  if (!requireStatic)
    return success();
  WalkResult walk = func.walk([&](Operation *op) {
    for (auto [index, result] : llvm::enumerate(op->getResults())) {
      if (hasStaticShape(result))
        continue;
      op->emitError("could not infer a static shape for result #")
          << index << " of '" << op->getName() << "': " << describeUnknownOperand(op);
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

namespace {
struct NNShapeInferencePass
    : pipe::nn::impl::NNShapeInferenceBase<NNShapeInferencePass> {
  using Base::Base;
  void runOnOperation() override {
    if (failed(inferShapesInFunction(getOperation(), requireStatic)))
      signalPassFailure();
  }
};
} // namespace
