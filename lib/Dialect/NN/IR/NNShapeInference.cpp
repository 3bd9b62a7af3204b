//===- NNShapeInference.cpp - result types of nn ops ----------------------===//
//
// ShapeInferenceOpInterface for every nn op: ONNX's shape rules, one function
// per op. A result whose shape depends on an unknown (unranked operand, shape
// operand that is not constant) comes back unranked or with dynamic dims; an
// inconsistency between operands is an error on the op.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;
using llvm::SmallVectorImpl;

namespace {
constexpr int64_t kDynamic = ShapedType::kDynamic;

Type elementTypeOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }
Type unrankedOf(Type element) { return UnrankedTensorType::get(element); }
Type rankedOf(ArrayRef<int64_t> shape, Type element) {
  return RankedTensorType::get(shape, element);
}

/// Integer result element type of comparisons and logical ops.
Type boolType(Operation *op) { return IntegerType::get(op->getContext(), 1); }


LogicalResult sameAsOperand(Operation *op, unsigned index, SmallVectorImpl<Type> &types) {
  types.push_back(op->getOperand(index).getType());
  return success();
}

LogicalResult inferBroadcast(Operation *op, ValueRange operands, Type element,
                             SmallVectorImpl<Type> &types) {
  SmallVector<int64_t> shape;
  for (Value v : operands) {
    auto type = getRankedType(v);
    if (!type) {
      types.push_back(unrankedOf(element));
      return success();
    }
    auto merged = broadcastShapes(shape, type.getShape());
    if (!merged)
      return op->emitOpError("[broadcast_c1] operand shapes are not broadcast-compatible");
    shape = *merged;
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

/// Window ops: [N, C, spatial...] -> [N, outChannels, outSpatial...].
LogicalResult inferWindow(Operation *op, RankedTensorType input, int64_t outChannels,
                          ArrayRef<int64_t> kernel,
                          std::optional<ArrayRef<int64_t>> strides,
                          std::optional<ArrayRef<int64_t>> dilations,
                          std::optional<ArrayRef<int64_t>> pads, StringRef autoPad,
                          bool ceilMode, SmallVectorImpl<int64_t> &shape) {
  ArrayRef<int64_t> spatial = input.getShape().drop_front(2);
  std::string error;
  auto geometry = computeWindowGeometry(spatial, kernel, strides, dilations, pads,
                                        autoPad, ceilMode, error);
  if (!geometry)
    return op->emitOpError("[window_c1] ") << error;
  shape.assign({input.getDimSize(0), outChannels});
  for (unsigned i = 0; i < spatial.size(); ++i) {
    if (ShapedType::isDynamic(spatial[i])) {
      shape.push_back(kDynamic);
      continue;
    }
    int64_t size = geometry->outputSize(i, spatial[i]);
    // A window larger than the padded input leaves nothing to compute.
    if (size < 1)
      return op->emitOpError("[window_c1] the window does not fit spatial dim ")
             << i << " of size " << spatial[i] << " (with its padding)";
    shape.push_back(size);
  }
  return success();
}
} // namespace

LogicalResult pipe::nn::refineResultTypes(Operation *op) {
  auto shaped = dyn_cast<ShapeInferenceOpInterface>(op);
  if (!shaped)
    return success();
  SmallVector<Type> types;
  // Every rule may assume bounded operand shapes; it must keep its results so.
  if (failed(verifySizeLimits(op, op->getOperandTypes(), "operand")) ||
      failed(shaped.inferResultTypes(types)) ||
      failed(verifySizeLimits(op, types, "result")))
    return failure();
  if (types.size() != op->getNumResults())
    return op->emitOpError("shape inference produced ")
           << types.size() << " result types for " << op->getNumResults() << " results";
  for (auto [result, type] : llvm::zip(op->getResults(), types))
    result.setType(type);
  return success();
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getValue().getType());
  return success();
}

LogicalResult ParamOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getType());
  return success();
}

