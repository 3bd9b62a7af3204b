//===- CompositeOps.cpp - ONNX ops imported as several nn ops -------------===//
//
// ONNX ops that are functions of ops nn already has: each imports as those
// ops, so shape inference, costs, gradient rules and kernels come with them.
// The forms keep gradients finite: Exp only ever sees min(x, 0), and
// ReduceLogSumExp subtracts the maximum first. The losses pick each target's
// log-probability with a one-hot mask, so that their gradient is one mul's.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

/// alpha * (exp(min(x, 0) / scale) - 1): the negative branch of Elu, Selu and
/// Celu (scale 1 but for Celu, whose alpha divides x).
Value expBranch(Composer &c, Value x, double alpha, double scale) {
  Value negative = c.negativePart(x);
  if (scale != 1) {
    Value divisor = c.scalar(scale, x);
    negative = c.div(negative, divisor);
  }
  Value exp = c.unary("nn.exp", negative);
  Value one = c.scalar(1, x);
  Value expm1 = c.sub(exp, one);
  Value factor = c.scalar(alpha, x);
  return c.mul(factor, expm1);
}

/// max(x, 0) + expBranch(x, alpha, scale).
Value exponentialUnit(Composer &c, Value x, double alpha, double scale) {
  Value positive = c.positivePart(x);
  Value negative = expBranch(c, x, alpha, scale);
  return c.add(positive, negative);
}

Values importElu(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"alpha", Kind::Float}})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  return c.result(exponentialUnit(c, x, n.getFloat("alpha", 1.0f), 1));
}

Values importSelu(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"alpha", Kind::Float}, {"gamma", Kind::Float}})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  // The ONNX defaults, the constants of Klambauer et al. 2017 to float precision.
  const double alpha = n.getFloat("alpha", 1.67326319217681884765625f);
  const double gamma = n.getFloat("gamma", 1.05070102214813232421875f);
  Value inner = exponentialUnit(c, x, alpha, 1);
  Value scale = c.scalar(gamma, x);
  return c.result(c.mul(scale, inner));
}

Values importCelu(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"alpha", Kind::Float}})))
    return failure();
  const double alpha = n.getFloat("alpha", 1.0f);
  if (alpha == 0)
    return n.error() << "Celu's alpha must not be 0";
  Composer c(n);
  Value x = n.input(0);
  return c.result(exponentialUnit(c, x, alpha, alpha));
}

Values importThresholdedRelu(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"alpha", Kind::Float}})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  Value alpha = c.scalar(n.getFloat("alpha", 1.0f), x);
  Value above = c.op("nn.greater", {x, alpha});
  Value zero = c.scalar(0, x);
  return c.result(c.op("nn.where", {above, x, zero}));
}

Values importSoftsign(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  Value one = c.scalar(1, x);
  Value magnitude = c.unary("nn.abs", x);
  Value denominator = c.add(one, magnitude);
  return c.result(c.div(x, denominator));
}

Values importMish(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  Value softplus = c.unary("nn.softplus", x);
  Value tanh = c.unary("nn.tanh", softplus);
  return c.result(c.mul(x, tanh));
}

/// PRelu(x, slope) = max(x, 0) + slope * min(x, 0); slope broadcasts to x.
Values importPRelu(NodeImporter &n) {
  if (failed(expectFloatNode(n, 2, 2, {})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  Value positive = c.positivePart(x);
  Value negative = c.negativePart(x);
  Value scaled = c.mul(n.input(1), negative);
  return c.result(c.add(positive, scaled));
}

/// Mean of any number of inputs: their sum divided by the count.
Values importMean(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1u << 16, {})))
    return failure();
  Composer c(n);
  Value sum = n.input(0);
  for (unsigned i = 1; i < n.numInputs(); ++i) {
    if (!n.input(i))
      return n.error() << "Mean input #" << i << " is empty";
    sum = c.add(sum, n.input(i));
  }
  if (n.numInputs() == 1)
    return c.result(c.unary("nn.identity", sum));
  Value count = c.scalar(n.numInputs(), sum);
  return c.result(c.div(sum, count));
}

/// Size: the element count of a shape known after binding, an int64 scalar.
Values importSize(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes({})))
    return failure();
  auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
  if (!type || !type.hasStaticShape())
    return n.error() << "Size needs a static shape, got " << n.input(0).getType()
                     << " (bind the symbolic dims with --dim)";
  return SmallVector<Value>{n.constantI64({type.getNumElements()}, /*scalar=*/true)};
}

