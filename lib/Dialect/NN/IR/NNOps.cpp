//===- NNOps.cpp - nn op verifiers, folders, canonicalizers ---------------===//
//
// Verifier constraints carry the ids listed in docs/nn-dialect.md. Folders
// evaluate shape arithmetic (Shape, Gather, Concat, Range, integer math ...)
// so that imported Reshape/Expand/Slice targets become static.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;

#include "pipe/Dialect/NN/IR/NNInterfaces.cpp.inc"

#define GET_OP_CLASSES
#include "pipe/Dialect/NN/IR/NNOps.cpp.inc"

//===----------------------------------------------------------------------===//
// nn.constant syntax
//===----------------------------------------------------------------------===//

ParseResult ConstantOp::parse(OpAsmParser &parser, OperationState &result) {
  ElementsAttr value;
  if (parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseAttribute(value, "value", result.attributes))
    return failure();
  result.addTypes(value.getType());
  return success();
}

void ConstantOp::print(OpAsmPrinter &printer) {
  printer.printOptionalAttrDict((*this)->getAttrs(), /*elidedAttrs=*/{"value"});
  printer << ' ';
  printer.printAttribute(getValue());
}

//===----------------------------------------------------------------------===//
// The shared verifier
//===----------------------------------------------------------------------===//

LogicalResult pipe::nn::verifySizeLimits(Operation *op, TypeRange types, StringRef what) {
  for (auto [index, type] : llvm::enumerate(types)) {
    auto ranked = dyn_cast<RankedTensorType>(type);
    if (ranked && !isWithinSizeLimits(ranked.getShape()))
      return op->emitOpError("[nn_c2] ")
             << what << " #" << index << " of type " << type
             << " is beyond the size limits (dims up to 2^40, 2^48 elements)";
  }
  return success();
}