LogicalResult ConstantOfShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = getValue().getElementType();
  if (auto dims = getConstantInts(getShape())) {
    for (int64_t d : *dims)
      if (d < 0)
        return emitOpError("[constant_of_shape_c1] shape has a negative dim ") << d;
    types.push_back(rankedOf(*dims, element));
    return success();
  }
  auto shapeType = getRankedType(getShape());
  if (shapeType && shapeType.hasStaticShape() && shapeType.getRank() == 1)
    types.push_back(rankedOf(SmallVector<int64_t>(shapeType.getDimSize(0), kDynamic), element));
  else
    types.push_back(unrankedOf(element));
  return success();
}

LogicalResult RangeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getStart());
  auto start = getConstantScalar(getStart()), limit = getConstantScalar(getLimit()),
       delta = getConstantScalar(getDelta());
  if (start && limit && delta) {
    if (*delta == 0)
      return emitOpError("[range_c1] delta is zero");
    double count = std::ceil((*limit - *start) / *delta);
    if (!(count <= static_cast<double>(kMaxDimSize)))
      return emitOpError("[range_c2] the range has more than ")
             << kMaxDimSize << " elements (or is not finite)";
    types.push_back(rankedOf({std::max<int64_t>(0, static_cast<int64_t>(count))}, element));
  } else {
    types.push_back(rankedOf({kDynamic}, element));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

#define NN_SAME_TYPE_AS_INPUT(OP)                                              \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    return sameAsOperand(getOperation(), 0, types);                            \
  }
NN_SAME_TYPE_AS_INPUT(ReluOp)
NN_SAME_TYPE_AS_INPUT(ErfOp)
NN_SAME_TYPE_AS_INPUT(TanhOp)
NN_SAME_TYPE_AS_INPUT(SigmoidOp)
NN_SAME_TYPE_AS_INPUT(SqrtOp)
NN_SAME_TYPE_AS_INPUT(ExpOp)
NN_SAME_TYPE_AS_INPUT(LogOp)
NN_SAME_TYPE_AS_INPUT(NegOp)
NN_SAME_TYPE_AS_INPUT(AbsOp)
NN_SAME_TYPE_AS_INPUT(ReciprocalOp)
NN_SAME_TYPE_AS_INPUT(NotOp)
NN_SAME_TYPE_AS_INPUT(FloorOp)
NN_SAME_TYPE_AS_INPUT(CeilOp)
NN_SAME_TYPE_AS_INPUT(SoftplusOp)
NN_SAME_TYPE_AS_INPUT(SinOp)
NN_SAME_TYPE_AS_INPUT(CosOp)
NN_SAME_TYPE_AS_INPUT(TanOp)
NN_SAME_TYPE_AS_INPUT(AsinOp)
NN_SAME_TYPE_AS_INPUT(AcosOp)
NN_SAME_TYPE_AS_INPUT(AtanOp)
NN_SAME_TYPE_AS_INPUT(SinhOp)
NN_SAME_TYPE_AS_INPUT(CoshOp)
NN_SAME_TYPE_AS_INPUT(AsinhOp)
NN_SAME_TYPE_AS_INPUT(AcoshOp)
NN_SAME_TYPE_AS_INPUT(AtanhOp)
NN_SAME_TYPE_AS_INPUT(RoundOp)
NN_SAME_TYPE_AS_INPUT(SignOp)
NN_SAME_TYPE_AS_INPUT(IdentityOp)
NN_SAME_TYPE_AS_INPUT(GeluOp)
NN_SAME_TYPE_AS_INPUT(LeakyReluOp)
NN_SAME_TYPE_AS_INPUT(HardSigmoidOp)
NN_SAME_TYPE_AS_INPUT(HardSwishOp)
NN_SAME_TYPE_AS_INPUT(ClipOp)
NN_SAME_TYPE_AS_INPUT(SoftmaxOp)
NN_SAME_TYPE_AS_INPUT(LogSoftmaxOp)
NN_SAME_TYPE_AS_INPUT(TriluOp)
#undef NN_SAME_TYPE_AS_INPUT

LogicalResult CastOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (auto type = getRankedType(getInput()))
    types.push_back(type.clone(getTo()));
  else
    types.push_back(unrankedOf(getTo()));
  return success();
}

