//===- InitAll.h - register pipe-opt's dialects and passes ------*- C++ -*-===//
//
// The one call a tool makes to get what pipe-opt has: the nn and pipe dialects
// with their interfaces, and every pass (nn, pipe, conversion). Light on
// purpose: tool mains include it without pulling in the dialect headers.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_INITALL_H
#define PIPE_INITALL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace pipe {
/// Inserts the nn and pipe dialects and the upstream dialects their IR and
/// passes are made of (func), attaches the cost model and the gradient rules
/// to the nn ops, and registers every pass of pipe-opt with the global pass
/// registry (so that --pass-pipeline and MlirOptMain find them). Other
/// upstream dialects and passes stay the tool's choice
/// (mlir/InitAllDialects.h, mlir/InitAllPasses.h).
void registerAllDialectsAndPasses(mlir::DialectRegistry &registry);

/// The two halves of registerAllDialectsAndPasses, for hosts that load them
/// separately (pipe-opt-plugin.so: mlir-opt's dialect and pass plugins).
void registerAllDialects(mlir::DialectRegistry &registry);
void registerAllPasses();
} // namespace pipe

#endif // PIPE_INITALL_H
