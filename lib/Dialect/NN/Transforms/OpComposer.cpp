//===- OpComposer.cpp - building a formula of nn ops ----------------------===//
#include "pipe/Dialect/NN/Transforms/OpComposer.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

using namespace mlir;
using llvm::SmallVector;

namespace pipe::nn {

Value OpComposer::op(llvm::StringRef name, ValueRange operands,
                     llvm::ArrayRef<NamedAttribute> attrs) {
  if (failed_ || llvm::any_of(operands, [](Value v) { return !v; })) {
    failed_ = true;
    return nullptr;
  }
  OperationState state(loc, name);
  state.addOperands(operands);
  // Every attribute of an nn op is inherent, stored as a property.
  if (!attrs.empty())
    state.propertiesAttr = builder.getDictionaryAttr(attrs);
  state.addTypes(UnrankedTensorType::get(builder.getF32Type()));
  auto results = inferAndFold(builder.create(state), builder);
  if (mlir::failed(results)) {
    failed_ = true;
    return nullptr;
  }
  return (*results)[0];
}

Value OpComposer::scalar(double value, Value like) {
  if (!like) {
    failed_ = true;
    return nullptr;
  }
  return constantScalar(value, getElementTypeOrSelf(like.getType()));
}

Value OpComposer::constantScalar(double value, Type elementType) {
  return constantOf({}, {value}, elementType);
}

Value OpComposer::constantI64(llvm::ArrayRef<int64_t> values, bool scalar) {
  SmallVector<int64_t> shape;
  if (!scalar)
    shape.push_back(values.size());
  return constant(shape, values);
}

Value OpComposer::constant(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get(shape, builder.getI64Type());
  return ConstantOp::create(builder, loc, type, DenseIntElementsAttr::get(type, values));
}

Value OpComposer::constantOf(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> values,
                             Type element) {
  auto type = RankedTensorType::get(shape, element);
  DenseElementsAttr attr;
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> items;
    for (double value : values) {
      APFloat f(value);
      bool lost;
      f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
      items.push_back(f);
    }
    attr = DenseElementsAttr::get(type, items);
  } else {
    const unsigned width = element.getIntOrFloatBitWidth();
    SmallVector<APInt> items;
    for (double value : values)
      items.push_back(width == 1 ? APInt(1, value != 0)
                                 : APInt(width, static_cast<int64_t>(value), /*isSigned=*/true));
    attr = DenseElementsAttr::get(type, items);
  }
  return ConstantOp::create(builder, loc, type, llvm::cast<ElementsAttr>(attr));
}

Value OpComposer::iota(int64_t length, int64_t rank, int64_t at) {
  SmallVector<int64_t> shape(rank, 1), values(length);
  shape[at] = length;
  for (int64_t k = 0; k < length; ++k)
    values[k] = k;
  return constant(shape, values);
}

Value OpComposer::reshape(Value x, llvm::ArrayRef<int64_t> shape) {
  Value target = constantI64(shape);
  return op("nn.reshape", {x, target});
}

Value OpComposer::slice(Value x, int64_t axis, int64_t begin, int64_t end) {
  Value starts = constantI64({begin}), ends = constantI64({end}), axes = constantI64({axis}),
        steps = constantI64({1});
  return op("nn.slice", {x, starts, ends, axes, steps});
}

Value OpComposer::select(Value x, int64_t axis, int64_t index) {
  Value entry = slice(x, axis, index, index + 1);
  Value axes = constantI64({axis});
  return op("nn.squeeze", {entry, axes});
}

Value OpComposer::transpose(Value x, llvm::ArrayRef<int64_t> perm) {
  return op("nn.transpose", {x},
            {builder.getNamedAttr("perm", builder.getDenseI64ArrayAttr(perm))});
}

Value OpComposer::concat(llvm::ArrayRef<Value> parts, int64_t axis) {
  if (parts.size() == 1)
    return parts[0];
  return op("nn.concat", parts, {builder.getNamedAttr("axis", builder.getI64IntegerAttr(axis))});
}

Value OpComposer::cast(Value x, Type to) {
  return op("nn.cast", {x}, {builder.getNamedAttr("to", TypeAttr::get(to))});
}

Value OpComposer::reduce(llvm::StringRef name, Value x, llvm::ArrayRef<int64_t> axes,
                         bool keepdims) {
  Value axesValue = constantI64(axes);
  return op(name, {x, axesValue},
            {builder.getNamedAttr("keepdims", builder.getI64IntegerAttr(keepdims))});
}

OpComposer::Moments OpComposer::moments(Value x, llvm::ArrayRef<int64_t> axes) {
  Value mean = reduce("nn.reduce_mean", x, axes, true);
  Value centered = sub(x, mean);
  Value squares = mul(centered, centered);
  Value variance = reduce("nn.reduce_mean", squares, axes, true);
  return {mean, centered, variance};
}

} // namespace pipe::nn