#define NN_BROADCAST(OP, ELEMENT)                                              \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    return inferBroadcast(getOperation(), getOperation()->getOperands(),       \
                          ELEMENT, types);                                     \
  }
NN_BROADCAST(AddOp, elementTypeOf(getLhs()))
NN_BROADCAST(SubOp, elementTypeOf(getLhs()))
NN_BROADCAST(MulOp, elementTypeOf(getLhs()))
NN_BROADCAST(DivOp, elementTypeOf(getLhs()))
NN_BROADCAST(PowOp, elementTypeOf(getLhs()))
NN_BROADCAST(ModOp, elementTypeOf(getLhs()))
NN_BROADCAST(MaxOp, elementTypeOf(getLhs()))
NN_BROADCAST(MinOp, elementTypeOf(getLhs()))
NN_BROADCAST(EqualOp, boolType(getOperation()))
NN_BROADCAST(LessOp, boolType(getOperation()))
NN_BROADCAST(LessOrEqualOp, boolType(getOperation()))
NN_BROADCAST(GreaterOp, boolType(getOperation()))
NN_BROADCAST(GreaterOrEqualOp, boolType(getOperation()))
NN_BROADCAST(AndOp, boolType(getOperation()))
NN_BROADCAST(OrOp, boolType(getOperation()))
NN_BROADCAST(WhereOp, elementTypeOf(getX()))
#undef NN_BROADCAST

//===----------------------------------------------------------------------===//
// Linear algebra and windows
//===----------------------------------------------------------------------===//

LogicalResult MatMulOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getLhs());
  auto lhs = getRankedType(getLhs()), rhs = getRankedType(getRhs());
  if (!lhs || !rhs) {
    types.push_back(unrankedOf(element));
    return success();
  }
  SmallVector<int64_t> a(lhs.getShape()), b(rhs.getShape());
  if (a.empty() || b.empty())
    return emitOpError("[matmul_c1] operands must have rank >= 1");
  bool vectorLhs = a.size() == 1, vectorRhs = b.size() == 1;
  if (vectorLhs)
    a.insert(a.begin(), 1);
  if (vectorRhs)
    b.push_back(1);
  int64_t k1 = a.back(), k2 = b[b.size() - 2];
  if (!ShapedType::isDynamic(k1) && !ShapedType::isDynamic(k2) && k1 != k2)
    return emitOpError("[matmul_c2] contraction dims differ: ") << k1 << " vs " << k2;
  auto batch = broadcastShapes(ArrayRef<int64_t>(a).drop_back(2), ArrayRef<int64_t>(b).drop_back(2));
  if (!batch)
    return emitOpError("[matmul_c3] batch dims are not broadcast-compatible");
  SmallVector<int64_t> shape(*batch);
  if (!vectorLhs)
    shape.push_back(a[a.size() - 2]);
  if (!vectorRhs)
    shape.push_back(b.back());
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult GemmOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getA());
  auto a = getRankedType(getA()), b = getRankedType(getB());
  if (!a || !b) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (a.getRank() != 2 || b.getRank() != 2)
    return emitOpError("[gemm_c1] A and B must be 2-D");
  int64_t m = a.getDimSize(getTransA() ? 1 : 0), ka = a.getDimSize(getTransA() ? 0 : 1);
  int64_t kb = b.getDimSize(getTransB() ? 1 : 0), n = b.getDimSize(getTransB() ? 0 : 1);
  if (!ShapedType::isDynamic(ka) && !ShapedType::isDynamic(kb) && ka != kb)
    return emitOpError("[gemm_c2] contraction dims differ: ") << ka << " vs " << kb;
  types.push_back(rankedOf({m, n}, element));
  return success();
}

LogicalResult ConvOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto input = getRankedType(getInput()), weight = getRankedType(getWeight());
  if (!input || !weight) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (input.getRank() < 3 || weight.getRank() != input.getRank())
    return emitOpError("[conv_c1] input and weight must have the same rank >= 3");
  SmallVector<int64_t> kernel(weight.getShape().drop_front(2));
  if (auto given = getKernelShape())
    kernel.assign(given->begin(), given->end());
  SmallVector<int64_t> shape;
  if (failed(inferWindow(getOperation(), input, weight.getDimSize(0), kernel, getStrides(),
                         getDilations(), getPads(), getAutoPad(), false, shape)))
    return failure();
  types.push_back(rankedOf(shape, element));
  return success();
}