LogicalResult pipe::nn::verifyInferredTypes(Operation *op) {
  auto shaped = cast<ShapeInferenceOpInterface>(op);
  if (failed(verifySizeLimits(op, op->getOperandTypes(), "operand")) ||
      failed(verifySizeLimits(op, op->getResultTypes(), "result")))
    return failure();
  SmallVector<Type> inferred;
  if (failed(shaped.inferResultTypes(inferred)))
    return failure();
  if (inferred.size() != op->getNumResults())
    return op->emitOpError("[nn_c1] expected ") << inferred.size() << " results, has "
                                                << op->getNumResults();
  for (auto [index, pair] : llvm::enumerate(llvm::zip(op->getResultTypes(), inferred))) {
    auto [declared, expected] = pair;
    auto declaredShaped = dyn_cast<ShapedType>(declared);
    auto expectedShaped = cast<ShapedType>(expected);
    if (!declaredShaped)
      return op->emitOpError("[nn_c1] result #") << index << " must be a tensor";
    if (declaredShaped.getElementType() != expectedShaped.getElementType())
      return op->emitOpError("[nn_c1] result #")
             << index << " has element type " << declaredShaped.getElementType()
             << ", expected " << expectedShaped.getElementType();
    if (!declaredShaped.hasRank() || !expectedShaped.hasRank())
      continue;
    bool compatible = declaredShaped.getRank() == expectedShaped.getRank();
    for (int64_t i = 0; compatible && i < declaredShaped.getRank(); ++i) {
      int64_t a = declaredShaped.getDimSize(i), b = expectedShaped.getDimSize(i);
      compatible = ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
    }
    if (!compatible)
      return op->emitOpError("[nn_c1] result #")
             << index << " has type " << declared << ", but the op's shape rules give "
             << expected;
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Op-specific verifiers (constraints the shape rules do not cover)
//===----------------------------------------------------------------------===//

LogicalResult ParamOp::verify() {
  // [param_c1] (source is file, external or inline) is the attribute's type.
  ParamSource source = getSource();
  if (source != ParamSource::inline_ && (getOffset() < 0 || getLength() < 0))
    return emitOpError("[param_c2] a '")
           << stringifyParamSource(source) << "' parameter needs offset and length";
  if (source == ParamSource::external && getPath().empty())
    return emitOpError("[param_c3] an external parameter needs the data file's path");
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("[param_c4] a parameter must have a static shape");
  return success();
}

static Type elementTypeOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// Operands that ONNX's type constraints tie to one type variable (T) must have
/// the same element type.
static LogicalResult verifySameElementType(Operation *op, ValueRange values, StringRef id,
                                           StringRef what) {
  Type first;
  for (Value v : values) {
    if (!v)
      continue;
    if (!first)
      first = elementTypeOf(v);
    else if (elementTypeOf(v) != first)
      return op->emitOpError("[") << id << "] " << what << " must have the same element type, "
                                  << "got " << first << " and " << elementTypeOf(v);
  }
  return success();
}

static bool isScalarLike(Value v) {
  auto type = getRankedType(v);
  return !type || (type.hasStaticShape() && type.getNumElements() == 1);
}

LogicalResult ClipOp::verify() {
  if (!isScalarLike(getMin()) || !isScalarLike(getMax()))
    return emitOpError("[clip_c1] min and max must be scalars");
  return verifySameElementType(*this, {getInput(), getMin(), getMax()}, "clip_c2",
                               "input, min and max");
}

static LogicalResult verifyBroadcastOperands(Operation *op) {
  SmallVector<int64_t> shape;
  for (Value v : op->getOperands()) {
    auto type = getRankedType(v);
    if (!type)
      return success();
    auto merged = broadcastShapes(shape, type.getShape());
    if (!merged)
      return op->emitOpError("[broadcast_c1] operand shapes are not broadcast-compatible");
    shape = *merged;
  }
  return success();
}

/// A broadcasting binary op: operands of one element type (Pow alone lets the
/// exponent have its own, T1), with broadcast-compatible shapes.
static LogicalResult verifyBroadcastOp(Operation *op) {
  if (!isa<PowOp>(op) &&
      failed(verifySameElementType(op, op->getOperands(), "broadcast_c2", "operands")))
    return failure();
  return verifyBroadcastOperands(op);
}

#define NN_VERIFY_BROADCAST(OP)                                                \
  LogicalResult OP::verify() { return verifyBroadcastOp(getOperation()); }
NN_VERIFY_BROADCAST(AddOp)
NN_VERIFY_BROADCAST(SubOp)
NN_VERIFY_BROADCAST(MulOp)
NN_VERIFY_BROADCAST(DivOp)
NN_VERIFY_BROADCAST(PowOp)
NN_VERIFY_BROADCAST(ModOp)
NN_VERIFY_BROADCAST(EqualOp)
NN_VERIFY_BROADCAST(LessOp)
NN_VERIFY_BROADCAST(LessOrEqualOp)
NN_VERIFY_BROADCAST(GreaterOp)
NN_VERIFY_BROADCAST(GreaterOrEqualOp)
NN_VERIFY_BROADCAST(AndOp)
NN_VERIFY_BROADCAST(OrOp)
NN_VERIFY_BROADCAST(MaxOp)
NN_VERIFY_BROADCAST(MinOp)
#undef NN_VERIFY_BROADCAST

LogicalResult WhereOp::verify() {
  auto condition = cast<ShapedType>(getCondition().getType());
  if (!condition.getElementType().isInteger(1))
    return emitOpError("[where_c1] condition must be a tensor of i1");
  if (cast<ShapedType>(getX().getType()).getElementType() !=
      cast<ShapedType>(getY().getType()).getElementType())
    return emitOpError("[where_c2] x and y must have the same element type");
  return verifyBroadcastOperands(getOperation());
}

LogicalResult MatMulOp::verify() {
  if (cast<ShapedType>(getLhs().getType()).getElementType() !=
      cast<ShapedType>(getRhs().getType()).getElementType())
    return emitOpError("[matmul_c4] operands must have the same element type");
  return success();
}

LogicalResult GemmOp::verify() {
  if (failed(verifySameElementType(*this, {getA(), getB(), getC()}, "gemm_c4", "A, B and C")))
    return failure();
  auto c = getC() ? getRankedType(getC()) : RankedTensorType();
  if (c && c.getRank() > 2)
    return emitOpError("[gemm_c3] C must have rank <= 2");
  return success();
}

LogicalResult ConvOp::verify() {
  auto input = getRankedType(getInput()), weight = getRankedType(getWeight());
  if (getGroup() < 1)
    return emitOpError("[conv_c2] group must be >= 1");
  if (!isa<FloatType>(elementTypeOf(getInput())))
    return emitOpError("[conv_c6] input must have a floating-point element type, got ")
           << elementTypeOf(getInput());
  if (failed(verifySameElementType(*this, {getInput(), getWeight(), getBias()}, "conv_c6",
                                   "input, weight and bias")))
    return failure();
  if (!input || !weight)
    return success();
  int64_t channels = input.getDimSize(1), perGroup = weight.getDimSize(1);
  if (!ShapedType::isDynamic(channels) && !ShapedType::isDynamic(perGroup) &&
      channels != perGroup * getGroup())
    return emitOpError("[conv_c2] input has ")
           << channels << " channels, weight expects " << perGroup << " x group "
           << getGroup();
  int64_t outChannels = weight.getDimSize(0);
  if (!ShapedType::isDynamic(outChannels) && outChannels % getGroup() != 0)
    return emitOpError("[conv_c3] output channels ")
           << outChannels << " are not divisible by group " << getGroup();
  if (auto kernel = getKernelShape())
    if (ArrayRef<int64_t>(*kernel) != weight.getShape().drop_front(2))
      return emitOpError("[conv_c4] kernel_shape disagrees with the weight's spatial dims");
  if (getBias()) {
    auto bias = getRankedType(getBias());
    if (bias && (bias.getRank() != 1 || (!bias.isDynamicDim(0) &&
                                         !ShapedType::isDynamic(outChannels) &&
                                         bias.getDimSize(0) != outChannels)))
      return emitOpError("[conv_c5] bias must be 1-D with one entry per output channel");
  }
  return success();
}

static LogicalResult verifyPoolKernel(Operation *op, Value input,
                                      ArrayRef<int64_t> kernel, StringRef id) {
  auto type = getRankedType(input);
  if (type && static_cast<int64_t>(kernel.size()) + 2 != type.getRank())
    return op->emitOpError("[") << id << "] kernel_shape has " << kernel.size()
                                << " entries for a rank-" << type.getRank() << " input";
  return success();
}

LogicalResult MaxPoolOp::verify() {
  return verifyPoolKernel(getOperation(), getInput(), getKernelShape(), "max_pool_c2");
}

LogicalResult AveragePoolOp::verify() {
  return verifyPoolKernel(getOperation(), getInput(), getKernelShape(), "average_pool_c2");
}

LogicalResult BatchNormOp::verify() {
  if (getRunningStats().size() != 0 && getRunningStats().size() != 2)
    return emitOpError("[batch_norm_c1] has 1 or 3 results, not ")
           << getNumResults();
  if (getRunningStats().size() == 2 && getTrainingMode() == 0)
    return emitOpError("[batch_norm_c1] running statistics are results only in training mode");
  auto input = getRankedType(getInput());
  if (!input)
    return success();
  if (input.getRank() < 2)
    return emitOpError("[batch_norm_c2] input must have rank >= 2");
  for (Value v : {getInput(), getScale(), getBias(), getMean(), getVar()})
    if (!isa<FloatType>(elementTypeOf(v)))
      return emitOpError("[batch_norm_c4] input, scale, bias, mean and var must have "
                         "floating-point element types, got ")
             << elementTypeOf(v);
  int64_t channels = input.getDimSize(1);
  for (Value v : {getScale(), getBias(), getMean(), getVar()}) {
    auto type = getRankedType(v);
    if (type && (type.getRank() != 1 || (!type.isDynamicDim(0) &&
                                         !ShapedType::isDynamic(channels) &&
                                         type.getDimSize(0) != channels)))
      return emitOpError("[batch_norm_c3] scale, bias, mean and var must be 1-D of size ")
             << channels;
  }
  return success();
}

LogicalResult LayerNormOp::verify() {
  if (getStatistics().size() != 0 && getStatistics().size() != 2)
    return emitOpError("[layer_norm_c1] has 1 or 3 results, not ") << getNumResults();
  if (failed(verifySameElementType(*this, {getInput(), getScale(), getBias()}, "layer_norm_c4",
                                   "input, scale and bias")))
    return failure();
  auto input = getRankedType(getInput());
  if (!input)
    return success();
  auto axis = normalizeAxis(getAxis(), input.getRank());
  if (!axis)
    return emitOpError("[layer_norm_c2] axis ") << getAxis() << " is out of range";
  auto scale = getRankedType(getScale());
  ArrayRef<int64_t> normalized = input.getShape().drop_front(*axis);
  if (scale && !broadcastShapes(normalized, scale.getShape()))
    return emitOpError("[layer_norm_c3] scale does not broadcast to the normalised dims");
  return success();
}

static LogicalResult verifySoftmaxAxis(Operation *op, Value input, int64_t axis,
                                       StringRef id) {
  auto type = getRankedType(input);
  if (type && !normalizeAxis(axis, type.getRank()))
    return op->emitOpError("[") << id << "] axis " << axis << " is out of range for rank "
                                << type.getRank();
  return success();
}
LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxAxis(getOperation(), getInput(), getAxis(), "softmax_c1");
}
LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxAxis(getOperation(), getInput(), getAxis(), "log_softmax_c1");
}

