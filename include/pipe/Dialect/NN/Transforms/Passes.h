//===- Passes.h - nn dialect passes -----------------------------*- C++ -*-===//
#ifndef PIPE_DIALECT_NN_TRANSFORMS_PASSES_H
#define PIPE_DIALECT_NN_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"

namespace pipe::nn {

#define GEN_PASS_DECL
#include "pipe/Dialect/NN/Transforms/Passes.h.inc"

/// Folds and re-infers the types of every op in `func` in order, then updates
/// its signature. Shared by the pass and the ONNX importer.
mlir::LogicalResult inferShapesInFunction(mlir::func::FuncOp func, bool requireStatic);

/// Re-infers the result types of one op, then folds it when its operands are
/// constants. Returns the values that now stand for its results (the op's own
/// results, or folded replacements; the op is then dead but not erased).
mlir::FailureOr<llvm::SmallVector<mlir::Value>>
inferAndFold(mlir::Operation *op, mlir::OpBuilder &builder);

/// The formula of nn ops a composite op (nn::isComposite) stands for, built
/// at `builder`'s insertion point: the values that replace its results.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> expandComposite(mlir::Operation *op,
                                                                mlir::OpBuilder &builder);

/// Replaces every composite op under `root` by its formula. `onMade` sees each
/// op made, with the composite it comes from, before the composite is erased.
mlir::LogicalResult
expandComposites(mlir::Operation *root,
                 llvm::function_ref<void(mlir::Operation *composite, mlir::Operation *made)>
                     onMade = nullptr);

#define GEN_PASS_REGISTRATION
#include "pipe/Dialect/NN/Transforms/Passes.h.inc"

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_TRANSFORMS_PASSES_H
