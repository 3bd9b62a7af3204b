//===- Passes.h - pipe dialect passes ---------------------------*- C++ -*-===//
#ifndef PIPE_DIALECT_PIPE_TRANSFORMS_PASSES_H
#define PIPE_DIALECT_PIPE_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace pipe::pipeline {

/// The model function the pipe passes work on: the module's first function
/// with a body (null when there is none). Callers include FuncOps.h.
mlir::func::FuncOp mainFunction(mlir::ModuleOp module);

/// The discardable attribute pipe-partition puts on every op: its stage.
constexpr llvm::StringLiteral kStageAttr = "pipe.stage";

/// The loss and optimizer named by a pass option; an unknown name is an error
/// on `diagnosticOp` listing the known ones.
mlir::FailureOr<LossKind> parseLossKind(mlir::Operation *diagnosticOp, llvm::StringRef text);
mlir::FailureOr<OptimizerKind> parseOptimizer(mlir::Operation *diagnosticOp,
                                              llvm::StringRef text);

#define GEN_PASS_DECL
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"

} // namespace pipe::pipeline

#endif // PIPE_DIALECT_PIPE_TRANSFORMS_PASSES_H