LogicalResult TransposeOp::verify() {
  auto perm = getPerm();
  if (!perm)
    return success();
  SmallVector<bool> seen(perm->size(), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= static_cast<int64_t>(perm->size()) || seen[p])
      return emitOpError("[transpose_c1] perm must be a permutation of [0, rank)");
    seen[p] = true;
  }
  return success();
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("[concat_c1] needs at least one input");
  Type element = cast<ShapedType>(getInputs().front().getType()).getElementType();
  for (Value v : getInputs())
    if (cast<ShapedType>(v.getType()).getElementType() != element)
      return emitOpError("[concat_c4] inputs must have the same element type");
  return success();
}

LogicalResult SplitOp::verify() {
  if (getNumResults() == 0)
    return emitOpError("[split_c1] needs at least one result");
  return success();
}

LogicalResult GatherOp::verify() {
  // ONNX's Tind: int32 or int64 (a bool is not an index).
  Type indices = elementTypeOf(getIndices());
  if (!indices.isInteger(32) && !indices.isInteger(64))
    return emitOpError("[gather_c2] indices must be 32- or 64-bit integers, got ") << indices;
  return success();
}

LogicalResult PadOp::verify() {
  StringRef mode = getMode();
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return emitOpError("[pad_c1] mode must be constant, reflect, edge or wrap, got '")
           << mode << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// Folders
//===----------------------------------------------------------------------===//

namespace {
/// Largest constant a folder creates: shape arithmetic is small, and a folder
/// must never materialise a weight-sized tensor.
constexpr int64_t kMaxFoldedElements = 1 << 16;

RankedTensorType staticResultType(Operation *op, unsigned index = 0) {
  auto type = dyn_cast<RankedTensorType>(op->getResult(index).getType());
  if (!type || !type.hasStaticShape() || type.getNumElements() > kMaxFoldedElements)
    return {};
  return type;
}

/// Element `i` of an operand broadcast to `count` elements, when the operand
/// has exactly `count` elements (same row-major order) or one.
bool broadcastable(DenseIntElementsAttr attr, int64_t count) {
  return attr.getNumElements() == count || attr.getNumElements() == 1;
}

template <typename Fn>
Attribute foldIntegerElementwise(Operation *op, ArrayRef<Attribute> operands, Fn fn) {
  auto resultType = staticResultType(op);
  if (!resultType || !isa<IntegerType>(resultType.getElementType()))
    return {};
  SmallVector<DenseIntElementsAttr> inputs;
  for (Attribute a : operands) {
    auto attr = dyn_cast_or_null<DenseIntElementsAttr>(a);
    if (!attr || !broadcastable(attr, resultType.getNumElements()))
      return {};
    // Shape arithmetic is signed; unsigned values above the signed range would
    // be misread, so unsigned tensors are left to the runtime.
    if (attr.getElementType().isUnsignedInteger())
      return {};
    inputs.push_back(attr);
  }
  if (resultType.getElementType().isUnsignedInteger())
    return {};
  unsigned width = resultType.getElementType().getIntOrFloatBitWidth();
  SmallVector<SmallVector<APInt>> values;
  for (DenseIntElementsAttr attr : inputs)
    values.emplace_back(attr.getValues<APInt>().begin(), attr.getValues<APInt>().end());
  SmallVector<APInt> result;
  for (int64_t i = 0; i < resultType.getNumElements(); ++i) {
    SmallVector<int64_t> args;
    for (auto &v : values) {
      const APInt &value = v.size() == 1 ? v[0] : v[i];
      // Booleans are 0 and 1 (an i1 "true" sign-extends to -1).
      args.push_back(value.getBitWidth() == 1 ? static_cast<int64_t>(value.getZExtValue())
                                              : value.getSExtValue());
    }
    std::optional<int64_t> value = fn(args);
    if (!value)
      return {};
    result.push_back(APInt(width, *value, /*isSigned=*/true, /*implicitTrunc=*/true));
  }
  return DenseIntElementsAttr::get(resultType, result);
}
} // namespace

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

OpFoldResult IdentityOp::fold(FoldAdaptor) { return getInput(); }

OpFoldResult ConstantOfShapeOp::fold(FoldAdaptor) {
  auto type = dyn_cast<RankedTensorType>(getType());
  auto value = dyn_cast<DenseElementsAttr>(getValue());
  if (!type || !type.hasStaticShape() || !value || value.getNumElements() != 1)
    return {};
  return DenseElementsAttr::get(type, value.getValues<Attribute>()[0]);
}

OpFoldResult RangeOp::fold(FoldAdaptor adaptor) {
  auto resultType = staticResultType(getOperation());
  auto start = dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getStart());
  auto delta = dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getDelta());
  if (!resultType || !start || !delta || start.getNumElements() != 1 ||
      delta.getNumElements() != 1)
    return {};
  int64_t first = (*start.getValues<APInt>().begin()).getSExtValue();
  int64_t step = (*delta.getValues<APInt>().begin()).getSExtValue();
  unsigned width = resultType.getElementType().getIntOrFloatBitWidth();
  SmallVector<APInt> values;
  for (int64_t i = 0; i < resultType.getNumElements(); ++i)
    values.push_back(APInt(width, first + i * step, /*isSigned=*/true));
  return DenseIntElementsAttr::get(resultType, values);
}