/// Max and average pooling: [N, C, spatial...] -> [N, C, pooled...], plus
/// i64 indices of the same shape when `withIndices`.
template <typename PoolOp>
static LogicalResult inferPool(PoolOp op, StringRef id, bool withIndices,
                               SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(op.getInput());
  Type indexElement = IntegerType::get(op.getContext(), 64);
  auto input = getRankedType(op.getInput());
  SmallVector<int64_t> shape;
  if (input) {
    if (input.getRank() < 3)
      return op.emitOpError("[") << id << "] input must have rank >= 3";
    if (failed(inferWindow(op.getOperation(), input, input.getDimSize(1), op.getKernelShape(),
                           op.getStrides(), op.getDilations(), op.getPads(), op.getAutoPad(),
                           op.getCeilMode() != 0, shape)))
      return failure();
  }
  types.push_back(input ? rankedOf(shape, element) : unrankedOf(element));
  if (withIndices)
    types.push_back(input ? rankedOf(shape, indexElement) : unrankedOf(indexElement));
  return success();
}

LogicalResult MaxPoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferPool(*this, "max_pool_c1", static_cast<bool>(getIndices()), types);
}

LogicalResult AveragePoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferPool(*this, "average_pool_c1", false, types);
}

static LogicalResult inferGlobalPool(Operation *op, SmallVectorImpl<Type> &types) {
  Value input = op->getOperand(0);
  auto type = getRankedType(input);
  if (!type) {
    types.push_back(input.getType());
    return success();
  }
  if (type.getRank() < 3)
    return op->emitOpError("[global_pool_c1] input must have rank >= 3");
  SmallVector<int64_t> shape(type.getShape());
  std::fill(shape.begin() + 2, shape.end(), 1);
  types.push_back(type.clone(shape));
  return success();
}
LogicalResult GlobalAveragePoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferGlobalPool(getOperation(), types);
}
LogicalResult GlobalMaxPoolOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferGlobalPool(getOperation(), types);
}

//===----------------------------------------------------------------------===//
// Normalisation, dropout
//===----------------------------------------------------------------------===//

LogicalResult BatchNormOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  for (unsigned i = 0, e = getRunningStats().size(); i < e; ++i)
    types.push_back(i == 0 ? getMean().getType() : getVar().getType());
  return success();
}

LogicalResult LayerNormOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  if (getStatistics().empty())
    return success();
  Type statElement = getStashType() == 1 ? Type(Float32Type::get(getContext()))
                                         : elementTypeOf(getInput());
  auto input = getRankedType(getInput());
  std::optional<int64_t> axis;
  if (input)
    axis = normalizeAxis(getAxis(), input.getRank());
  for (unsigned i = 0, e = getStatistics().size(); i < e; ++i) {
    if (!input || !axis) {
      types.push_back(unrankedOf(statElement));
      continue;
    }
    SmallVector<int64_t> shape(input.getShape());
    std::fill(shape.begin() + *axis, shape.end(), 1);
    types.push_back(rankedOf(shape, statElement));
  }
  return success();
}