/// CastLike(x, like): Cast to like's element type.
Values importCastLike(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({{"saturate", Kind::Int}})))
    return failure();
  Type to = getElementTypeOrSelf(n.input(1).getType());
  return n.create("nn.cast", {n.input(0)}, {n.builder.getNamedAttr("to", TypeAttr::get(to))}, 1);
}

/// The reductions built on ReduceSum (and ReduceMax).
enum class Reduction { L1, L2, SumSquare, LogSum, LogSumExp };

Values importReduction(NodeImporter &n, Reduction kind) {
  if (failed(expectFloatNode(n, 1, 2,
                             {{"axes", Kind::Ints},
                              {"keepdims", Kind::Int},
                              {"noop_with_empty_axes", Kind::Int}})))
    return failure();
  // Axes: an attribute before opset 18, an input since.
  Value axes = axesOperand(n, 1, 18);
  auto reduce = [&](Composer &c, llvm::StringRef name, Value x, int64_t keepdims) {
    SmallVector<NamedAttribute> attrs{
        n.builder.getNamedAttr("keepdims", n.builder.getI64IntegerAttr(keepdims)),
        n.builder.getNamedAttr("noop_with_empty_axes",
                               n.builder.getI64IntegerAttr(n.getInt("noop_with_empty_axes", 0)))};
    SmallVector<Value> operands{x};
    if (axes)
      operands.push_back(axes);
    return c.op(name, operands, attrs);
  };
  const int64_t keepdims = n.getInt("keepdims", 1);
  Composer c(n);
  Value x = n.input(0);
  switch (kind) {
  case Reduction::L1: {
    Value magnitude = c.unary("nn.abs", x);
    return c.result(reduce(c, "nn.reduce_sum", magnitude, keepdims));
  }
  case Reduction::L2: {
    Value squares = c.mul(x, x);
    Value sum = reduce(c, "nn.reduce_sum", squares, keepdims);
    return c.result(c.unary("nn.sqrt", sum));
  }
  case Reduction::SumSquare: {
    Value squares = c.mul(x, x);
    return c.result(reduce(c, "nn.reduce_sum", squares, keepdims));
  }
  case Reduction::LogSum: {
    Value sum = reduce(c, "nn.reduce_sum", x, keepdims);
    return c.result(c.unary("nn.log", sum));
  }
  case Reduction::LogSumExp: {
    // log(sum(exp(x - m))) + m, m the maximum over the same axes.
    Value shift = reduce(c, "nn.reduce_max", x, 1);
    Value shifted = c.sub(x, shift);
    Value exp = c.unary("nn.exp", shifted);
    Value sum = reduce(c, "nn.reduce_sum", exp, keepdims);
    Value log = c.unary("nn.log", sum);
    Value max = keepdims ? shift : reduce(c, "nn.reduce_max", x, 0);
    return c.result(c.add(log, max));
  }
  }
  return failure();
}
/// The losses' `reduction` attribute.
enum class LossReduction { None, Sum, Mean };