OpFoldResult CastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getType())
    return getInput();
  auto resultType = staticResultType(getOperation());
  // Between float types (a double constant cast to float): rounded to nearest.
  if (auto floats = dyn_cast_or_null<DenseFPElementsAttr>(adaptor.getInput())) {
    auto floatType = resultType ? dyn_cast<FloatType>(resultType.getElementType()) : nullptr;
    if (!floatType)
      return {};
    SmallVector<APFloat> values;
    for (APFloat v : floats.getValues<APFloat>()) {
      bool lost;
      v.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      values.push_back(v);
    }
    return DenseElementsAttr::get(resultType, values);
  }
  auto input = dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getInput());
  if (!input || !resultType)
    return {};
  Type to = resultType.getElementType();
  // Booleans and unsigned values extend with zeros (true is 1, not -1).
  bool isUnsigned = input.getElementType().isUnsignedInteger() ||
                    input.getElementType().isInteger(1);
  if (auto intType = dyn_cast<IntegerType>(to)) {
    if (intType.getWidth() == 1)
      return input.mapValues(to, [](const APInt &v) { return APInt(1, v.isZero() ? 0 : 1); });
    return input.mapValues(to, [&](const APInt &v) {
      return isUnsigned ? v.zextOrTrunc(intType.getWidth()) : v.sextOrTrunc(intType.getWidth());
    });
  }
  if (auto floatType = dyn_cast<FloatType>(to)) {
    SmallVector<APFloat> values;
    for (const APInt &v : input.getValues<APInt>()) {
      APFloat f(floatType.getFloatSemantics());
      f.convertFromAPInt(v, !isUnsigned, APFloat::rmNearestTiesToEven);
      values.push_back(f);
    }
    return DenseElementsAttr::get(resultType, values);
  }
  return {};
}