LogicalResult DropoutOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  types.push_back(getInput().getType());
  if (getMask()) {
    Type i1 = boolType(getOperation());
    auto input = getRankedType(getInput());
    types.push_back(input ? Type(input.clone(i1)) : unrankedOf(i1));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

static LogicalResult inferReduce(Operation *op, Value input, Value axesOperand,
                                 bool keepdims, bool noopWithEmptyAxes,
                                 SmallVectorImpl<Type> &types) {
  auto type = getRankedType(input);
  Type element = elementTypeOf(input);
  if (!type) {
    types.push_back(unrankedOf(element));
    return success();
  }
  SmallVector<int64_t> axes;
  if (axesOperand) {
    auto given = getConstantInts(axesOperand);
    if (!given) {
      types.push_back(unrankedOf(element));
      return success();
    }
    axes = *given;
  }
  if (axes.empty()) {
    if (noopWithEmptyAxes) {
      types.push_back(type);
      return success();
    }
    for (int64_t i = 0; i < type.getRank(); ++i)
      axes.push_back(i);
  }
  SmallVector<bool> reduced(type.getRank(), false);
  for (int64_t axis : axes) {
    auto normalized = normalizeAxis(axis, type.getRank());
    if (!normalized)
      return op->emitOpError("[reduce_c1] axis ") << axis << " is out of range for rank "
                                  << type.getRank();
    reduced[*normalized] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    if (!reduced[i])
      shape.push_back(type.getDimSize(i));
    else if (keepdims)
      shape.push_back(1);
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

#define NN_REDUCE(OP)                                                          \
  LogicalResult OP::inferResultTypes(SmallVectorImpl<Type> &types) {           \
    return inferReduce(getOperation(), getInput(), getAxes(), getKeepdims(),   \
                       getNoopWithEmptyAxes(), types);                         \
  }
NN_REDUCE(ReduceMeanOp)
NN_REDUCE(ReduceSumOp)
NN_REDUCE(ReduceMaxOp)
NN_REDUCE(ReduceMinOp)
NN_REDUCE(ReduceProdOp)
#undef NN_REDUCE

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

/// The [start, end) dims a Shape op selects, clamped as ONNX Shape-15 says.
static std::pair<int64_t, int64_t> shapeRange(ShapeOp op, int64_t rank) {
  auto clamp = [rank](int64_t v) {
    if (v < 0)
      v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = clamp(op.getStart());
  int64_t end = op.getEnd() ? clamp(*op.getEnd()) : rank;
  return {start, std::max(start, end)};
}

LogicalResult ShapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type i64 = IntegerType::get(getContext(), 64);
  auto type = getRankedType(getInput());
  if (!type) {
    types.push_back(rankedOf({kDynamic}, i64));
    return success();
  }
  auto [start, end] = shapeRange(*this, type.getRank());
  types.push_back(rankedOf({end - start}, i64));
  return success();
}

LogicalResult ReshapeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto target = getConstantInts(getShape());
  auto input = getRankedType(getInput());
  if (!target) {
    auto shapeType = getRankedType(getShape());
    if (shapeType && shapeType.hasStaticShape() && shapeType.getRank() == 1)
      types.push_back(rankedOf(SmallVector<int64_t>(shapeType.getDimSize(0), kDynamic), element));
    else
      types.push_back(unrankedOf(element));
    return success();
  }
  SmallVector<int64_t> shape(*target);
  int64_t inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 0 && !getAllowzero()) {
      if (!input) {
        types.push_back(unrankedOf(element));
        return success();
      }
      if (i >= static_cast<size_t>(input.getRank()))
        return emitOpError("[reshape_c3] shape copies dim ") << i << " of a rank-" << input.getRank()
                                                << " input";
      shape[i] = input.getDimSize(i);
    } else if (shape[i] == -1) {
      if (inferred >= 0)
        return emitOpError("[reshape_c2] shape has more than one -1");
      inferred = i;
    } else if (shape[i] < -1) {
      return emitOpError("[reshape_c3] shape has an invalid dim ") << shape[i];
    }
  }
  if (inferred >= 0) {
    if (!input || !input.hasStaticShape()) {
      shape[inferred] = kDynamic;
    } else {
      std::optional<int64_t> known = 1;
      for (size_t i = 0; known && i < shape.size(); ++i)
        if (static_cast<int64_t>(i) != inferred && !ShapedType::isDynamic(shape[i]))
          known = boundedMul(*known, shape[i]);
      if (!known)
        return emitOpError("[reshape_c1] cannot reshape ")
               << input.getNumElements() << " elements into a shape of more than "
               << kMaxElements;
      if (*known == 0 || input.getNumElements() % *known != 0)
        return emitOpError("[reshape_c1] cannot reshape ")
               << input.getNumElements() << " elements into a shape with -1";
      shape[inferred] = input.getNumElements() / *known;
    }
  }
  if (input && input.hasStaticShape() && llvm::none_of(shape, ShapedType::isDynamic)) {
    std::optional<int64_t> count = 1;
    for (int64_t d : shape)
      if (count)
        count = boundedMul(*count, d);
    if (!count || *count != input.getNumElements())
      return emitOpError("[reshape_c1] cannot reshape ")
             << input.getNumElements() << " elements into "
             << (count ? std::to_string(*count) : "more than " + std::to_string(kMaxElements));
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult FlattenOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = getRankedType(getInput());
  if (!type) {
    types.push_back(getInput().getType());
    return success();
  }
  int64_t axis = getAxis() < 0 ? getAxis() + type.getRank() : getAxis();
  if (axis < 0 || axis > type.getRank())
    return emitOpError("[flatten_c1] axis ") << getAxis() << " is out of range for rank "
                                          << type.getRank();
  auto product = [&](int64_t begin, int64_t end) {
    int64_t p = 1;
    for (int64_t i = begin; i < end; ++i) {
      if (type.isDynamicDim(i))
        return kDynamic;
      p *= type.getDimSize(i);
    }
    return p;
  };
  types.push_back(type.clone({product(0, axis), product(axis, type.getRank())}));
  return success();
}

LogicalResult SqueezeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = getRankedType(getInput());
  Type element = elementTypeOf(getInput());
  std::optional<SmallVector<int64_t>> axes;
  if (getAxes()) {
    axes = getConstantInts(getAxes());
    if (!axes) {
      types.push_back(unrankedOf(element));
      return success();
    }
  }
  if (!type) {
    types.push_back(unrankedOf(element));
    return success();
  }
  SmallVector<bool> drop(type.getRank(), false);
  if (axes) {
    for (int64_t axis : *axes) {
      auto normalized = normalizeAxis(axis, type.getRank());
      if (!normalized)
        return emitOpError("[squeeze_c1] axis ") << axis << " is out of range for rank "
                                                 << type.getRank();
      if (type.getDimSize(*normalized) != 1 && !type.isDynamicDim(*normalized))
        return emitOpError("[squeeze_c2] cannot squeeze dim ") << *normalized << " of size "
                                                  << type.getDimSize(*normalized);
      drop[*normalized] = true;
    }
  } else {
    for (int64_t i = 0; i < type.getRank(); ++i)
      drop[i] = type.getDimSize(i) == 1;
  }
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < type.getRank(); ++i)
    if (!drop[i])
      shape.push_back(type.getDimSize(i));
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult UnsqueezeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = getRankedType(getInput());
  Type element = elementTypeOf(getInput());
  auto axes = getConstantInts(getAxes());
  if (!type || !axes) {
    types.push_back(unrankedOf(element));
    return success();
  }
  int64_t rank = type.getRank() + static_cast<int64_t>(axes->size());
  SmallVector<bool> inserted(rank, false);
  for (int64_t axis : *axes) {
    auto normalized = normalizeAxis(axis, rank);
    if (!normalized || inserted[*normalized])
      return emitOpError("[unsqueeze_c1] axes are out of range or repeated for output rank ") << rank;
    inserted[*normalized] = true;
  }
  SmallVector<int64_t> shape;
  auto dims = type.getShape().begin();
  for (int64_t i = 0; i < rank; ++i)
    shape.push_back(inserted[i] ? 1 : *dims++);
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult TransposeOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  auto type = getRankedType(getInput());
  if (!type) {
    types.push_back(getInput().getType());
    return success();
  }
  SmallVector<int64_t> shape;
  if (auto perm = getPerm()) {
    if (static_cast<int64_t>(perm->size()) != type.getRank())
      return emitOpError("[transpose_c1] perm must be a permutation of [0, rank)");
    for (int64_t p : *perm) {
      if (p < 0 || p >= type.getRank())
        return emitOpError("[transpose_c1] perm must be a permutation of [0, rank)");
      shape.push_back(type.getDimSize(p));
    }
  } else {
    shape.assign(type.getShape().rbegin(), type.getShape().rend());
  }
  types.push_back(type.clone(shape));
  return success();
}

