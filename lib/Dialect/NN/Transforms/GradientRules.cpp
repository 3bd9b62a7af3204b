//===- GradientRules.cpp - one gradient rule per differentiable nn op -----===//
//
// Each rule reads exactly the forward values the cost model's
// getSavedForBackward names for the op (lib/Analysis/OpCostModels.cpp), so the
// memory the planner charges is the memory the program keeps. Gradients are
// written with forward nn ops where that costs nothing extra (element-wise
// products, reshapes, reductions) and with the gradient ops of NNGradOps.td
// where it would (convolution, pooling, normalisation, softmax, scatter-add).
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/Transforms/Gradients.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// Builds the ops of one rule at the end of the backward program, at the
/// forward op's location.
class RuleBuilder {
public:
  RuleBuilder(Operation *op, GradientEmitter &emitter)
      : op(op), emitter(emitter), b(emitter.getBuilder()), loc(op->getLoc()) {}

  Operation *op;
  GradientEmitter &emitter;
  OpBuilder &b;
  Location loc;

  Value dy(unsigned result = 0) { return emitter.getResultGradient(result); }
  bool needs(unsigned operand) { return emitter.needsGradient(operand); }
  Value forward(Value v) { return emitter.getForwardValue(v); }
  Value operand(unsigned i) { return forward(op->getOperand(i)); }
  Value result(unsigned i) { return forward(op->getResult(i)); }
  /// Gives operand i's gradient, summed down to the operand's shape.
  void give(unsigned i, Value g) {
    if (g && needs(i))
      emitter.addOperandGradient(i, sumTo(g, typeOf(op->getOperand(i))));
  }

  template <typename OpT>
  Value make(Type type, ValueRange operands, ArrayRef<NamedAttribute> attrs = {}) {
    return OpT::create(b, loc, TypeRange{type}, operands, attrs)->getResult(0);
  }
  NamedAttribute attr(StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  }
  NamedAttribute i64(StringRef name, int64_t value) {
    return attr(name, b.getI64IntegerAttr(value));
  }
  NamedAttribute ints(StringRef name, ArrayRef<int64_t> values) {
    return attr(name, b.getDenseI64ArrayAttr(values));
  }

  /// A scalar constant of `element` (a float type).
  Value scalar(double value, Type element) {
    auto type = RankedTensorType::get({}, element);
    Attribute attr;
    if (isa<FloatType>(element))
      attr = DenseElementsAttr::get(type, b.getFloatAttr(element, value));
    else
      attr = DenseElementsAttr::get(type, b.getIntegerAttr(element, static_cast<int64_t>(value)));
    return ConstantOp::create(b, loc, type, cast<ElementsAttr>(attr));
  }
  Value zerosLike(RankedTensorType type) {
    Attribute zero = isa<FloatType>(type.getElementType())
                         ? Attribute(b.getFloatAttr(type.getElementType(), 0.0))
                         : Attribute(b.getIntegerAttr(type.getElementType(), 0));
    return ConstantOp::create(b, loc, type,
                              cast<ElementsAttr>(DenseElementsAttr::get(type, zero)));
  }
  Value indices(ArrayRef<int64_t> values) {
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())}, b.getI64Type());
    return ConstantOp::create(b, loc, type,
                              cast<ElementsAttr>(DenseElementsAttr::get(type, values)));
  }

  RankedTensorType like(ArrayRef<int64_t> shape, Value v) {
    return RankedTensorType::get(shape, typeOf(v).getElementType());
  }
  RankedTensorType broadcastType(Value a, Value c, Type element) {
    auto shape = broadcastShapes(typeOf(a).getShape(), typeOf(c).getShape());
    return RankedTensorType::get(*shape, element);
  }
  template <typename OpT> Value binary(Value lhs, Value rhs) {
    return make<OpT>(broadcastType(lhs, rhs, typeOf(lhs).getElementType()), {lhs, rhs});
  }
  Value mul(Value l, Value r) { return binary<MulOp>(l, r); }
  Value div(Value l, Value r) { return binary<DivOp>(l, r); }
  Value add(Value l, Value r) { return binary<AddOp>(l, r); }
  Value sub(Value l, Value r) { return binary<SubOp>(l, r); }
  Value neg(Value v) { return make<NegOp>(v.getType(), {v}); }
  template <typename OpT> Value compare(Value lhs, Value rhs) {
    return make<OpT>(broadcastType(lhs, rhs, b.getI1Type()), {lhs, rhs});
  }
  Value where(Value condition, Value x, Value y) {
    auto shape = broadcastShapes(typeOf(condition).getShape(), typeOf(x).getShape());
    shape = broadcastShapes(*shape, typeOf(y).getShape());
    return make<WhereOp>(RankedTensorType::get(*shape, typeOf(x).getElementType()),
                         {condition, x, y});
  }
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (typeOf(v).getShape() == shape)
      return v;
    return make<ReshapeOp>(like(shape, v), {v, indices(shape)});
  }
  Value expand(Value v, ArrayRef<int64_t> shape) {
    if (typeOf(v).getShape() == shape)
      return v;
    return make<ExpandOp>(like(shape, v), {v, indices(shape)});
  }
  Value transpose(Value v, ArrayRef<int64_t> perm) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(typeOf(v).getDimSize(p));
    return make<TransposeOp>(like(shape, v), {v}, {ints("perm", perm)});
  }
  /// Sum over `axes`, keeping them as size-1 dims when `keep`.
  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keep) {
    SmallVector<int64_t> shape;
    for (auto [d, size] : llvm::enumerate(typeOf(v).getShape())) {
      bool reduced = llvm::is_contained(axes, static_cast<int64_t>(d));
      if (!reduced)
        shape.push_back(size);
      else if (keep)
        shape.push_back(1);
    }
    return make<ReduceSumOp>(like(shape, v), {v, indices(axes)}, {i64("keepdims", keep)});
  }
  /// The gradient of a broadcast operand: `g` summed over the dims the
  /// operand was broadcast along, in the operand's shape.
  Value sumTo(Value g, RankedTensorType target) {
    ArrayRef<int64_t> from = typeOf(g).getShape(), to = target.getShape();
    if (from == to)
      return g;
    int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(to.size());
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d)
      if (d < lead || (to[d - lead] == 1 && from[d] != 1))
        axes.push_back(d);
    Value summed = axes.empty() ? g : reduceSum(g, axes, /*keep=*/true);
    return reshape(summed, to);
  }
};