// Folds refuse what would overflow or trap (division by zero, INT64_MIN / -1)
// rather than guessing what the runtime does.
static std::optional<int64_t> divide(int64_t a, int64_t b) {
  if (b == 0 || (a == std::numeric_limits<int64_t>::min() && b == -1))
    return std::nullopt;
  return a / b;
}
static std::optional<int64_t> add(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
}
static std::optional<int64_t> subtract(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_sub_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
}
static std::optional<int64_t> multiply(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::nullopt : std::optional<int64_t>(r);
}

#define NN_FOLD_INT(OP, EXPR)                                                  \
  OpFoldResult OP::fold(FoldAdaptor adaptor) {                                 \
    return foldIntegerElementwise(                                             \
        getOperation(), adaptor.getOperands(),                                 \
        [](ArrayRef<int64_t> v) -> std::optional<int64_t> { return EXPR; });   \
  }
NN_FOLD_INT(AddOp, add(v[0], v[1]))
NN_FOLD_INT(SubOp, subtract(v[0], v[1]))
NN_FOLD_INT(MulOp, multiply(v[0], v[1]))
NN_FOLD_INT(DivOp, divide(v[0], v[1]))
NN_FOLD_INT(MaxOp, std::max(v[0], v[1]))
NN_FOLD_INT(MinOp, std::min(v[0], v[1]))
NN_FOLD_INT(EqualOp, v[0] == v[1])
NN_FOLD_INT(LessOp, v[0] < v[1])
NN_FOLD_INT(LessOrEqualOp, v[0] <= v[1])
NN_FOLD_INT(GreaterOp, v[0] > v[1])
NN_FOLD_INT(GreaterOrEqualOp, v[0] >= v[1])
NN_FOLD_INT(AndOp, (v[0] != 0) && (v[1] != 0))
NN_FOLD_INT(OrOp, (v[0] != 0) || (v[1] != 0))
NN_FOLD_INT(WhereOp, v[0] != 0 ? v[1] : v[2])
NN_FOLD_INT(NegOp, subtract(0, v[0]))
NN_FOLD_INT(AbsOp, v[0] < 0 ? subtract(0, v[0]) : std::optional<int64_t>(v[0]))
#undef NN_FOLD_INT