LogicalResult ConcatOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  if (getInputs().empty())
    return emitOpError("[concat_c1] needs at least one input");
  Type element = elementTypeOf(getInputs().front());
  auto first = getRankedType(getInputs().front());
  if (!first) {
    types.push_back(unrankedOf(element));
    return success();
  }
  auto axis = normalizeAxis(getAxis(), first.getRank());
  if (!axis)
    return emitOpError("[concat_c2] axis ") << getAxis() << " is out of range";
  SmallVector<int64_t> shape(first.getShape());
  shape[*axis] = 0;
  for (Value input : getInputs()) {
    auto type = getRankedType(input);
    if (!type) {
      types.push_back(unrankedOf(element));
      return success();
    }
    if (type.getRank() != first.getRank())
      return emitOpError("[concat_c3] inputs must have the same rank");
    for (int64_t i = 0; i < type.getRank(); ++i) {
      if (i == *axis)
        continue;
      if (type.getDimSize(i) != first.getDimSize(i) && !type.isDynamicDim(i) &&
          !first.isDynamicDim(i))
        return emitOpError("[concat_c3] inputs differ in dim ") << i;
    }
    if (type.isDynamicDim(*axis) || ShapedType::isDynamic(shape[*axis]))
      shape[*axis] = kDynamic;
    else
      shape[*axis] += type.getDimSize(*axis);
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult SplitOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto type = getRankedType(getInput());
  unsigned count = getNumResults();
  if (count == 0)
    return emitOpError("[split_c1] needs at least one result");
  std::optional<SmallVector<int64_t>> sizes;
  if (getSplit()) {
    sizes = getConstantInts(getSplit());
    if (!sizes) {
      types.append(count, type ? Type(unrankedOf(element)) : unrankedOf(element));
      return success();
    }
  }
  if (!type) {
    types.append(count, unrankedOf(element));
    return success();
  }
  auto axis = normalizeAxis(getAxis(), type.getRank());
  if (!axis)
    return emitOpError("[split_c3] axis ") << getAxis() << " is out of range";
  int64_t dim = type.getDimSize(*axis);
  if (!sizes) {
    if (ShapedType::isDynamic(dim)) {
      sizes = SmallVector<int64_t>(count, kDynamic);
    } else {
      // Equal parts; with ONNX 18's num_outputs the last part may be smaller.
      int64_t chunk = (dim + count - 1) / count;
      sizes = SmallVector<int64_t>();
      for (unsigned i = 0; i < count; ++i)
        sizes->push_back(std::max<int64_t>(0, std::min(chunk, dim - chunk * i)));
    }
  }
  if (sizes->size() != count)
    return emitOpError("[split_c2] has ") << sizes->size() << " sizes for " << count
                                          << " results";
  for (int64_t s : *sizes)
    if (s < 0 && !ShapedType::isDynamic(s))
      return emitOpError("[split_c2] sizes must be non-negative, got ") << s;
  if (!ShapedType::isDynamic(dim) && llvm::none_of(*sizes, ShapedType::isDynamic)) {
    std::optional<int64_t> total = 0;
    for (int64_t s : *sizes)
      if (total)
        total = boundedAdd(*total, s);
    if (!total || *total != dim)
      return emitOpError("[split_c2] sizes sum to ")
             << (total ? std::to_string(*total) : "more than " + std::to_string(kMaxElements))
             << ", dim is " << dim;
  }
  for (int64_t s : *sizes) {
    SmallVector<int64_t> shape(type.getShape());
    shape[*axis] = s;
    types.push_back(rankedOf(shape, element));
  }
  return success();
}

