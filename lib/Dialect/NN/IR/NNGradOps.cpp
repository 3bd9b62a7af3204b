//===- NNGradOps.cpp - shape rules and verifiers of gradient ops ----------===//
//
// The training forms, gradients and loss ops of NNGradOps.td. Their results
// have the shape of a forward value (given as an attribute when the operands
// do not determine it); the verifiers check that the gradient operands agree
// with the forward geometry they describe (`*_c` ids in docs/nn-dialect.md).
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;
using llvm::SmallVectorImpl;

namespace {
Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }
Type ranked(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}
Type f32(MLIRContext *context) { return Float32Type::get(context); }

/// The forward output shape of a window op on `input` with explicit pads.
std::optional<SmallVector<int64_t>> windowOutput(ArrayRef<int64_t> input, int64_t channels,
                                                 ArrayRef<int64_t> kernel,
                                                 ArrayRef<int64_t> strides,
                                                 ArrayRef<int64_t> pads,
                                                 ArrayRef<int64_t> dilations, bool ceilMode,
                                                 std::string &error) {
  auto geometry = computeWindowGeometry(input.drop_front(2), kernel, strides, dilations, pads,
                                        "NOTSET", ceilMode, error);
  if (!geometry)
    return std::nullopt;
  SmallVector<int64_t> shape{input[0], channels};
  for (unsigned i = 0; i < kernel.size(); ++i)
    shape.push_back(geometry->outputSize(i, input[2 + i]));
  return shape;
}

/// Convolution gradients: the forward input and weight shapes must give dy.
LogicalResult verifyConvGeometry(Operation *op, StringRef id, ArrayRef<int64_t> input,
                                 ArrayRef<int64_t> weight, ArrayRef<int64_t> strides,
                                 ArrayRef<int64_t> pads, ArrayRef<int64_t> dilations,
                                 int64_t group, Value grad) {
  if (input.size() < 3 || weight.size() != input.size())
    return op->emitOpError("[") << id << "] input and weight shapes must have the same rank >= 3";
  size_t spatial = input.size() - 2;
  if (strides.size() != spatial || dilations.size() != spatial || pads.size() != 2 * spatial)
    return op->emitOpError("[")
           << id << "] strides and dilations need " << spatial << " entries, pads " << 2 * spatial;
  if (group < 1 || input[1] % group != 0 || weight[0] % group != 0 ||
      weight[1] * group != input[1])
    return op->emitOpError("[") << id << "] group " << group
                                << " does not divide the channels consistently";
  std::string error;
  auto expected = windowOutput(input, weight[0], weight.drop_front(2), strides, pads,
                               dilations, false, error);
  if (!expected)
    return op->emitOpError("[") << id << "] " << error;
  auto gradType = getRankedType(grad);
  if (gradType && gradType.getShape() != ArrayRef<int64_t>(*expected))
    return op->emitOpError("[") << id << "] the gradient has shape " << gradType
                                << ", the forward geometry gives "
                                << ranked(*expected, elementOf(grad));
  return success();
}
} // namespace

//===----------------------------------------------------------------------===//
// unary_grad
//===----------------------------------------------------------------------===//

LogicalResult UnaryGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getGrad().getType());
  return success();
}

LogicalResult UnaryGradOp::verify() {
  if (!isa<FloatType>(elementOf(getGrad())) || elementOf(getSaved()) != elementOf(getGrad()))
    return emitOpError("[unary_grad_c1] saved value and gradient must share a float type");
  auto saved = getRankedType(getSaved()), grad = getRankedType(getGrad());
  if (saved && grad && saved.getShape() != grad.getShape())
    return emitOpError("[unary_grad_c1] saved value and gradient must have the same shape");
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution and pooling gradients
//===----------------------------------------------------------------------===//

LogicalResult ConvGradInputOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getInputShape(), elementOf(getGrad())));
  return success();
}

LogicalResult ConvGradInputOp::verify() {
  auto weight = getRankedType(getWeight());
  if (!weight)
    return emitOpError("[conv_grad_c1] the weight must be ranked");
  return verifyConvGeometry(getOperation(), "conv_grad_c1", getInputShape(), weight.getShape(),
                            getStrides(), getPads(), getDilations(), getGroup(), getGrad());
}

LogicalResult ConvGradWeightOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getWeightShape(), elementOf(getGrad())));
  return success();
}