/// NegativeLogLikelihoodLoss on log-probabilities [N, C, d...] and targets
/// [N, d...]: -logProb[n, target, d...] * weight[target], 0 where the target is
/// ignore_index, then summed, or divided by the sum of the weights (the count
/// when there are none) for "mean". The target picks its class by a one-hot
/// mask (equal to an iota over C), so the gradient is logProb's alone.
Value negativeLogLikelihood(Composer &c, Value logProb, Value target, Value weight,
                            std::optional<int64_t> ignoreIndex, LossReduction reduction) {
  NodeImporter &n = c.n;
  auto type = cast<RankedTensorType>(logProb.getType());
  const int64_t classes = type.getDimSize(1);
  auto i64 = n.builder.getI64Type();
  if (getElementTypeOrSelf(target.getType()) != i64)
    target = c.op("nn.cast", {target}, {n.builder.getNamedAttr("to", TypeAttr::get(i64))});
  Value valid; // bool [N, d...]: the target is not ignore_index
  if (ignoreIndex) {
    Value ignored = c.op("nn.equal", {target, n.constantI64({*ignoreIndex}, true)});
    valid = c.unary("nn.not", ignored);
    // An ignored target may be outside [0, C): pick class 0 there instead.
    Value zero = n.constantI64({0}, true);
    target = c.op("nn.where", {valid, target, zero});
  }
  // iota over C, shaped [1, C, 1, ...] to broadcast against [N, 1, d...].
  SmallVector<int64_t> iotaShape(type.getRank(), 1);
  iotaShape[1] = classes;
  SmallVector<int64_t> iota(classes);
  for (int64_t k = 0; k < classes; ++k)
    iota[k] = k;
  auto iotaAttr = DenseElementsAttr::get(RankedTensorType::get(iotaShape, i64),
                                         llvm::ArrayRef<int64_t>(iota));
  Value classIds = c.op("nn.constant", {}, {n.builder.getNamedAttr("value", iotaAttr)});
  Value classAxis = n.constantI64({1});
  Value expanded = c.op("nn.unsqueeze", {target, classAxis});
  Value hit = c.op("nn.equal", {expanded, classIds});
  Value oneHot = c.op("nn.cast", {hit}, {n.builder.getNamedAttr("to", TypeAttr::get(type.getElementType()))});
  Value masked = c.mul(logProb, oneHot);
  auto noKeep = n.builder.getNamedAttr("keepdims", n.builder.getI64IntegerAttr(0));
  Value picked = c.op("nn.reduce_sum", {masked, classAxis}, {noKeep});
  Value loss = c.unary("nn.neg", picked);
  Value weights; // per element, when there are weights or ignored targets
  if (weight)
    weights = c.op("nn.gather", {weight, target});
  if (ignoreIndex) {
    Value validWeight = c.op("nn.cast", {valid}, {n.builder.getNamedAttr("to", TypeAttr::get(type.getElementType()))});
    weights = weights ? c.mul(weights, validWeight) : validWeight;
  }
  if (weights)
    loss = c.mul(loss, weights);
  switch (reduction) {
  case LossReduction::None:
    return loss;
  case LossReduction::Sum:
    return c.op("nn.reduce_sum", {loss}, {noKeep});
  case LossReduction::Mean:
    if (!weights)
      return c.op("nn.reduce_mean", {loss}, {noKeep});
    Value total = c.op("nn.reduce_sum", {loss}, {noKeep});
    Value weightSum = c.op("nn.reduce_sum", {weights}, {noKeep});
    return c.div(total, weightSum);
  }
  return nullptr;
}

/// The input is [N, C, d...] and the target [N, d...] with the same N and d.
LogicalResult checkLossShapes(NodeImporter &n, Value input, Value target) {
  auto in = dyn_cast<RankedTensorType>(input.getType());
  auto tg = dyn_cast<RankedTensorType>(target.getType());
  if (!isa<IntegerType>(getElementTypeOrSelf(target.getType())))
    return n.error() << n.node.op_type() << " target must be integer, got " << target.getType();
  if (!in || !tg || in.getRank() < 2 || tg.getRank() != in.getRank() - 1)
    return n.error() << n.node.op_type() << " needs input [N, C, d...] and target [N, d...], got "
                     << input.getType() << " and " << target.getType();
  for (int64_t i = 0; i < tg.getRank(); ++i)
    if (tg.getDimSize(i) != in.getDimSize(i == 0 ? 0 : i + 1))
      return n.error() << n.node.op_type() << " target " << target.getType()
                       << " does not match input " << input.getType();
  return success();
}

/// A loss node's inputs (input, target, optional weight) and attributes,
/// checked: ignore_index and reduction.
struct LossNode {
  std::optional<int64_t> ignoreIndex;
  LossReduction reduction = LossReduction::Mean;
};
FailureOr<LossNode> checkLoss(NodeImporter &n) {
  const AttrSpec specs[] = {{"ignore_index", Kind::Int}, {"reduction", Kind::String}};
  if (failed(expectFloatNode(n, 2, 3, specs)) || failed(checkLossShapes(n, n.input(0), n.input(1))))
    return failure();
  LossNode loss;
  if (n.attribute("ignore_index"))
    loss.ignoreIndex = n.getInt("ignore_index", 0);
  const std::string reduction = n.getString("reduction", "mean");
  if (reduction == "none")
    loss.reduction = LossReduction::None;
  else if (reduction == "sum")
    loss.reduction = LossReduction::Sum;
  else if (reduction != "mean")
    return n.error() << n.node.op_type() << " reduction '" << reduction
                     << "' is not one of none, sum, mean";
  return loss;
}