LogicalResult noRule(Operation *op, const Twine &why) {
  return op->emitOpError("has no gradient rule: ") << why;
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

/// unary_grad of f: the saved value is f's output or input, as the memory
/// model's unarySpec keeps it.
LogicalResult unaryGrad(RuleBuilder &r, UnaryFunction fn, bool keepsOutput, double alpha = 0,
                        double beta = 0) {
  if (!r.needs(0) || !r.dy())
    return success();
  Value saved = keepsOutput ? r.result(0) : r.operand(0);
  Value dx = r.make<UnaryGradOp>(r.dy().getType(), {saved, r.dy()},
                                 {r.attr("function", UnaryFunctionAttr::get(r.b.getContext(), fn)),
                                  r.attr("alpha", r.b.getF64FloatAttr(alpha)),
                                  r.attr("beta", r.b.getF64FloatAttr(beta))});
  r.give(0, dx);
  return success();
}

template <typename OpT, UnaryFunction Fn, bool KeepsOutput>
struct UnaryModel
    : GradientOpInterface::ExternalModel<UnaryModel<OpT, Fn, KeepsOutput>, OpT> {
  LogicalResult emitGradient(Operation *op, GradientEmitter &e) const {
    RuleBuilder r(op, e);
    return unaryGrad(r, Fn, KeepsOutput);
  }
};

/// A rule written as a function of the op and a RuleBuilder.
template <typename OpT>
using RuleFn = LogicalResult (*)(OpT, RuleBuilder &);

template <typename OpT, RuleFn<OpT> Rule>
struct Model : GradientOpInterface::ExternalModel<Model<OpT, Rule>, OpT> {
  LogicalResult emitGradient(Operation *op, GradientEmitter &e) const {
    RuleBuilder r(op, e);
    return Rule(cast<OpT>(op), r);
  }
};

LogicalResult gelu(GeluOp op, RuleBuilder &r) {
  return unaryGrad(r, op.getApproximate() == "tanh" ? UnaryFunction::gelu_tanh
                                                    : UnaryFunction::gelu,
                   false);
}
LogicalResult leakyRelu(LeakyReluOp op, RuleBuilder &r) {
  return unaryGrad(r, UnaryFunction::leaky_relu, false, op.getAlpha().convertToDouble());
}
LogicalResult hardSigmoid(HardSigmoidOp op, RuleBuilder &r) {
  return unaryGrad(r, UnaryFunction::hard_sigmoid, false, op.getAlpha().convertToDouble(),
                   op.getBeta().convertToDouble());
}
LogicalResult clip(ClipOp op, RuleBuilder &r) {
  auto low = getConstantScalar(op.getMin()), high = getConstantScalar(op.getMax());
  if (!low || !high)
    return noRule(op, "Clip bounds must be constants");
  return unaryGrad(r, UnaryFunction::clip, false, *low, *high);
}
LogicalResult negate(NegOp, RuleBuilder &r) {
  if (r.dy())
    r.give(0, r.neg(r.dy()));
  return success();
}
LogicalResult identity(IdentityOp, RuleBuilder &r) {
  r.give(0, r.dy());
  return success();
}
LogicalResult castGrad(CastOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  Type from = typeOf(op.getInput()).getElementType();
  if (!isa<FloatType>(from))
    return success(); // an integer input has no gradient
  Value g = r.dy();
  if (from != typeOf(g).getElementType())
    g = r.make<CastOp>(typeOf(op.getInput()), {g}, {r.attr("to", TypeAttr::get(from))});
  r.give(0, g);
  return success();
}

//===----------------------------------------------------------------------===//
// Broadcasting binary ops and Where
//===----------------------------------------------------------------------===//

LogicalResult addGrad(AddOp, RuleBuilder &r) {
  r.give(0, r.dy());
  r.give(1, r.dy());
  return success();
}
LogicalResult subGrad(SubOp op, RuleBuilder &r) {
  r.give(0, r.dy());
  if (r.needs(1) && r.dy())
    r.give(1, r.neg(r.sumTo(r.dy(), typeOf(op.getRhs()))));
  return success();
}
LogicalResult mulGrad(MulOp, RuleBuilder &r) {
  if (!r.dy())
    return success();
  if (r.needs(0))
    r.give(0, r.mul(r.dy(), r.operand(1)));
  if (r.needs(1))
    r.give(1, r.mul(r.dy(), r.operand(0)));
  return success();
}
LogicalResult divGrad(DivOp, RuleBuilder &r) {
  if (!r.dy())
    return success();
  Value rhs = r.operand(1);
  Value quotient = r.div(r.dy(), rhs); // dy / b
  if (r.needs(0))
    r.give(0, quotient);
  if (r.needs(1)) // -dy a / b^2
    r.give(1, r.neg(r.div(r.mul(quotient, r.operand(0)), rhs)));
  return success();
}
LogicalResult powGrad(PowOp, RuleBuilder &r) {
  if (!r.dy())
    return success();
  Value a = r.operand(0), e = r.operand(1);
  Type element = typeOf(a).getElementType();
  if (r.needs(0)) { // dy * e * a^(e-1)
    Value lowered = r.binary<PowOp>(a, r.sub(e, r.scalar(1.0, element)));
    r.give(0, r.mul(r.mul(r.dy(), e), lowered));
  }
  if (r.needs(1)) { // dy * a^e * log(a)
    Value power = r.binary<PowOp>(a, e);
    Value log = r.make<LogOp>(a.getType(), {a});
    r.give(1, r.mul(r.mul(r.dy(), power), log));
  }
  return success();
}
/// Max/Min: dy to the operand that won; ties share it equally (torch).
template <typename OpT, bool IsMax>
LogicalResult extremumGrad(OpT, RuleBuilder &r) {
  if (!r.dy())
    return success();
  Value a = r.operand(0), c = r.operand(1);
  Type element = typeOf(r.dy()).getElementType();
  Value zero = r.scalar(0.0, element);
  // One op per statement: the order of a call's arguments is unspecified in
  // C++, and the IR (and its tests) must not depend on the compiler.
  Value half = r.mul(r.dy(), r.scalar(0.5, element));
  Value tie = r.where(r.compare<EqualOp>(a, c), half, zero);
  Value aWins = IsMax ? r.compare<GreaterOp>(a, c) : r.compare<LessOp>(a, c);
  Value cWins = IsMax ? r.compare<LessOp>(a, c) : r.compare<GreaterOp>(a, c);
  if (r.needs(0))
    r.give(0, r.where(aWins, r.dy(), tie));
  if (r.needs(1))
    r.give(1, r.where(cWins, r.dy(), tie));
  return success();
}
LogicalResult whereGrad(WhereOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  Value condition = r.operand(0);
  Value zero = r.scalar(0.0, typeOf(r.dy()).getElementType());
  if (r.needs(1))
    r.give(1, r.where(condition, r.dy(), zero));
  if (r.needs(2))
    r.give(2, r.where(condition, zero, r.dy()));
  return success();
}

//===----------------------------------------------------------------------===//
// Products
//===----------------------------------------------------------------------===//

SmallVector<int64_t> swapLastTwo(int64_t rank) {
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

Value gemm(RuleBuilder &r, Value a, Value c, bool transA, bool transB, double alpha = 1.0) {
  ArrayRef<int64_t> as = typeOf(a).getShape(), cs = typeOf(c).getShape();
  int64_t m = transA ? as[1] : as[0], n = transB ? cs[0] : cs[1];
  return r.make<GemmOp>(r.like({m, n}, a), {a, c},
                        {r.attr("alpha", r.b.getF32FloatAttr(alpha)), r.i64("transA", transA),
                         r.i64("transB", transB)});
}

LogicalResult matmulGrad(MatMulOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  auto lhsType = typeOf(op.getLhs()), rhsType = typeOf(op.getRhs());
  if (lhsType.getRank() < 2 || rhsType.getRank() < 2)
    return noRule(op, "MatMul with a 1-D operand");
  int64_t k = lhsType.getShape().back(), n = rhsType.getShape().back();
  if (rhsType.getRank() == 2) {
    // x[..., K] @ W[K, N]: flatten the leading dims and use two GEMMs.
    int64_t rows = lhsType.getNumElements() / k;
    Value dy2 = r.reshape(r.dy(), {rows, n});
    if (r.needs(1))
      r.give(1, gemm(r, r.reshape(r.operand(0), {rows, k}), dy2, true, false));
    if (r.needs(0))
      r.give(0, r.reshape(gemm(r, dy2, r.operand(1), false, true), lhsType.getShape()));
    return success();
  }
  // Batched: dA = dy B^T, dB = A^T dy, each summed over broadcast batch dims.
  auto batched = [&](Value x, Value c) {
    auto xs = typeOf(x).getShape(), cs = typeOf(c).getShape();
    auto batch = broadcastShapes(xs.drop_back(2), cs.drop_back(2));
    SmallVector<int64_t> shape(*batch);
    shape.push_back(xs[xs.size() - 2]);
    shape.push_back(cs.back());
    return r.make<MatMulOp>(r.like(shape, x), {x, c});
  };
  if (r.needs(0))
    r.give(0, batched(r.dy(), r.transpose(r.operand(1), swapLastTwo(rhsType.getRank()))));
  if (r.needs(1))
    r.give(1, batched(r.transpose(r.operand(0), swapLastTwo(lhsType.getRank())), r.dy()));
  return success();
}

/// y = alpha op(A) op(B) + beta C, op = transpose when the flag is set.
LogicalResult gemmGrad(GemmOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  bool ta = op.getTransA() != 0, tb = op.getTransB() != 0;
  double alpha = op.getAlpha().convertToDouble();
  if (r.needs(0)) {
    Value b = r.operand(1);
    r.give(0, ta ? gemm(r, b, r.dy(), tb, true, alpha) : gemm(r, r.dy(), b, false, !tb, alpha));
  }
  if (r.needs(1)) {
    Value a = r.operand(0);
    r.give(1, tb ? gemm(r, r.dy(), a, true, ta, alpha) : gemm(r, a, r.dy(), !ta, false, alpha));
  }
  if (op.getC() && r.needs(2)) {
    Value g = r.sumTo(r.dy(), typeOf(op.getC()));
    double beta = op.getBeta().convertToDouble();
    if (beta != 1.0)
      g = r.mul(g, r.scalar(beta, typeOf(g).getElementType()));
    r.give(2, g);
  }
  return success();
}

/// The explicit window of a conv or pool op: strides, [begin..., end...]
/// pads and dilations with defaults filled in and auto_pad resolved.
FailureOr<WindowGeometry> explicitWindow(Operation *op, Value input, ArrayRef<int64_t> kernel,
                                         std::optional<ArrayRef<int64_t>> strides,
                                         std::optional<ArrayRef<int64_t>> dilations,
                                         std::optional<ArrayRef<int64_t>> pads,
                                         StringRef autoPad, bool ceilMode) {
  std::string error;
  auto geometry = computeWindowGeometry(typeOf(input).getShape().drop_front(2), kernel, strides,
                                        dilations, pads, autoPad, ceilMode, error);
  if (!geometry)
    return op->emitOpError(error);
  return *geometry;
}

SmallVector<int64_t> padsOf(const WindowGeometry &g) {
  SmallVector<int64_t> pads(g.padsBegin);
  pads.append(g.padsEnd.begin(), g.padsEnd.end());
  return pads;
}

/// conv_grad_input as a forward op (ONNX ConvTranspose): y = conv^T(x, w).
/// Its input's gradient is the convolution of dy with w, and w's is the
/// gradient a convolution of dy would give it for an output gradient x.
LogicalResult convTransposeGrad(ConvGradInputOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  SmallVector<NamedAttribute> attrs{r.ints("strides", op.getStrides()),
                                    r.ints("pads", op.getPads()),
                                    r.ints("dilations", op.getDilations()),
                                    r.i64("group", op.getGroup())};
  if (r.needs(0))
    r.give(0, r.make<ConvOp>(op.getGrad().getType(), {r.dy(), r.operand(1)}, attrs));
  if (r.needs(1)) {
    SmallVector<NamedAttribute> a(attrs);
    a.push_back(r.ints("weight_shape", typeOf(op.getWeight()).getShape()));
    r.give(1, r.make<ConvGradWeightOp>(op.getWeight().getType(), {r.dy(), r.operand(0)}, a));
  }
  return success();
}

LogicalResult convGrad(ConvOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  auto weightType = typeOf(op.getWeight());
  SmallVector<int64_t> kernel(weightType.getShape().drop_front(2));
  auto window = explicitWindow(op, op.getInput(), kernel, op.getStrides(), op.getDilations(),
                               op.getPads(), op.getAutoPad(), false);
  if (failed(window))
    return failure();
  SmallVector<NamedAttribute> attrs{r.ints("strides", window->strides),
                                    r.ints("pads", padsOf(*window)),
                                    r.ints("dilations", window->dilations),
                                    r.i64("group", op.getGroup())};
  if (r.needs(0)) {
    SmallVector<NamedAttribute> a(attrs);
    a.push_back(r.ints("input_shape", typeOf(op.getInput()).getShape()));
    r.give(0, r.make<ConvGradInputOp>(op.getInput().getType(), {r.dy(), r.operand(1)}, a));
  }
  if (r.needs(1)) {
    SmallVector<NamedAttribute> a(attrs);
    a.push_back(r.ints("weight_shape", weightType.getShape()));
    r.give(1, r.make<ConvGradWeightOp>(weightType, {r.operand(0), r.dy()}, a));
  }
  if (op.getBias() && r.needs(2)) {
    SmallVector<int64_t> axes{0};
    for (int64_t d = 2; d < weightType.getRank(); ++d)
      axes.push_back(d);
    r.give(2, r.reduceSum(r.dy(), axes, /*keep=*/false));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Pooling and normalisation
//===----------------------------------------------------------------------===//

LogicalResult maxPoolGrad(MaxPoolOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  if (!op.getIndices())
    return noRule(op, "the forward keeps no indices (pipe-differentiate adds them)");
  r.give(0, r.make<MaxPoolGradOp>(op.getInput().getType(), {r.dy(), r.result(1)},
                                  {r.ints("input_shape", typeOf(op.getInput()).getShape())}));
  return success();
}

LogicalResult averagePoolGrad(AveragePoolOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  if (auto dilations = op.getDilations())
    if (llvm::any_of(*dilations, [](int64_t d) { return d != 1; }))
      return noRule(op, "AveragePool with dilations");
  auto window = explicitWindow(op, op.getInput(), op.getKernelShape(), op.getStrides(),
                               std::nullopt, op.getPads(), op.getAutoPad(),
                               op.getCeilMode() != 0);
  if (failed(window))
    return failure();
  r.give(0, r.make<AveragePoolGradOp>(
                op.getInput().getType(), {r.dy()},
                {r.ints("kernel_shape", window->kernel), r.ints("strides", window->strides),
                 r.ints("pads", padsOf(*window)),
                 r.i64("count_include_pad", op.getCountIncludePad()),
                 r.ints("input_shape", typeOf(op.getInput()).getShape())}));
  return success();
}

LogicalResult globalAveragePoolGrad(GlobalAveragePoolOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto input = typeOf(op.getInput());
  double window = static_cast<double>(input.getNumElements()) /
                  static_cast<double>(typeOf(op.getOutput()).getNumElements());
  Value scaled = r.mul(r.dy(), r.scalar(1.0 / window, input.getElementType()));
  r.give(0, r.expand(scaled, input.getShape()));
  return success();
}

LogicalResult batchNormTrainGrad(BatchNormTrainOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  auto grads = BatchNormGradOp::create(
      r.b, r.loc,
      TypeRange{op.getInput().getType(), op.getScale().getType(), op.getScale().getType()},
      ValueRange{r.operand(0), r.operand(1), r.result(1), r.result(2), r.dy()});
  r.give(0, grads.getInputGrad());
  r.give(1, grads.getScaleGrad());
  r.give(2, grads.getBiasGrad());
  return success();
}

/// Inference-mode batch norm, y = (x - mean) a + bias with a = scale /
/// sqrt(var + eps) from parameters only: dx = dy a; dscale = sum(dy x-hat);
/// dbias = sum(dy). Keeps x only for the parameter gradients.
LogicalResult batchNormGrad(BatchNormOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  if (op.getTrainingMode() != 0 || !op.getRunningStats().empty())
    return noRule(op, "a training batch norm (pipe-differentiate rewrites it first)");
  auto input = typeOf(op.getInput());
  int64_t channels = input.getDimSize(1);
  Type element = input.getElementType();
  SmallVector<int64_t> perChannel(input.getRank(), 1);
  perChannel[1] = channels;
  SmallVector<int64_t> axes{0};
  for (int64_t d = 2; d < input.getRank(); ++d)
    axes.push_back(d);
  Value var = r.operand(4);
  double eps = op.getEpsilon().convertToDouble();
  Value invstd = r.make<ReciprocalOp>(
      var.getType(), {r.make<SqrtOp>(var.getType(), {r.add(var, r.scalar(eps, element))})});
  if (r.needs(0))
    r.give(0, r.mul(r.dy(), r.reshape(r.mul(r.operand(1), invstd), perChannel)));
  if (r.needs(1)) {
    Value centred = r.sub(r.operand(0), r.reshape(r.operand(3), perChannel));
    Value xhat = r.mul(centred, r.reshape(invstd, perChannel));
    r.give(1, r.reduceSum(r.mul(r.dy(), xhat), axes, false));
  }
  if (r.needs(2))
    r.give(2, r.reduceSum(r.dy(), axes, false));
  return success();
}

LogicalResult layerNormGrad(LayerNormOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  if (op.getStatistics().size() != 2)
    return noRule(op, "the forward keeps no statistics (pipe-differentiate adds them)");
  auto axis = normalizeAxis(op.getAxis(), typeOf(op.getInput()).getRank());
  Type scaleType = op.getScale().getType();
  auto grads = LayerNormGradOp::create(
      r.b, r.loc, TypeRange{op.getInput().getType(), scaleType, scaleType},
      ValueRange{r.operand(0), r.operand(1), r.result(1), r.result(2), r.dy()},
      {r.i64("axis", *axis)});
  r.give(0, grads.getInputGrad());
  r.give(1, grads.getScaleGrad());
  if (op.getBias())
    r.give(2, grads.getBiasGrad());
  return success();
}

template <typename OpT, typename GradOpT>
LogicalResult softmaxGrad(OpT op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto axis = normalizeAxis(op.getAxis(), typeOf(op.getInput()).getRank());
  r.give(0, r.make<GradOpT>(op.getInput().getType(), {r.result(0), r.dy()},
                            {r.i64("axis", *axis)}));
  return success();
}

LogicalResult dropoutGrad(DropoutOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto training = getConstantInts(op.getTrainingMode());
  auto ratio = pipe::nn::getConstantScalar(op.getRatio());
  bool active = !(training && !training->empty() && (*training)[0] == 0) &&
                !(ratio && *ratio == 0.0);
  if (!active) {
    r.give(0, r.dy());
    return success();
  }
  if (!ratio)
    return noRule(op, "Dropout with a ratio that is not a constant");
  if (!op.getMask())
    return noRule(op, "the forward keeps no mask (pipe-differentiate adds it)");
  Type element = typeOf(r.dy()).getElementType();
  Value scaled = r.mul(r.dy(), r.scalar(1.0 / (1.0 - *ratio), element));
  r.give(0, r.where(r.result(1), scaled, r.scalar(0.0, element)));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The reduced axes of a reduce op (normalised, sorted), or failure.
FailureOr<SmallVector<int64_t>> reducedAxes(Operation *op, Value axesOperand,
                                            int64_t noopWithEmptyAxes) {
  int64_t rank = typeOf(op->getOperand(0)).getRank();
  SmallVector<int64_t> axes;
  if (axesOperand) {
    auto given = getConstantInts(axesOperand);
    if (!given)
      return noRule(op, "reduction axes that are not constants");
    for (int64_t a : *given)
      axes.push_back(*normalizeAxis(a, rank));
  }
  if (axes.empty() && !noopWithEmptyAxes)
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  llvm::sort(axes);
  return axes;
}

/// dy and y in the input's rank, with the reduced dims as size 1.
SmallVector<int64_t> keptShape(Operation *op, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(typeOf(op->getOperand(0)).getShape());
  for (int64_t a : axes)
    shape[a] = 1;
  return shape;
}

template <typename OpT>
LogicalResult reduceGrad(OpT op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto axes = reducedAxes(op, op.getAxes(), op.getNoopWithEmptyAxes());
  if (failed(axes))
    return failure();
  auto input = typeOf(op.getInput());
  Type element = input.getElementType();
  SmallVector<int64_t> kept = keptShape(op, *axes);
  Value dy = r.reshape(r.dy(), kept);
  if constexpr (std::is_same_v<OpT, ReduceSumOp> || std::is_same_v<OpT, ReduceMeanOp>) {
    if constexpr (std::is_same_v<OpT, ReduceMeanOp>) {
      double count = static_cast<double>(input.getNumElements()) /
                     static_cast<double>(typeOf(op.getOutput()).getNumElements());
      dy = r.mul(dy, r.scalar(1.0 / count, element));
    }
    r.give(0, r.expand(dy, input.getShape()));
  } else if constexpr (std::is_same_v<OpT, ReduceProdOp>) {
    Value y = r.reshape(r.result(0), kept);
    r.give(0, r.div(r.mul(dy, y), r.operand(0)));
  } else { // max / min: dy shared by the elements equal to the extremum
    Value y = r.reshape(r.result(0), kept);
    Value hit = r.compare<EqualOp>(r.operand(0), y);
    Value ones = r.make<CastOp>(r.like(input.getShape(), r.dy()), {hit},
                                {r.attr("to", TypeAttr::get(element))});
    Value count = r.reduceSum(ones, *axes, /*keep=*/true);
    Value zero = r.scalar(0.0, element);
    r.give(0, r.where(hit, r.div(dy, count), zero));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

template <typename OpT>
LogicalResult reshapeGrad(OpT op, RuleBuilder &r) {
  if (r.dy())
    r.give(0, r.reshape(r.dy(), typeOf(op->getOperand(0)).getShape()));
  return success();
}

LogicalResult transposeGrad(TransposeOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  int64_t rank = typeOf(op.getInput()).getRank();
  SmallVector<int64_t> perm;
  if (auto given = op.getPerm())
    perm.assign(given->begin(), given->end());
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[perm[i]] = i;
  r.give(0, r.transpose(r.dy(), inverse));
  return success();
}

Value sliceAxis(RuleBuilder &r, Value v, int64_t axis, int64_t start, int64_t size) {
  SmallVector<int64_t> shape(typeOf(v).getShape());
  shape[axis] = size;
  return r.make<SliceOp>(r.like(shape, v), {v, r.indices({start}), r.indices({start + size}),
                                            r.indices({axis}), r.indices({1})});
}

LogicalResult concatGrad(ConcatOp op, RuleBuilder &r) {
  if (!r.dy())
    return success();
  int64_t axis = *normalizeAxis(op.getAxis(), typeOf(op.getOutput()).getRank());
  int64_t offset = 0;
  for (auto [i, input] : llvm::enumerate(op.getInputs())) {
    int64_t size = typeOf(input).getDimSize(axis);
    if (r.needs(i))
      r.give(i, sliceAxis(r, r.dy(), axis, offset, size));
    offset += size;
  }
  return success();
}

LogicalResult splitGrad(SplitOp op, RuleBuilder &r) {
  if (!r.needs(0))
    return success();
  int64_t axis = *normalizeAxis(op.getAxis(), typeOf(op.getInput()).getRank());
  SmallVector<Value> parts;
  bool any = false;
  for (auto [i, output] : llvm::enumerate(op.getOutputs())) {
    Value g = r.dy(i);
    any |= static_cast<bool>(g);
    parts.push_back(g ? g : r.zerosLike(typeOf(output)));
  }
  if (!any)
    return success();
  r.give(0, r.make<ConcatOp>(op.getInput().getType(), parts, {r.i64("axis", axis)}));
  return success();
}

LogicalResult sliceGrad(SliceOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto input = typeOf(op.getInput());
  auto starts = getConstantInts(op.getStarts()), ends = getConstantInts(op.getEnds()),
       axes = getConstantInts(op.getAxes()), steps = getConstantInts(op.getSteps());
  if (!starts || !ends || !axes || !steps)
    return noRule(op, "Slice bounds that are not constants");
  SmallVector<int64_t> fullStarts(input.getRank(), 0), fullSteps(input.getRank(), 1);
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t axis = *normalizeAxis((*axes)[i], input.getRank());
    fullStarts[axis] =
        clampSlice(input.getDimSize(axis), (*starts)[i], (*ends)[i], (*steps)[i]).start;
    fullSteps[axis] = (*steps)[i];
  }
  r.give(0, r.make<SliceGradOp>(input, {r.dy()},
                                {r.ints("starts", fullStarts), r.ints("steps", fullSteps),
                                 r.ints("input_shape", input.getShape())}));
  return success();
}

LogicalResult gatherGrad(GatherOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto input = typeOf(op.getInput());
  int64_t axis = *normalizeAxis(op.getAxis(), input.getRank());
  r.give(0, r.make<GatherGradOp>(input, {r.dy(), r.operand(1)},
                                 {r.i64("axis", axis), r.ints("input_shape", input.getShape())}));
  return success();
}

/// y = gather_grad(g, indices): g's rows added into zeros at the indices
/// (MaxUnpool's import), so g's gradient is dy gathered back.
LogicalResult gatherGradGrad(GatherGradOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  r.give(0, r.make<GatherOp>(typeOf(op.getGrad()), {r.dy(), r.operand(1)},
                             {r.i64("axis", op.getAxis())}));
  return success();
}

LogicalResult expandGrad(ExpandOp, RuleBuilder &r) {
  r.give(0, r.dy());
  return success();
}

/// y = tile(x, repeats): view dy as [r0, d0, r1, d1, ...] and sum the r's.
LogicalResult tileGrad(TileOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  auto input = typeOf(op.getInput()), output = typeOf(op.getOutput());
  SmallVector<int64_t> split, axes;
  for (int64_t d = 0; d < input.getRank(); ++d) {
    if (input.getDimSize(d) == 0)
      return success();
    axes.push_back(static_cast<int64_t>(split.size()));
    split.push_back(output.getDimSize(d) / input.getDimSize(d));
    split.push_back(input.getDimSize(d));
  }
  r.give(0, r.reduceSum(r.reshape(r.dy(), split), axes, /*keep=*/false));
  return success();
}

/// Constant padding: the gradient is dy padded by the negated pads (what was
/// added is cropped; what was cropped comes back as zeros).
LogicalResult padGrad(PadOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  if (op.getMode() != "constant")
    return noRule(op, "Pad mode '" + op.getMode() + "'");
  auto pads = getConstantInts(op.getPads());
  if (!pads || !getConstantInts(op.getAxes()))
    return noRule(op, "Pad amounts that are not constants");
  SmallVector<int64_t> negated;
  for (int64_t p : *pads)
    negated.push_back(-p);
  Type element = typeOf(r.dy()).getElementType();
  r.give(0, r.make<PadOp>(op.getInput().getType(),
                          {r.dy(), r.indices(negated), r.scalar(0.0, element),
                           r.operand(3)},
                          {r.attr("mode", r.b.getStringAttr("constant"))}));
  return success();
}

LogicalResult triluGrad(TriluOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  SmallVector<Value> operands{r.dy()};
  if (op.getK())
    operands.push_back(r.operand(1));
  r.give(0, r.make<TriluOp>(r.dy().getType(), operands, {r.i64("upper", op.getUpper())}));
  return success();
}

LogicalResult crossEntropyGrad(SoftmaxCrossEntropyLossOp op, RuleBuilder &r) {
  if (!r.dy() || !r.needs(0))
    return success();
  SmallVector<NamedAttribute> attrs;
  if (auto ignore = op.getIgnoreIndexAttr())
    attrs.push_back(r.attr("ignore_index", ignore));
  r.give(0, r.make<SoftmaxCrossEntropyLossGradOp>(op.getLogits().getType(),
                                                  {r.dy(), r.result(1), r.operand(1)}, attrs));
  return success();
}

template <typename OpT, RuleFn<OpT> Rule>
void attachRule(MLIRContext *ctx) {
  OpT::template attachInterface<Model<OpT, Rule>>(*ctx);
}
template <typename OpT, UnaryFunction Fn, bool KeepsOutput>
void attachUnary(MLIRContext *ctx) {
  OpT::template attachInterface<UnaryModel<OpT, Fn, KeepsOutput>>(*ctx);
}

} // namespace

void pipe::nn::registerGradientInterfaces(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, NNDialect *) {
    using F = UnaryFunction;
    attachUnary<ReluOp, F::relu, true>(ctx);
    attachUnary<ErfOp, F::erf, false>(ctx);
    attachUnary<TanhOp, F::tanh, true>(ctx);
    attachUnary<SigmoidOp, F::sigmoid, true>(ctx);
    attachUnary<SqrtOp, F::sqrt, true>(ctx);
    attachUnary<ExpOp, F::exp, true>(ctx);
    attachUnary<LogOp, F::log, false>(ctx);
    attachUnary<AbsOp, F::abs, false>(ctx);
    attachUnary<ReciprocalOp, F::reciprocal, true>(ctx);
    attachUnary<SoftplusOp, F::softplus, false>(ctx);
    attachUnary<SinOp, F::sin, false>(ctx);
    attachUnary<CosOp, F::cos, false>(ctx);
    attachUnary<TanOp, F::tan, false>(ctx);
    attachUnary<AsinOp, F::asin, false>(ctx);
    attachUnary<AcosOp, F::acos, false>(ctx);
    attachUnary<AtanOp, F::atan, false>(ctx);
    attachUnary<SinhOp, F::sinh, false>(ctx);
    attachUnary<CoshOp, F::cosh, false>(ctx);
    attachUnary<AsinhOp, F::asinh, false>(ctx);
    attachUnary<AcoshOp, F::acosh, false>(ctx);
    attachUnary<AtanhOp, F::atanh, false>(ctx);
    attachUnary<HardSwishOp, F::hard_swish, false>(ctx);
    attachRule<GeluOp, gelu>(ctx);
    attachRule<LeakyReluOp, leakyRelu>(ctx);
    attachRule<HardSigmoidOp, hardSigmoid>(ctx);
    attachRule<ClipOp, clip>(ctx);
    attachRule<NegOp, negate>(ctx);
    attachRule<IdentityOp, identity>(ctx);
    attachRule<CastOp, castGrad>(ctx);
    attachRule<AddOp, addGrad>(ctx);
    attachRule<SubOp, subGrad>(ctx);
    attachRule<MulOp, mulGrad>(ctx);
    attachRule<DivOp, divGrad>(ctx);
    attachRule<PowOp, powGrad>(ctx);
    attachRule<MaxOp, extremumGrad<MaxOp, true>>(ctx);
    attachRule<MinOp, extremumGrad<MinOp, false>>(ctx);
    attachRule<WhereOp, whereGrad>(ctx);
    attachRule<MatMulOp, matmulGrad>(ctx);
    attachRule<GemmOp, gemmGrad>(ctx);
    attachRule<ConvOp, convGrad>(ctx);
    attachRule<MaxPoolOp, maxPoolGrad>(ctx);
    attachRule<AveragePoolOp, averagePoolGrad>(ctx);
    attachRule<GlobalAveragePoolOp, globalAveragePoolGrad>(ctx);
    attachRule<BatchNormOp, batchNormGrad>(ctx);
    attachRule<BatchNormTrainOp, batchNormTrainGrad>(ctx);
    attachRule<ConvGradInputOp, convTransposeGrad>(ctx);
    attachRule<LayerNormOp, layerNormGrad>(ctx);
    attachRule<SoftmaxOp, softmaxGrad<SoftmaxOp, SoftmaxGradOp>>(ctx);
    attachRule<LogSoftmaxOp, softmaxGrad<LogSoftmaxOp, LogSoftmaxGradOp>>(ctx);
    attachRule<DropoutOp, dropoutGrad>(ctx);
    attachRule<ReduceSumOp, reduceGrad<ReduceSumOp>>(ctx);
    attachRule<ReduceMeanOp, reduceGrad<ReduceMeanOp>>(ctx);
    attachRule<ReduceMaxOp, reduceGrad<ReduceMaxOp>>(ctx);
    attachRule<ReduceMinOp, reduceGrad<ReduceMinOp>>(ctx);
    attachRule<ReduceProdOp, reduceGrad<ReduceProdOp>>(ctx);
    attachRule<ReshapeOp, reshapeGrad<ReshapeOp>>(ctx);
    attachRule<FlattenOp, reshapeGrad<FlattenOp>>(ctx);
    attachRule<SqueezeOp, reshapeGrad<SqueezeOp>>(ctx);
    attachRule<UnsqueezeOp, reshapeGrad<UnsqueezeOp>>(ctx);
    attachRule<TransposeOp, transposeGrad>(ctx);
    attachRule<ConcatOp, concatGrad>(ctx);
    attachRule<SplitOp, splitGrad>(ctx);
    attachRule<SliceOp, sliceGrad>(ctx);
    attachRule<GatherOp, gatherGrad>(ctx);
    attachRule<GatherGradOp, gatherGradGrad>(ctx);
    attachRule<ExpandOp, expandGrad>(ctx);
    attachRule<TileOp, tileGrad>(ctx);
    attachRule<PadOp, padGrad>(ctx);
    attachRule<TriluOp, triluGrad>(ctx);
    attachRule<SoftmaxCrossEntropyLossOp, crossEntropyGrad>(ctx);
  });
}
