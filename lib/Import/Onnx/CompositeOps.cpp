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

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Values = FailureOr<SmallVector<Value>>;
using Kind = AttrKind;

/// Builds nn ops for one node; the first failure sticks and later calls
/// return null, so a formula is checked once. Each op is its own statement:
/// argument evaluation order is unspecified in C++, and the ops must come out
/// in the same order whatever the compiler.
class Composer {
public:
  explicit Composer(NodeImporter &n) : n(n) {}

  Value op(llvm::StringRef name, ValueRange operands, llvm::ArrayRef<NamedAttribute> attrs = {}) {
    if (failed_ || llvm::any_of(operands, [](Value v) { return !v; })) {
      failed_ = true;
      return nullptr;
    }
    auto results = n.create(name, operands, attrs, 1);
    if (failed(results)) {
      failed_ = true;
      return nullptr;
    }
    return (*results)[0];
  }
  /// A 0-d constant of `like`'s element type.
  Value scalar(double value, Value like) {
    if (!like)
      return nullptr;
    return n.constantScalar(value, getElementTypeOrSelf(like.getType()));
  }
  Value add(Value a, Value b) { return op("nn.add", {a, b}); }
  Value sub(Value a, Value b) { return op("nn.sub", {a, b}); }
  Value mul(Value a, Value b) { return op("nn.mul", {a, b}); }
  Value div(Value a, Value b) { return op("nn.div", {a, b}); }
  Value unary(llvm::StringRef name, Value x) { return op(name, {x}); }
  /// min(x, 0) and max(x, 0).
  Value negativePart(Value x) { return op("nn.min", {x, scalar(0, x)}); }
  Value positivePart(Value x) { return op("nn.relu", {x}); }

  Values result(Value v) const {
    if (failed_ || !v)
      return failure();
    return SmallVector<Value>{v};
  }

  NodeImporter &n;

private:
  bool failed_ = false;
};

/// Checks a node of `minInputs` to `maxInputs` inputs whose first is floating
/// point (the formulas use exp, sqrt, log) and whose attributes are among `specs`.
LogicalResult expectFloatNode(NodeImporter &n, unsigned minInputs, unsigned maxInputs,
                              llvm::ArrayRef<AttrSpec> specs) {
  if (failed(n.expectInputs(minInputs, maxInputs)) || failed(n.expectAttributes(specs)))
    return failure();
  Value x = n.input(0);
  if (!isa<FloatType>(getElementTypeOrSelf(x.getType())))
    return n.error() << n.node.op_type() << " needs a floating-point input, got "
                     << x.getType();
  return success();
}

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
/// kernel, one fused gradient). Other forms: LogSoftmax over the classes (axis
/// 1), then the negative log-likelihood. The optional second output is the
/// log-probability.
Values importSoftmaxCrossEntropyLoss(NodeImporter &n) {
  auto attributes = checkLoss(n);
  if (failed(attributes))
    return failure();
  if (attributes->reduction == LossReduction::Mean && !n.input(2)) {
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
} // namespace

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