Values importNegativeLogLikelihoodLoss(NodeImporter &n) {
  auto attributes = checkLoss(n);
  if (failed(attributes))
    return failure();
  Composer c(n);
  return c.result(negativeLogLikelihood(c, n.input(0), n.input(1), n.input(2),
                                        attributes->ignoreIndex, attributes->reduction));
}

/// SoftmaxCrossEntropyLoss. Its mean without class weights is
/// nn.softmax_cross_entropy_loss, the op the compiler's own loss uses (one
/// kernel, one fused gradient). Other forms, and any with the log-probability
/// output: LogSoftmax over the classes (axis
/// 1), then the negative log-likelihood. The optional second output is the
/// log-probability.
Values importSoftmaxCrossEntropyLoss(NodeImporter &n) {
  auto attributes = checkLoss(n);
  if (failed(attributes))
    return failure();
  // The fused op's gradient is the loss's only: with the log-probability as an
  // output (a value the graph may use), the composite form.
  if (attributes->reduction == LossReduction::Mean && !n.input(2) && n.numOutputs() < 2) {
    SmallVector<NamedAttribute> attrs;
    n.copyInt(attrs, "ignore_index");
    auto results = n.create("nn.softmax_cross_entropy_loss", {n.input(0), n.input(1)}, attrs, 2);
    if (succeeded(results))
      results->resize(std::max(1u, n.numOutputs()));
    return results;
  }
  Composer c(n);
  Value logProb =
      c.op("nn.log_softmax", {n.input(0)}, {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(1))});
  Value loss = negativeLogLikelihood(c, logProb, n.input(1), n.input(2),
                                     attributes->ignoreIndex, attributes->reduction);
  auto result = c.result(loss);
  if (succeeded(result) && n.numOutputs() > 1)
    result->push_back(logProb);
  return result;
}
/// ArgMax / ArgMin: int64 indices of the first (select_last_index: last)
/// extreme along `axis`.
Values importArgExtreme(NodeImporter &n, bool maximum) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes(
          {{"axis", Kind::Int}, {"keepdims", Kind::Int}, {"select_last_index", Kind::Int}})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || type.getRank() == 0)
    return n.error() << n.node.op_type() << " needs a static input of rank 1 or more, got "
                     << n.input(0).getType();
  auto axis = normalizedAxis(n, n.getInt("axis", 0), type.getRank());
  if (failed(axis))
    return failure();
  Composer c(n);
  Value index = extremeIndex(c, n.input(0), *axis, maximum, n.getInt("select_last_index", 0));
  if (!n.getInt("keepdims", 1)) {
    Value axes = n.constantI64({*axis});
    index = c.op("nn.squeeze", {index, axes});
  }
  return c.result(index);
}

/// Hardmax: 1 at the first maximum along `axis`, 0 elsewhere.
Values importHardmax(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"axis", Kind::Int}})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || type.getRank() == 0)
    return n.error() << "Hardmax needs a static input of rank 1 or more, got "
                     << n.input(0).getType();
  int64_t axis = n.getInt("axis", n.version < 13 ? 1 : -1);
  auto normalized = normalizedAxis(n, axis, type.getRank());
  if (failed(normalized))
    return failure();
  // Before opset 13 the input is coerced to 2-D at `axis`: the same only on the last dim.
  if (n.version < 13 && *normalized != type.getRank() - 1)
    return n.error() << "Hardmax-" << n.version << " with axis " << axis << " on a rank-"
                     << type.getRank() << " input (flattening semantics) is not supported";
  Composer c(n);
  Value index = extremeIndex(c, n.input(0), *normalized, true, false);
  Value positions = c.iota(type.getDimSize(*normalized), type.getRank(), *normalized);
  Value hit = c.op("nn.equal", {positions, index});
  return c.result(c.cast(hit, type.getElementType()));
}

