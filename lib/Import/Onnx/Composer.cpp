//===- Composer.cpp - helpers of the composite ONNX importers -------------===//
#include "Composer.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace pipe::onnx_import {

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

/// `axis` of a rank-`rank` tensor in [0, rank), or an error naming the node.
FailureOr<int64_t> normalizedAxis(NodeImporter &n, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return n.error() << n.node.op_type() << " axis " << axis << " is outside [" << -rank << ", "
                     << rank << ")";
  return axis < 0 ? axis + rank : axis;
}

RankedTensorType rankedInput(NodeImporter &n, unsigned i) {
  return dyn_cast<RankedTensorType>(n.input(i).getType());
}

/// `indices` as i64, the negative ones counted from `length` (ONNX's rule
/// for OneHot and GatherElements).
Value wrappedIndex(Composer &c, Value indices, int64_t length) {
  auto i64 = c.n.builder.getI64Type();
  Value index = getElementTypeOrSelf(indices.getType()) == i64 ? indices : c.cast(indices, i64);
  Value zero = c.n.constantI64({0}, true);
  Value negative = c.op("nn.less", {index, zero});
  Value lengthScalar = c.n.constantI64({length}, true);
  Value wrapped = c.add(index, lengthScalar);
  return c.op("nn.where", {negative, wrapped, index});
}


FailureOr<SmallVector<int64_t>> constantInts(NodeImporter &n, unsigned i, llvm::StringRef what) {
  DenseElementsAttr attr;
  Value v = n.input(i);
  if (!v || !matchPattern(v, m_Constant(&attr)) || !isa<IntegerType>(attr.getElementType()))
    return n.error() << n.node.op_type() << " " << what
                     << " must be a constant integer tensor (bind it before planning)";
  SmallVector<int64_t> values;
  for (const APInt &value : attr.getValues<APInt>())
    values.push_back(attr.getElementType().isUnsignedInteger() ? int64_t(value.getZExtValue())
                                                                : value.getSExtValue());
  return values;
}

FailureOr<SmallVector<double>> constantFloats(NodeImporter &n, unsigned i, llvm::StringRef what) {
  SmallVector<double> values;
  if (!n.input(i))
    return values;
  DenseElementsAttr attr;
  if (!matchPattern(n.input(i), m_Constant(&attr)) || !isa<FloatType>(attr.getElementType()))
    return n.error() << n.node.op_type() << " " << what
                     << " must be a constant float tensor (bind it before planning)";
  for (const APFloat &value : attr.getValues<APFloat>())
    values.push_back(value.convertToDouble());
  return values;
}

/// The index of the first (or, with `last`, the last) extreme of x along
/// `axis`, kept as a dim of 1: where x equals its max (min), the iota along
/// the axis, else a value past every index; then the min (max) of that.
Value extremeIndex(Composer &c, Value x, int64_t axis, bool maximum, bool last) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t length = type.getDimSize(axis);
  Value extreme = c.reduce(maximum ? "nn.reduce_max" : "nn.reduce_min", x, {axis}, true);
  Value hit = c.op("nn.equal", {x, extreme});
  Value positions = c.iota(length, type.getRank(), axis);
  Value beyond = c.n.constantI64({last ? -1 : length}, true);
  Value candidates = c.op("nn.where", {hit, positions, beyond});
  return c.reduce(last ? "nn.reduce_max" : "nn.reduce_min", candidates, {axis}, true);
}

Value selectAlong(Composer &c, Value data, Value index, int64_t axis) {
  auto dataType = cast<RankedTensorType>(data.getType());
  const int64_t rank = dataType.getRank(), length = dataType.getDimSize(axis);
  // [.., I_axis, 1, ..] against [1.., 1, L, 1..]: the mask [.., I_axis, L, ..].
  Value after = c.n.constantI64({axis + 1});
  Value expanded = c.op("nn.unsqueeze", {index, after});
  Value positions = c.iota(length, rank + 1, axis + 1);
  Value hit = c.op("nn.equal", {expanded, positions});
  Value mask = c.cast(hit, dataType.getElementType());
  // data [.., L, ..] as [.., 1, L, ..].
  Value at = c.n.constantI64({axis});
  Value spread = c.op("nn.unsqueeze", {data, at});
  Value picked = c.mul(spread, mask);
  return c.reduce("nn.reduce_sum", picked, {axis + 1}, false);
}

} // namespace pipe::onnx_import