OpFoldResult PowOp::fold(FoldAdaptor) { return {}; }

OpFoldResult ModOp::fold(FoldAdaptor adaptor) {
  bool fmod = getFmod() != 0;
  return foldIntegerElementwise(
      getOperation(), adaptor.getOperands(), [fmod](ArrayRef<int64_t> v) -> std::optional<int64_t> {
        if (v[1] == 0 || (v[0] == std::numeric_limits<int64_t>::min() && v[1] == -1))
          return std::nullopt;
        int64_t r = v[0] % v[1];
        // fmod = 1 is C's fmod (the dividend's sign); fmod = 0 takes the divisor's.
        if (!fmod && r != 0 && ((r < 0) != (v[1] < 0)))
          r += v[1];
        return r;
      });
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto input = getRankedType(getInput());
  auto resultType = staticResultType(getOperation());
  if (!input || !input.hasStaticShape() || !resultType)
    return {};
  int64_t rank = input.getRank();
  auto clamp = [rank](int64_t v) {
    if (v < 0)
      v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = clamp(getStart()), end = getEnd() ? clamp(*getEnd()) : rank;
  SmallVector<int64_t> dims(input.getShape().begin() + start,
                            input.getShape().begin() + std::max(start, end));
  return DenseIntElementsAttr::get(resultType, dims);
}

/// Reshape-like folds: the same type is a no-op, a constant is reshaped.
static OpFoldResult foldReshapeLike(Operation *op, Value input, Attribute constant) {
  Type resultType = op->getResult(0).getType();
  auto ranked = dyn_cast<RankedTensorType>(resultType);
  if (input.getType() == resultType && ranked && ranked.hasStaticShape())
    return input;
  auto elements = dyn_cast_or_null<DenseElementsAttr>(constant);
  auto type = staticResultType(op);
  if (!elements || !type)
    return {};
  return elements.reshape(type);
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getOperation(), getInput(), adaptor.getInput());
}
OpFoldResult SqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getOperation(), getInput(), adaptor.getInput());
}
OpFoldResult UnsqueezeOp::fold(FoldAdaptor adaptor) {
  return foldReshapeLike(getOperation(), getInput(), adaptor.getInput());
}

OpFoldResult ExpandOp::fold(FoldAdaptor adaptor) {
  auto ranked = dyn_cast<RankedTensorType>(getType());
  if (getInput().getType() == getType() && ranked && ranked.hasStaticShape())
    return getInput();
  auto elements = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  if (elements && elements.isSplat() && ranked && ranked.hasStaticShape())
    return DenseElementsAttr::get(ranked, elements.getSplatValue<Attribute>());
  return {};
}