/// OneHot(indices, depth, values): values[1] where the new dim at `axis`
/// equals the index (negative ones count from depth), values[0] elsewhere.
Values importOneHot(NodeImporter &n) {
  if (failed(n.expectInputs(3, 3)) || failed(n.expectAttributes({{"axis", Kind::Int}})))
    return failure();
  auto indicesType = rankedInput(n, 0);
  DenseElementsAttr depthAttr;
  if (!matchPattern(n.input(1), m_Constant(&depthAttr)) || depthAttr.getNumElements() != 1)
    return n.error() << "OneHot depth must be a constant with one element";
  const double depthValue = isa<FloatType>(depthAttr.getElementType())
                                ? (*depthAttr.value_begin<APFloat>()).convertToDouble()
                                : static_cast<double>((*depthAttr.value_begin<APInt>()).getSExtValue());
  const int64_t depth = static_cast<int64_t>(depthValue);
  if (depth < 1)
    return n.error() << "OneHot depth must be at least 1, got " << depthValue;
  if (!indicesType)
    return n.error() << "OneHot needs ranked indices";
  auto axis = normalizedAxis(n, n.getInt("axis", -1), indicesType.getRank() + 1);
  if (failed(axis))
    return failure();
  Composer c(n);
  Value index = wrappedIndex(c, n.input(0), depth);
  Value axisValue = n.constantI64({*axis});
  Value expanded = c.op("nn.unsqueeze", {index, axisValue});
  Value positions = c.iota(depth, indicesType.getRank() + 1, *axis);
  Value hit = c.op("nn.equal", {expanded, positions});
  Value first = n.constantI64({0}, true), second = n.constantI64({1}, true);
  Value off = c.op("nn.gather", {n.input(2), first});
  Value on = c.op("nn.gather", {n.input(2), second});
  return c.result(c.op("nn.where", {hit, on, off}));
}

/// DepthToSpace (modes DCR and CRD) and SpaceToDepth: a reshape to 6-D, a
/// transpose, a reshape back.
Values importDepthSpace(NodeImporter &n, bool toSpace) {
  std::vector<AttrSpec> specs = {{"blocksize", Kind::Int, true}};
  if (toSpace)
    specs.push_back({"mode", Kind::String});
  if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes(specs)))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || type.getRank() != 4)
    return n.error() << n.node.op_type() << " needs a static [N, C, H, W] input, got "
                     << n.input(0).getType();
  const int64_t b = n.getInt("blocksize", 0);
  const int64_t N = type.getDimSize(0), C = type.getDimSize(1), H = type.getDimSize(2),
                W = type.getDimSize(3);
  Composer c(n);
  if (toSpace) {
    if (b < 1 || C % (b * b))
      return n.error() << "DepthToSpace blocksize " << b << ": its square must divide the "
                       << C << " channels";
    const std::string mode = n.getString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      return n.error() << "DepthToSpace mode '" << mode << "' is not DCR or CRD";
    const bool dcr = mode == "DCR";
    Value split = dcr ? c.reshape(n.input(0), {N, b, b, C / (b * b), H, W})
                      : c.reshape(n.input(0), {N, C / (b * b), b, b, H, W});
    Value moved = dcr ? c.transpose(split, {0, 3, 4, 1, 5, 2}) : c.transpose(split, {0, 1, 4, 2, 5, 3});
    return c.result(c.reshape(moved, {N, C / (b * b), H * b, W * b}));
  }
  if (b < 1 || H % b || W % b)
    return n.error() << "SpaceToDepth blocksize " << b << " must divide the height " << H
                     << " and the width " << W;
  Value split = c.reshape(n.input(0), {N, C, H / b, b, W / b, b});
  Value moved = c.transpose(split, {0, 3, 5, 1, 2, 4});
  return c.result(c.reshape(moved, {N, C * b * b, H / b, W / b}));
}

