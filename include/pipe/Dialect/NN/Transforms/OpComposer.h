//===- OpComposer.h - building a formula of nn ops --------------*- C++ -*-===//
//
// The OpComposer builds nn ops one statement at a time at a builder's
// insertion point, inferring and folding each as it is made, and keeps the
// first failure: later calls return null, so a formula is checked once. The
// ONNX importer writes its composite nodes with it, and nn-expand-composites
// writes the ops that are one op in the IR and a formula everywhere else
// (nn.lstm, nn.gru, nn.rnn). Each op is its own statement: argument
// evaluation order is unspecified in C++, and the ops must come out in the
// same order whatever the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_TRANSFORMS_OPCOMPOSER_H
#define PIPE_DIALECT_NN_TRANSFORMS_OPCOMPOSER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

namespace pipe::nn {

class OpComposer {
public:
  OpComposer(mlir::OpBuilder &builder, mlir::Location loc) : builder(builder), loc(loc) {}

  /// The nn op `name` of one result on `operands`, its attributes stored as
  /// properties; null once anything failed.
  mlir::Value op(llvm::StringRef name, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {});
  mlir::Value add(mlir::Value a, mlir::Value b) { return op("nn.add", {a, b}); }
  mlir::Value sub(mlir::Value a, mlir::Value b) { return op("nn.sub", {a, b}); }
  mlir::Value mul(mlir::Value a, mlir::Value b) { return op("nn.mul", {a, b}); }
  mlir::Value div(mlir::Value a, mlir::Value b) { return op("nn.div", {a, b}); }
  mlir::Value unary(llvm::StringRef name, mlir::Value x) { return op(name, {x}); }

  /// A 0-d constant of `like`'s element type.
  mlir::Value scalar(double value, mlir::Value like);
  /// A 0-d constant of `elementType` (float or integer).
  mlir::Value constantScalar(double value, mlir::Type elementType);
  /// An i64 constant: a 1-d tensor of `values`, or with `scalar` a 0-d one.
  mlir::Value constantI64(llvm::ArrayRef<int64_t> values, bool scalar = false);
  /// An i64 constant of `shape` holding `values`.
  mlir::Value constant(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<int64_t> values);
  /// A constant of `shape` and element type `element` (float, integer or
  /// i1) holding `values`, rounded to the type.
  mlir::Value constantOf(llvm::ArrayRef<int64_t> shape, llvm::ArrayRef<double> values,
                         mlir::Type element);
  /// 0, 1, ..., length - 1 along dim `at` of a rank-`rank` i64 tensor whose
  /// other dims are 1 (broadcasts against the dim it numbers).
  mlir::Value iota(int64_t length, int64_t rank, int64_t at);

  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> shape);
  /// x[begin:end] along `axis`.
  mlir::Value slice(mlir::Value x, int64_t axis, int64_t begin, int64_t end);
  /// Entry `index` of `x` along `axis`, without that dim.
  mlir::Value select(mlir::Value x, int64_t axis, int64_t index);
  mlir::Value transpose(mlir::Value x, llvm::ArrayRef<int64_t> perm);
  /// `parts` joined along `axis` (a single part is itself).
  mlir::Value concat(llvm::ArrayRef<mlir::Value> parts, int64_t axis);
  mlir::Value cast(mlir::Value x, mlir::Type to);
  /// A reduction over `axes` (i64 constant operand).
  mlir::Value reduce(llvm::StringRef name, mlir::Value x, llvm::ArrayRef<int64_t> axes,
                     bool keepdims);
  /// x minus its mean over `axes`, and the mean of that squared (the biased
  /// variance), the reduced dims kept: the start of every normalization.
  struct Moments {
    mlir::Value mean, centered, variance;
  };
  Moments moments(mlir::Value x, llvm::ArrayRef<int64_t> axes);
  /// min(x, 0) and max(x, 0).
  mlir::Value negativePart(mlir::Value x) { return op("nn.min", {x, scalar(0, x)}); }
  mlir::Value positivePart(mlir::Value x) { return op("nn.relu", {x}); }

  /// Whether any op failed (its error is already reported).
  bool failed() const { return failed_; }

  mlir::OpBuilder &builder;
  const mlir::Location loc;

private:
  bool failed_ = false;
};

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_TRANSFORMS_OPCOMPOSER_H