OpFoldResult ConcatOp::fold(FoldAdaptor adaptor) {
  if (getInputs().size() == 1 && getInputs().front().getType() == getType())
    return getInputs().front();
  auto resultType = staticResultType(getOperation());
  if (!resultType || resultType.getRank() != 1)
    return {};
  SmallVector<Attribute> values;
  for (Attribute a : adaptor.getInputs()) {
    auto elements = dyn_cast_or_null<DenseElementsAttr>(a);
    if (!elements)
      return {};
    llvm::append_range(values, elements.getValues<Attribute>());
  }
  if (static_cast<int64_t>(values.size()) != resultType.getNumElements())
    return {};
  return DenseElementsAttr::get(resultType, values);
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  auto input = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  auto resultType = staticResultType(getOperation());
  auto starts = getConstantInts(getStarts()), steps = getConstantInts(getSteps());
  if (!input || !resultType || resultType.getRank() != 1 || !starts || !steps ||
      starts->size() != 1)
    return {};
  int64_t dim = input.getNumElements(), step = (*steps)[0];
  int64_t start = (*starts)[0] < 0 ? (*starts)[0] + dim : (*starts)[0];
  start = step > 0 ? std::min(std::max<int64_t>(start, 0), dim)
                   : std::min(std::max<int64_t>(start, 0), dim - 1);
  auto all = llvm::to_vector(input.getValues<Attribute>());
  SmallVector<Attribute> values;
  for (int64_t i = 0; i < resultType.getNumElements(); ++i)
    values.push_back(all[start + i * step]);
  return DenseElementsAttr::get(resultType, values);
}

OpFoldResult GatherOp::fold(FoldAdaptor adaptor) {
  auto data = dyn_cast_or_null<DenseElementsAttr>(adaptor.getInput());
  auto indices = dyn_cast_or_null<DenseIntElementsAttr>(adaptor.getIndices());
  auto resultType = staticResultType(getOperation());
  if (!data || !indices || !resultType || data.getType().getRank() != 1)
    return {};
  auto all = llvm::to_vector(data.getValues<Attribute>());
  int64_t dim = all.size();
  SmallVector<Attribute> values;
  for (const APInt &index : indices.getValues<APInt>()) {
    int64_t i = index.getSExtValue();
    if (i < 0)
      i += dim;
    if (i < 0 || i >= dim)
      return {};
    values.push_back(all[i]);
  }
  return DenseElementsAttr::get(resultType, values);
}

//===----------------------------------------------------------------------===//
// Dropout: inactive dropout is the identity.
//===----------------------------------------------------------------------===//

namespace {
struct RemoveInactiveDropout : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp op, PatternRewriter &rewriter) const override {
    Attribute ratio, training;
    bool inactive = false;
    if (matchPattern(op.getTrainingMode(), m_Constant(&training))) {
      auto elements = dyn_cast<DenseIntElementsAttr>(training);
      inactive = elements && elements.getNumElements() == 1 &&
                 (*elements.getValues<APInt>().begin()).isZero();
    }
    if (!inactive && matchPattern(op.getRatio(), m_Constant(&ratio))) {
      auto elements = dyn_cast<DenseFPElementsAttr>(ratio);
      inactive = elements && elements.getNumElements() == 1 &&
                 (*elements.getValues<APFloat>().begin()).isZero();
    }
    if (!inactive)
      return rewriter.notifyMatchFailure(op, "dropout may be active");
    SmallVector<Value> replacements{op.getInput()};
    if (Value mask = op.getMask()) {
      auto maskType = dyn_cast<RankedTensorType>(mask.getType());
      if (!mask.use_empty() && (!maskType || !maskType.hasStaticShape()))
        return rewriter.notifyMatchFailure(op, "the used mask has no static shape");
      if (mask.use_empty()) {
        replacements.push_back(nullptr);
      } else {
        auto ones = DenseElementsAttr::get(maskType, rewriter.getBoolAttr(true));
        replacements.push_back(ConstantOp::create(rewriter, op.getLoc(), maskType, ones));
      }
    }
    if (replacements.size() == 2 && !replacements[1]) {
      rewriter.replaceAllUsesWith(op.getOutput(), op.getInput());
      rewriter.eraseOp(op);
      return success();
    }
    rewriter.replaceOp(op, replacements);
    return success();
  }
};
} // namespace

void DropoutOp::getCanonicalizationPatterns(RewritePatternSet &patterns,
                                            MLIRContext *context) {
  patterns.add<RemoveInactiveDropout>(context);
}