/// InstanceNormalization: each (sample, channel) normalized over its spatial
/// dims, then scale and bias per channel.
Values importInstanceNormalization(NodeImporter &n) {
  if (failed(expectFloatNode(n, 3, 3, {{"epsilon", Kind::Float}})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape() || type.getRank() < 3)
    return n.error() << "InstanceNormalization needs a static [N, C, D1, ...] input, got "
                     << n.input(0).getType();
  const int64_t rank = type.getRank(), channels = type.getDimSize(1);
  SmallVector<int64_t> spatial, perChannel(rank - 1, 1);
  for (int64_t d = 2; d < rank; ++d)
    spatial.push_back(d);
  perChannel[0] = channels;
  Composer c(n);
  Value x = n.input(0);
  auto [mean, centered, variance] = c.moments(x, spatial);
  Value epsilon = c.scalar(n.getFloat("epsilon", 1e-5f), x);
  Value shifted = c.add(variance, epsilon);
  Value deviation = c.unary("nn.sqrt", shifted);
  Value normalized = c.div(centered, deviation);
  Value scale = c.reshape(n.input(1), perChannel);
  Value bias = c.reshape(n.input(2), perChannel);
  Value scaled = c.mul(normalized, scale);
  return c.result(c.add(scaled, bias));
}

/// GatherElements(data, indices, axis): out[.., i, ..] = data[.., indices[.., i, ..], ..]
/// along `axis`. A one-hot mask over the axis (indices against an iota, in a
/// new dim after it) multiplies data and is summed away, so the gradient is a
/// mul's; data is first cut to the indices' extent in the other dims.
Values importGatherElements(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({{"axis", Kind::Int}})))
    return failure();
  auto dataType = rankedInput(n, 0), indicesType = rankedInput(n, 1);
  if (!dataType || !indicesType || !dataType.hasStaticShape() || !indicesType.hasStaticShape() ||
      dataType.getRank() != indicesType.getRank() || dataType.getRank() == 0)
    return n.error() << "GatherElements needs static data and indices of one rank, got "
                     << n.input(0).getType() << " and " << n.input(1).getType();
  const int64_t rank = dataType.getRank();
  auto axis = normalizedAxis(n, n.getInt("axis", 0), rank);
  if (failed(axis))
    return failure();
  const int64_t length = dataType.getDimSize(*axis);
  SmallVector<int64_t> ends, dims;
  bool cut = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == *axis)
      continue;
    if (indicesType.getDimSize(d) > dataType.getDimSize(d))
      return n.error() << "GatherElements indices " << n.input(1).getType()
                       << " exceed data " << n.input(0).getType() << " in dim " << d;
    cut |= indicesType.getDimSize(d) < dataType.getDimSize(d);
    ends.push_back(indicesType.getDimSize(d));
    dims.push_back(d);
  }
  Composer c(n);
  Value data = n.input(0);
  if (cut) {
    Value starts = n.constantI64(SmallVector<int64_t>(dims.size(), 0));
    Value stops = n.constantI64(ends);
    Value axes = n.constantI64(dims);
    Value steps = n.constantI64(SmallVector<int64_t>(dims.size(), 1));
    data = c.op("nn.slice", {data, starts, stops, axes, steps});
  }
  Value index = wrappedIndex(c, n.input(1), length);
  return c.result(selectAlong(c, data, index, *axis));
}

