//===- AttachLoss.cpp - the pipe-attach-loss pass -------------------------===//
//
// Adds the training loss to the model function: labels (`pipe.label`), the
// loss ops and `pipe.loss`, after model output 0. It runs before
// pipe-partition so that the loss is costed and placed with the output.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "pipe/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPEATTACHLOSS
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;
namespace nn = pipe::nn;

FailureOr<LossKind> pipe::pipeline::parseLossKind(Operation *diagnosticOp, StringRef text) {
  if (text == "cross-entropy")
    return LossKind::cross_entropy;
  if (text == "mse")
    return LossKind::mse;
  if (text == "output")
    return LossKind::output;
  if (text == "none")
    return LossKind::none;
  return diagnosticOp->emitError("unknown loss '")
         << text << "' (cross-entropy, mse, output or none)";
}

namespace {
Value indexConstant(OpBuilder &b, Location loc, ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get({static_cast<int64_t>(values.size())}, b.getI64Type());
  return nn::ConstantOp::create(b, loc, type,
                                cast<ElementsAttr>(DenseElementsAttr::get(type, values)));
}

Value reshape(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  return nn::ReshapeOp::create(b, loc, TypeRange{RankedTensorType::get(shape, type.getElementType())},
                               ValueRange{v, indexConstant(b, loc, shape)})
      ->getResult(0);
}

/// Cross entropy over the last dim of `output`: [rows, classes] logits.
Value crossEntropy(OpBuilder &b, Location loc, Value output, RankedTensorType type) {
  ArrayRef<int64_t> shape = type.getShape();
  int64_t classes = shape.back();
  int64_t rows = type.getNumElements() / std::max<int64_t>(1, classes);
  auto labelType = RankedTensorType::get(shape.drop_back(), b.getI64Type());
  Value labels = LabelOp::create(b, loc, labelType, 0, classes);
  Value logits = reshape(b, loc, output, {rows, classes});
  Value flatLabels = reshape(b, loc, labels, {rows});
  auto loss = nn::SoftmaxCrossEntropyLossOp::create(
      b, loc,
      TypeRange{RankedTensorType::get({}, type.getElementType()), logits.getType()},
      ValueRange{logits, flatLabels});
  return loss.getLoss();
}

/// Mean squared error: mean((output - label)^2) over every element.
Value meanSquaredError(OpBuilder &b, Location loc, Value output, RankedTensorType type) {
  Value labels = LabelOp::create(b, loc, type, 0, 0);
  Value diff = nn::SubOp::create(b, loc, TypeRange{type}, ValueRange{output, labels})->getResult(0);
  Value square = nn::MulOp::create(b, loc, TypeRange{type}, ValueRange{diff, diff})->getResult(0);
  auto scalar = RankedTensorType::get({}, type.getElementType());
  return nn::ReduceMeanOp::create(b, loc, TypeRange{scalar}, ValueRange{square},
                                  {b.getNamedAttr("keepdims", b.getI64IntegerAttr(0))})
      ->getResult(0);
}

struct PipeAttachLossPass : pipe::pipeline::impl::PipeAttachLossBase<PipeAttachLossPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<LossKind> kind = parseLossKind(module, loss);
    if (failed(kind))
      return signalPassFailure();
    if (*kind == LossKind::none)
      return;
    func::FuncOp func = mainFunction(module);
    if (!func) {
      module.emitError("pipe-attach-loss needs a function with a body");
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    if (ret.getNumOperands() == 0) {
      func.emitError("the model has no output to attach the loss to");
      return signalPassFailure();
    }
    Value output = ret.getOperand(0);
    auto type = dyn_cast<RankedTensorType>(output.getType());
    Operation *where = output.getDefiningOp() ? output.getDefiningOp() : ret.getOperation();
    bool isFloat = type && isa<FloatType>(type.getElementType()) && type.hasStaticShape();
    bool isScalar = isFloat && type.getRank() == 0;
    if (*kind == LossKind::cross_entropy && (!isFloat || type.getRank() < 2)) {
      InFlightDiagnostic error =
          where->emitError("--loss=cross-entropy needs a float model output [..., classes] with "
                           "static shape; output 0 is ")
          << output.getType();
      if (isScalar)
        error << "; a loss the model computes itself trains with --loss=output";
      return signalPassFailure();
    }
    if (*kind == LossKind::output && !isScalar) {
      where->emitError("--loss=output needs model output 0 to be a float scalar (a loss "
                       "computed in the graph); output 0 is ")
          << output.getType();
      return signalPassFailure();
    }
    if (*kind == LossKind::mse && !isFloat) {
      where->emitError("--loss=mse needs a float model output with static shape; output 0 is ")
          << output.getType();
      return signalPassFailure();
    }
    OpBuilder b(ret);
    // Not a NameLoc: the loss is a node the compiler adds, not one of the
    // ONNX model's (see nodeNameOf).
    Location lossSite = UnknownLoc::get(b.getContext());
    if (auto file = ret.getLoc()->findInstanceOf<FileLineColLoc>())
      lossSite = file;
    Location loc = FusedLoc::get(b.getContext(), {lossSite}, b.getStringAttr("pipe.loss"));
    Value value = output;
    if (*kind == LossKind::cross_entropy)
      value = crossEntropy(b, loc, output, type);
    else if (*kind == LossKind::mse)
      value = meanSquaredError(b, loc, output, type);
    LossOp::create(b, loc, value);
  }
};
} // namespace
