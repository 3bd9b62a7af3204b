//===- Composer.h - building an ONNX node from several nn ops --*- C++ -*-===//
//
// What the handlers that import one ONNX node as several nn ops share: the
// Composer (nn::OpComposer at the node), and the checks and index helpers
// they all need.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_IMPORT_ONNX_COMPOSER_H
#define PIPE_LIB_IMPORT_ONNX_COMPOSER_H

#include "NodeImporter.h"

#include "pipe/Dialect/NN/Transforms/OpComposer.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"

namespace pipe::onnx_import {

using Values = mlir::FailureOr<llvm::SmallVector<mlir::Value>>;

/// Builds the nn ops of one node (nn::OpComposer at the node's location),
/// and gives the node's results.
class Composer : public nn::OpComposer {
public:
  explicit Composer(NodeImporter &n) : OpComposer(n.builder, n.loc), n(n) {}

  Values result(mlir::Value v) const {
    if (failed() || !v)
      return mlir::failure();
    return llvm::SmallVector<mlir::Value>{v};
  }

  NodeImporter &n;
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