/// ConvTranspose(x [N, C, D...], w [C, M / group, k...], bias [M]): the
/// transpose of the convolution of an [N, M, out...] input by w, which is
/// nn.conv_grad_input with x as the output gradient (its gradient rules are
/// a convolution and a weight gradient), plus the bias. The output size is
/// stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads, or
/// output_shape (or in * stride for SAME_*), whose padding is then derived
/// (none when output_shape is larger: the end is padded with zeros).
Values importConvTranspose(NodeImporter &n) {
  if (failed(expectFloatNode(n, 2, 3,
                             {{"auto_pad", Kind::String},
                              {"dilations", Kind::Ints},
                              {"group", Kind::Int},
                              {"kernel_shape", Kind::Ints},
                              {"output_padding", Kind::Ints},
                              {"output_shape", Kind::Ints},
                              {"pads", Kind::Ints},
                              {"strides", Kind::Ints}})))
    return failure();
  auto x = rankedInput(n, 0), w = rankedInput(n, 1);
  if (!x || !w || !x.hasStaticShape() || !w.hasStaticShape() || x.getRank() < 3 ||
      w.getRank() != x.getRank())
    return n.error() << "ConvTranspose needs static [N, C, D...] input and [C, M/group, k...] "
                        "weight of one rank, got "
                     << n.input(0).getType() << " and " << n.input(1).getType();
  const int64_t spatial = x.getRank() - 2, group = n.getInt("group", 1);
  if (group < 1 || x.getDimSize(1) != w.getDimSize(0) || x.getDimSize(1) % group)
    return n.error() << "ConvTranspose weight " << n.input(1).getType() << " does not fit input "
                     << n.input(0).getType() << " with group " << group;
  auto ints = [&](llvm::StringRef name, int64_t count, int64_t fill) -> FailureOr<SmallVector<int64_t>> {
    auto values = n.getInts(name).value_or(SmallVector<int64_t>(count, fill));
    if (static_cast<int64_t>(values.size()) != count)
      return n.error() << "ConvTranspose " << name << " has " << values.size()
                       << " values, expected " << count;
    return values;
  };
  auto strides = ints("strides", spatial, 1), dilations = ints("dilations", spatial, 1),
       extra = ints("output_padding", spatial, 0), pads = ints("pads", 2 * spatial, 0);
  if (failed(strides) || failed(dilations) || failed(extra) || failed(pads))
    return failure();
  SmallVector<int64_t> kernel(w.getShape().drop_front(2));
  if (auto given = n.getInts("kernel_shape"); given && *given != kernel)
    return n.error() << "ConvTranspose kernel_shape does not match the weight "
                     << n.input(1).getType();
  const std::string autoPad = n.getString("auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "VALID" && autoPad != "SAME_UPPER" &&
      autoPad != "SAME_LOWER")
    return n.error() << "ConvTranspose auto_pad '" << autoPad << "' is not supported";
  // Without output_shape: the sizes from the pads (VALID: none); with it, or
  // with SAME_*, the pads from the sizes.
  std::optional<SmallVector<int64_t>> target = n.getInts("output_shape");
  if (target && static_cast<int64_t>(target->size()) == x.getRank())
    target = SmallVector<int64_t>(target->begin() + 2, target->end());
  if (!target && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")) {
    target.emplace();
    for (int64_t i = 0; i < spatial; ++i)
      target->push_back(x.getDimSize(2 + i) * (*strides)[i]);
  }
  if (autoPad == "VALID")
    *pads = SmallVector<int64_t>(2 * spatial, 0);
  SmallVector<int64_t> outShape{x.getDimSize(0), w.getDimSize(1) * group};
  for (int64_t i = 0; i < spatial; ++i) {
    const int64_t full = (*strides)[i] * (x.getDimSize(2 + i) - 1) + (*extra)[i] +
                         (kernel[i] - 1) * (*dilations)[i] + 1;
    if (target) {
      if (static_cast<int64_t>(target->size()) != spatial)
        return n.error() << "ConvTranspose output_shape has " << target->size()
                         << " values for " << spatial << " spatial dims";
      // A larger output_shape pads the end with what no input reaches, as
      // output_padding does.
      const int64_t total = std::max<int64_t>(0, full - (*target)[i]);
      const bool upper = autoPad == "SAME_UPPER";
      (*pads)[i] = upper ? total / 2 : total - total / 2;
      (*pads)[spatial + i] = total - (*pads)[i];
    }
    const int64_t size = target ? (*target)[i] : full - (*pads)[i] - (*pads)[spatial + i];
    const int64_t beyond = size - (full - (*extra)[i] - (*pads)[i] - (*pads)[spatial + i]);
    if (size < 1 || beyond < 0 || beyond >= (*strides)[i])
      return n.error() << "ConvTranspose dim " << i << " gets size " << size
                       << ": output_padding (or output_shape) may add at most stride - 1 = "
                       << (*strides)[i] - 1 << " to " << full - (*extra)[i] - (*pads)[i] -
                                                               (*pads)[spatial + i];
    outShape.push_back(size);
  }
  auto &b = n.builder;
  Composer c(n);
  Value y = c.op("nn.conv_grad_input", {n.input(0), n.input(1)},
                 {b.getNamedAttr("strides", b.getDenseI64ArrayAttr(*strides)),
                  b.getNamedAttr("pads", b.getDenseI64ArrayAttr(*pads)),
                  b.getNamedAttr("dilations", b.getDenseI64ArrayAttr(*dilations)),
                  b.getNamedAttr("group", b.getI64IntegerAttr(group)),
                  b.getNamedAttr("input_shape", b.getDenseI64ArrayAttr(outShape))});
  if (n.input(2)) {
    SmallVector<int64_t> perChannel(x.getRank() - 1, 1);
    perChannel[0] = outShape[1];
    Value bias = c.reshape(n.input(2), perChannel);
    y = c.add(y, bias);
  }
  return c.result(y);
}

/// Pow(x, y) with y of another element type: y is cast to x's type when x is
/// floating point; an integer x is raised in f64 and cast back (ONNX computes
/// pow(x, y) and keeps x's type: 2 ** 1.5 is 2, not 2 ** 1).
Values importPow(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({})))
    return failure();
  Value x = n.input(0), y = n.input(1);
  Type xType = getElementTypeOrSelf(x.getType()), yType = getElementTypeOrSelf(y.getType());
  Composer c(n);
  if (isa<FloatType>(xType)) {
    Value exponent = xType == yType ? y : c.cast(y, xType);
    return c.result(c.op("nn.pow", {x, exponent}));
  }
  Type f64 = n.builder.getF64Type();
  Value base = c.cast(x, f64);
  Value exponent = c.cast(y, f64);
  Value power = c.op("nn.pow", {base, exponent});
  return c.result(c.cast(power, xType));
}
} // namespace