LogicalResult ConvGradWeightOp::verify() {
  auto input = getRankedType(getInput());
  if (!input)
    return emitOpError("[conv_grad_c1] the input must be ranked");
  return verifyConvGeometry(getOperation(), "conv_grad_c1", input.getShape(), getWeightShape(),
                            getStrides(), getPads(), getDilations(), getGroup(), getGrad());
}

LogicalResult MaxPoolGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getInputShape(), elementOf(getGrad())));
  return success();
}

LogicalResult MaxPoolGradOp::verify() {
  auto grad = getRankedType(getGrad()), indices = getRankedType(getIndices());
  if (!elementOf(getIndices()).isInteger(64))
    return emitOpError("[max_pool_grad_c1] indices must be i64");
  if (grad && indices && grad.getShape() != indices.getShape())
    return emitOpError("[max_pool_grad_c1] indices and gradient must have the same shape");
  if (grad && (grad.getRank() != static_cast<int64_t>(getInputShape().size()) ||
               grad.getDimSize(0) != getInputShape()[0] ||
               grad.getDimSize(1) != getInputShape()[1]))
    return emitOpError("[max_pool_grad_c2] the gradient's batch and channel dims must be the "
                       "input's");
  return success();
}

LogicalResult AveragePoolGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getInputShape(), elementOf(getGrad())));
  return success();
}

LogicalResult AveragePoolGradOp::verify() {
  ArrayRef<int64_t> input = getInputShape();
  size_t spatial = getKernelShape().size();
  if (input.size() != spatial + 2 || getStrides().size() != spatial ||
      getPads().size() != 2 * spatial)
    return emitOpError("[average_pool_grad_c1] kernel_shape and strides need one entry per "
                       "spatial dim of the input, pads two");
  auto grad = getRankedType(getGrad());
  if (!grad)
    return success();
  // The forward may have used ceil_mode: either rounding must give dy's shape.
  std::string error;
  SmallVector<int64_t> ones(spatial, 1);
  for (bool ceilMode : {false, true}) {
    auto shape = windowOutput(input, input[1], getKernelShape(), getStrides(), getPads(), ones,
                              ceilMode, error);
    if (!shape)
      return emitOpError("[average_pool_grad_c1] ") << error;
    if (grad.getShape() == ArrayRef<int64_t>(*shape))
      return success();
  }
  return emitOpError("[average_pool_grad_c2] the gradient's shape ")
         << grad << " is not the pooled shape of the input";
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

LogicalResult BatchNormTrainOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  auto input = getRankedType(getInput());
  Type stats = input && input.getRank() >= 2
                   ? ranked({input.getDimSize(1)}, f32(getContext()))
                   : Type(UnrankedTensorType::get(f32(getContext())));
  types.push_back(stats);
  types.push_back(stats);
  return success();
}

LogicalResult BatchNormTrainOp::verify() {
  auto input = getRankedType(getInput());
  if (!input)
    return success();
  if (input.getRank() < 2)
    return emitOpError("[batch_norm_train_c1] input must have rank >= 2");
  for (Value v : {getScale(), getBias(), getRunningMean(), getRunningVar()}) {
    auto type = getRankedType(v);
    if (type && (type.getRank() != 1 || type.getDimSize(0) != input.getDimSize(1)))
      return emitOpError("[batch_norm_train_c1] scale, bias and running statistics must have "
                         "one entry per channel (")
             << input.getDimSize(1) << ")";
  }
  return success();
}

LogicalResult BatchNormGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  types.push_back(getScale().getType());
  types.push_back(getScale().getType());
  return success();
}

LogicalResult LayerNormGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  types.push_back(getScale().getType());
  types.push_back(getScale().getType());
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  auto input = getRankedType(getInput());
  if (input && (getAxis() < 0 || getAxis() >= input.getRank()))
    return emitOpError("[layer_norm_grad_c1] axis ")
           << getAxis() << " must be normalised into [0, " << input.getRank() << ")";
  auto grad = getRankedType(getGrad());
  if (input && grad && input.getShape() != grad.getShape())
    return emitOpError("[layer_norm_grad_c1] input and gradient must have the same shape");
  return success();
}

template <typename GradOp>
static LogicalResult verifySoftmaxGrad(GradOp op, StringRef id) {
  auto output = getRankedType(op.getOutput()), grad = getRankedType(op.getGrad());
  if (output && grad && output.getShape() != grad.getShape())
    return op.emitOpError("[") << id << "] output and gradient must have the same shape";
  if (output && (op.getAxis() < 0 || op.getAxis() >= output.getRank()))
    return op.emitOpError("[") << id << "] axis " << op.getAxis()
                               << " must be normalised into [0, " << output.getRank() << ")";
  return success();
}