LogicalResult SliceOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto type = getRankedType(getInput());
  auto starts = getConstantInts(getStarts()), ends = getConstantInts(getEnds()),
       axes = getConstantInts(getAxes()), steps = getConstantInts(getSteps());
  if (!type) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (!starts || !ends || !axes || !steps) {
    types.push_back(rankedOf(SmallVector<int64_t>(type.getRank(), kDynamic), element));
    return success();
  }
  if (starts->size() != ends->size() || starts->size() != axes->size() ||
      starts->size() != steps->size())
    return emitOpError("[slice_c1] starts, ends, axes and steps differ in length");
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < axes->size(); ++i) {
    auto axis = normalizeAxis((*axes)[i], type.getRank());
    if (!axis)
      return emitOpError("[slice_c2] axis ") << (*axes)[i] << " is out of range";
    if ((*steps)[i] == 0)
      return emitOpError("[slice_c3] step is zero");
    if (!type.isDynamicDim(*axis))
      shape[*axis] =
          clampSlice(type.getDimSize(*axis), (*starts)[i], (*ends)[i], (*steps)[i]).length;
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult GatherOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto data = getRankedType(getInput()), indices = getRankedType(getIndices());
  if (!data || !indices) {
    types.push_back(unrankedOf(element));
    return success();
  }
  auto axis = normalizeAxis(getAxis(), data.getRank());
  if (!axis)
    return emitOpError("[gather_c1] axis ") << getAxis() << " is out of range";
  SmallVector<int64_t> shape(data.getShape().take_front(*axis));
  shape.append(indices.getShape().begin(), indices.getShape().end());
  shape.append(data.getShape().begin() + *axis + 1, data.getShape().end());
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult ExpandOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto type = getRankedType(getInput());
  auto target = getConstantInts(getShape());
  if (!type || !target) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return emitOpError("[expand_c2] the target shape has a negative dim");
  auto shape = broadcastShapes(type.getShape(), *target);
  if (!shape)
    return emitOpError("[expand_c1] input is not broadcast-compatible with the target shape");
  types.push_back(rankedOf(*shape, element));
  return success();
}