Values pipe::onnx_import::importLayerNormWithStatistics(NodeImporter &n) {
  if (failed(expectFloatNode(n, 2, 3,
                             {{"axis", Kind::Int}, {"epsilon", Kind::Float}, {"stash_type", Kind::Int}})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type || type.getRank() == 0)
    return n.error() << "LayerNormalization needs a ranked input of rank 1 or more, got "
                     << n.input(0).getType();
  auto axis = normalizedAxis(n, n.getInt("axis", -1), type.getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> axes;
  for (int64_t d = *axis; d < type.getRank(); ++d)
    axes.push_back(d);
  Composer c(n);
  Value x = n.input(0);
  auto [mean, centered, variance] = c.moments(x, axes);
  Value epsilon = c.scalar(n.getFloat("epsilon", 1e-5f), x);
  Value shifted = c.add(variance, epsilon);
  Value deviation = c.unary("nn.sqrt", shifted);
  Value invStdDev = c.unary("nn.reciprocal", deviation);
  Value normalized = c.mul(centered, invStdDev);
  Value y = c.mul(normalized, n.input(1));
  if (n.input(2))
    y = c.add(y, n.input(2));
  auto results = c.result(y);
  if (succeeded(results)) {
    results->push_back(mean);
    if (n.numOutputs() > 2)
      results->push_back(invStdDev);
  }
  return results;
}

Value pipe::onnx_import::axesOperand(NodeImporter &n, unsigned inputIndex, int attributeUntil) {
  if (n.version < attributeUntil) {
    if (auto axes = n.getInts("axes"))
      return n.constantI64(*axes);
    return nullptr;
  }
  return n.input(inputIndex);
}

void pipe::onnx_import::addCompositeOps(const AddOp &add) {
  add("Elu", {1, 6, 22}, 6, importElu);
  add("Selu", {1, 6, 22}, 6, importSelu);
  add("Celu", {12}, 12, importCelu);
  add("ThresholdedRelu", {10, 22}, 10, importThresholdedRelu);
  add("Softsign", {1, 22}, 1, importSoftsign);
  add("Mish", {18, 22}, 18, importMish);
  add("PRelu", {1, 6, 7, 9, 16}, 7, importPRelu);
  add("Mean", {1, 6, 8, 13}, 8, importMean);
  add("Size", {1, 13, 19, 21, 23}, 1, importSize);
  add("CastLike", {15, 19, 21, 23}, 15, importCastLike);
  add("NegativeLogLikelihoodLoss", {12, 13, 22}, 12, importNegativeLogLikelihoodLoss);
  add("ArgMax", {1, 11, 12, 13}, 1, [](NodeImporter &n) { return importArgExtreme(n, true); });
  add("ArgMin", {1, 11, 12, 13}, 1, [](NodeImporter &n) { return importArgExtreme(n, false); });
  add("Hardmax", {1, 11, 13}, 1, importHardmax);
  add("OneHot", {9, 11}, 9, importOneHot);
  add("DepthToSpace", {1, 11, 13}, 1, [](NodeImporter &n) { return importDepthSpace(n, true); });
  add("SpaceToDepth", {1, 13}, 1, [](NodeImporter &n) { return importDepthSpace(n, false); });
  add("InstanceNormalization", {1, 6, 22}, 6, importInstanceNormalization);
  add("GatherElements", {11, 13}, 11, importGatherElements);
  add("Pow", {1, 7, 12, 13, 15}, 7, importPow);
  add("ConvTranspose", {1, 11, 22}, 1, importConvTranspose);
  add("SoftmaxCrossEntropyLoss", {12, 13}, 12, importSoftmaxCrossEntropyLoss);
  const int reductions[] = {1, 11, 13, 18};
  add("ReduceL1", reductions, 1, [](NodeImporter &n) { return importReduction(n, Reduction::L1); });
  add("ReduceL2", reductions, 1, [](NodeImporter &n) { return importReduction(n, Reduction::L2); });
  add("ReduceSumSquare", reductions, 1,
      [](NodeImporter &n) { return importReduction(n, Reduction::SumSquare); });
  add("ReduceLogSum", reductions, 1,
      [](NodeImporter &n) { return importReduction(n, Reduction::LogSum); });
  add("ReduceLogSumExp", reductions, 1,
      [](NodeImporter &n) { return importReduction(n, Reduction::LogSumExp); });
}