LogicalResult SoftmaxGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getGrad().getType());
  return success();
}
LogicalResult SoftmaxGradOp::verify() { return verifySoftmaxGrad(*this, "softmax_grad_c1"); }

LogicalResult LogSoftmaxGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getGrad().getType());
  return success();
}
LogicalResult LogSoftmaxGradOp::verify() { return verifySoftmaxGrad(*this, "softmax_grad_c1"); }

//===----------------------------------------------------------------------===//
// Data movement gradients
//===----------------------------------------------------------------------===//

LogicalResult GatherGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getInputShape(), elementOf(getGrad())));
  return success();
}

LogicalResult GatherGradOp::verify() {
  ArrayRef<int64_t> input = getInputShape();
  if (getAxis() < 0 || getAxis() >= static_cast<int64_t>(input.size()))
    return emitOpError("[gather_grad_c1] axis ") << getAxis() << " must be normalised into [0, "
                                                 << input.size() << ")";
  if (!isa<IntegerType>(elementOf(getIndices())) || elementOf(getIndices()).isInteger(1))
    return emitOpError("[gather_grad_c2] indices must be i32 or i64");
  auto indices = getRankedType(getIndices()), grad = getRankedType(getGrad());
  if (!indices || !grad)
    return success();
  SmallVector<int64_t> expected(input.take_front(getAxis()));
  expected.append(indices.getShape().begin(), indices.getShape().end());
  expected.append(input.begin() + getAxis() + 1, input.end());
  if (grad.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("[gather_grad_c3] the gradient's shape ")
           << grad << " is not the gathered shape " << ranked(expected, elementOf(getGrad()));
  return success();
}

LogicalResult SliceGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(ranked(getInputShape(), elementOf(getGrad())));
  return success();
}

LogicalResult SliceGradOp::verify() {
  ArrayRef<int64_t> input = getInputShape(), starts = getStarts(), steps = getSteps();
  auto grad = getRankedType(getGrad());
  if (starts.size() != input.size() || steps.size() != input.size() ||
      (grad && grad.getRank() != static_cast<int64_t>(input.size())))
    return emitOpError("[slice_grad_c1] starts, steps and the gradient need one entry per dim "
                       "of the input (")
           << input.size() << ")";
  for (size_t d = 0; d < input.size(); ++d) {
    if (steps[d] == 0)
      return emitOpError("[slice_grad_c2] step of dim ") << d << " is 0";
    if (!grad)
      continue;
    int64_t count = grad.getDimSize(d);
    if (count == 0)
      continue;
    int64_t last = starts[d] + (count - 1) * steps[d];
    if (starts[d] < 0 || starts[d] >= input[d] || last < 0 || last >= input[d])
      return emitOpError("[slice_grad_c2] dim ")
             << d << ": elements " << starts[d] << " to " << last << " fall outside [0, "
             << input[d] << ")";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyLossOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(RankedTensorType::get({}, elementOf(getLogits())));
  types.push_back(getLogits().getType());
  return success();
}

LogicalResult SoftmaxCrossEntropyLossOp::verify() {
  if (!isa<FloatType>(elementOf(getLogits())))
    return emitOpError("[cross_entropy_c1] logits must be floating point, not ")
           << elementOf(getLogits());
  auto labelElement = dyn_cast<IntegerType>(elementOf(getLabels()));
  if (!labelElement || labelElement.getWidth() < 32)
    return emitOpError("[cross_entropy_c1] labels must be i32 or i64 class indices, not ")
           << elementOf(getLabels());
  auto logits = getRankedType(getLogits()), labels = getRankedType(getLabels());
  if (!logits || !labels)
    return success();
  if (logits.getRank() < 2)
    return emitOpError("[cross_entropy_c2] logits must be [N, C, ...]");
  SmallVector<int64_t> expected(logits.getShape());
  expected.erase(expected.begin() + 1);
  if (labels.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("[cross_entropy_c2] labels must have the logits' shape without the "
                       "class dim: ")
           << ranked(expected, labelElement);
  return success();
}

LogicalResult SoftmaxCrossEntropyLossGradOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getLogProb().getType());
  return success();
}