LogicalResult TileOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto type = getRankedType(getInput());
  auto repeats = getConstantInts(getRepeats());
  if (!type || !repeats) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (static_cast<int64_t>(repeats->size()) != type.getRank())
    return emitOpError("[tile_c1] repeats has ") << repeats->size() << " entries for rank "
                                       << type.getRank();
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < shape.size(); ++i) {
    if ((*repeats)[i] < 0)
      return emitOpError("[tile_c2] repeats has a negative entry ") << (*repeats)[i];
    if (ShapedType::isDynamic(shape[i]))
      continue;
    auto tiled = boundedMul(shape[i], (*repeats)[i]);
    if (!tiled)
      return emitOpError("[tile_c2] repeats make dim ") << i << " larger than " << kMaxElements;
    shape[i] = *tiled;
  }
  types.push_back(rankedOf(shape, element));
  return success();
}

LogicalResult PadOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  Type element = elementTypeOf(getInput());
  auto type = getRankedType(getInput());
  auto pads = getConstantInts(getPads()), axes = getConstantInts(getAxes());
  if (!type) {
    types.push_back(unrankedOf(element));
    return success();
  }
  if (!pads || !axes) {
    types.push_back(rankedOf(SmallVector<int64_t>(type.getRank(), kDynamic), element));
    return success();
  }
  if (pads->size() != 2 * axes->size())
    return emitOpError("[pad_c2] pads has ") << pads->size() << " entries for " << axes->size()
                                    << " axes";
  SmallVector<int64_t> shape(type.getShape());
  for (size_t i = 0; i < axes->size(); ++i) {
    auto axis = normalizeAxis((*axes)[i], type.getRank());
    if (!axis)
      return emitOpError("[pad_c3] axis ") << (*axes)[i] << " is out of range";
    if (!ShapedType::isDynamic(shape[*axis])) {
      auto padded = boundedAdd(shape[*axis], (*pads)[i]);
      if (padded)
        padded = boundedAdd(*padded, (*pads)[i + axes->size()]);
      if (!padded)
        return emitOpError("[pad_c4] pads make dim ") << *axis << " larger than "
                                                       << kMaxElements;
      shape[*axis] = *padded;
    }
    if (!ShapedType::isDynamic(shape[*axis]) && shape[*axis] < 0)
      return emitOpError("[pad_c4] pads make dim ") << *axis << " negative";
  }
  types.push_back(rankedOf(shape, element));
  return success();
}
