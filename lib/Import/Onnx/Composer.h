//===- Composer.h - building an ONNX node from several nn ops --*- C++ -*-===//
//
// What the handlers that import one ONNX node as several nn ops share: the
// Composer, which builds the ops one statement at a time and keeps the first
// failure, and the checks and index helpers they all need.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_IMPORT_ONNX_COMPOSER_H
#define PIPE_LIB_IMPORT_ONNX_COMPOSER_H

#include "NodeImporter.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

namespace pipe::onnx_import {

using Values = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;

/// Builds nn ops for one node; the first failure sticks and later calls
/// return null, so a formula is checked once. Each op is its own statement:
/// argument evaluation order is unspecified in C++, and the ops must come out
/// in the same order whatever the compiler.
class Composer {
public:
  explicit Composer(NodeImporter &n) : n(n) {}

  mlir::Value op(llvm::StringRef name, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {}) {
    if (failed_ || llvm::any_of(operands, [](mlir::Value v) { return !v; })) {
      failed_ = true;
      return nullptr;
    }
    auto results = n.create(name, operands, attrs, 1);
    if (mlir::failed(results)) {
      failed_ = true;
      return nullptr;
    }
    return (*results)[0];
  }
  /// A 0-d constant of `like`'s element type.
  mlir::Value scalar(double value, mlir::Value like) {
    if (!like)
      return nullptr;
    return n.constantScalar(value, mlir::getElementTypeOrSelf(like.getType()));
  }
  mlir::Value add(mlir::Value a, mlir::Value b) { return op("nn.add", {a, b}); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return op("nn.sub", {a, b}); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return op("nn.mul", {a, b}); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return op("nn.div", {a, b}); }
  mlir::Value unary(llvm::StringRef name, mlir::Value x) { return op(name, {x}); }
  /// An i64 constant of `shape` holding `values`.
  mlir::Value constant(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values) {
    auto type = mlir::RankedTensorType::get(shape, n.builder.getI64Type());
    auto attr = mlir::DenseElementsAttr::get(type, values);
    return op("nn.constant", {}, {n.builder.getNamedAttr("value", attr)});
  }
  /// A constant of `shape` and element type `element` (float, integer or
  /// i1) holding `values`, rounded to the type.
  mlir::Value constantOf(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> values,
                         mlir::Type element);
  /// 0, 1, ..., length - 1 along dim `at` of a rank-`rank` i64 tensor whose
  /// other dims are 1 (broadcasts against the dim it numbers).
  mlir::Value iota(int64_t length, int64_t rank, int64_t at) {
    llvm::SmallVector<int64_t> shape(rank, 1), values(length);
    shape[at] = length;
    for (int64_t k = 0; k < length; ++k)
      values[k] = k;
    return constant(shape, values);
  }
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape) {
    mlir::Value target = n.constantI64(shape);
    return op("nn.reshape", {x, target});
  }
  /// x[begin:end] along `axis`.
  mlir::Value slice(mlir::Value x, int64_t axis, int64_t begin, int64_t end) {
    mlir::Value starts = n.constantI64({begin}), ends = n.constantI64({end}),
                axes = n.constantI64({axis}), steps = n.constantI64({1});
    return op("nn.slice", {x, starts, ends, axes, steps});
  }
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm) {
    return op("nn.transpose", {x}, {n.builder.getNamedAttr("perm", n.builder.getDenseI64ArrayAttr(perm))});
  }
  mlir::Value cast(mlir::Value x, mlir::Type to) {
    return op("nn.cast", {x}, {n.builder.getNamedAttr("to", mlir::TypeAttr::get(to))});
  }
  /// A reduction over `axes` (i64 constant operand).
  mlir::Value reduce(llvm::StringRef name, mlir::Value x, llvm::ArrayRef<int64_t> axes, bool keepdims) {
    mlir::Value axesValue = n.constantI64(axes);
    return op(name, {x, axesValue},
              {n.builder.getNamedAttr("keepdims", n.builder.getI64IntegerAttr(keepdims))});
  }
  /// x minus its mean over `axes`, and the mean of that squared (the
  /// biased variance), the reduced dims kept: the start of every
  /// normalization.
  struct Moments {
    mlir::Value mean, centered, variance;
  };
  Moments moments(mlir::Value x, llvm::ArrayRef<int64_t> axes);
  /// min(x, 0) and max(x, 0).
  mlir::Value negativePart(mlir::Value x) { return op("nn.min", {x, scalar(0, x)}); }
  mlir::Value positivePart(mlir::Value x) { return op("nn.relu", {x}); }

  Values result(mlir::Value v) const {
    if (failed_ || !v)
      return mlir::failure();
    return llvm::SmallVector<mlir::Value>{v};
  }

  NodeImporter &n;

private:
  bool failed_ = false;
};

/// Checks a node of `minInputs` to `maxInputs` inputs whose first is floating
/// point (the formulas use exp, sqrt, log) and whose attributes are among `specs`.
mlir::LogicalResult expectFloatNode(NodeImporter &n, unsigned minInputs, unsigned maxInputs,
                                    llvm::ArrayRef<AttrSpec> specs);

/// `axis` of a rank-`rank` tensor in [0, rank), or an error naming the node.
mlir::FailureOr<int64_t> normalizedAxis(NodeImporter &n, int64_t axis, int64_t rank);

/// Input `i`'s type when it is ranked, else null.
mlir::RankedTensorType rankedInput(NodeImporter &n, unsigned i);

/// `indices` as i64, the negative ones counted from `length` (ONNX's rule
/// for OneHot and the gathers and scatters).
mlir::Value wrappedIndex(Composer &c, mlir::Value indices, int64_t length);

/// The index of the first (or, with `last`, the last) extreme of x along
/// `axis`, kept as a dim of 1 (i64).
mlir::Value extremeIndex(Composer &c, mlir::Value x, int64_t axis, bool maximum, bool last);

/// out[.., i, ..] = data[.., index[.., i, ..], ..] along `axis`, for a
/// wrapped i64 `index` of data's rank whose other dims equal data's: a one-hot
/// mask over the axis (index against an iota, in a new dim after it) times
/// data, summed away, so the gradient is a mul's. Costs the axis length
/// times the output.
mlir::Value selectAlong(Composer &c, mlir::Value data, mlir::Value index, int64_t axis);

/// The values of a constant integer operand (unsigned ones zero-extended), or an
/// error naming the node, the operand and what it is for.
mlir::FailureOr<llvm::SmallVector<int64_t>> constantInts(NodeImporter &n, unsigned i,
                                                        llvm::StringRef what);

/// The values of a constant float operand; an absent or empty one is empty.
/// Anything else is an error naming the node, the operand and what it is for.
mlir::FailureOr<llvm::SmallVector<double>> constantFloats(NodeImporter &n, unsigned i,
                                                         llvm::StringRef what);

} // namespace pipe::onnx_import

#endif // PIPE_LIB_IMPORT_ONNX_COMPOSER_H
