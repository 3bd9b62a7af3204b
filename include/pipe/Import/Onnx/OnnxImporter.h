//===- OnnxImporter.h - ONNX model to the nn dialect ------------*- C++ -*-===//
//
// Reads a binary (.onnx) or textual (.onnxtext) ONNX model into a module with
// one func of nn ops. Weights stay in their files: initializers become
// nn.param ops that record where their bytes are.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_IMPORT_ONNX_ONNXIMPORTER_H
#define PIPE_IMPORT_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringMap.h"
#include <optional>

namespace pipe::onnx_import {

struct ImportOptions {
  /// Binds the leading (batch) dim of every graph input that is symbolic.
  std::optional<int64_t> microBatchSize;
  /// Binds symbolic dims by name (`--dim NAME=VALUE`); wins over the above.
  llvm::StringMap<int64_t> dims;
  /// Runs shape inference and folding, and requires static shapes.
  bool inferShapes = true;
  /// Name of the imported function.
  std::string functionName = "main";
};

/// The name the importer gives node number `index` (its location, and its id in
/// plans): the node's own name, or `OpType_index` when it has none.
std::string nodeDisplayName(llvm::StringRef name, llvm::StringRef opType, size_t index);

/// The ONNX op types (default domain) the importer supports, sorted.
std::vector<std::string> supportedOnnxOps();

/// True when `path` names a model this importer reads (.onnx, .onnxtext).
bool isOnnxFile(llvm::StringRef path);

/// Imports the model at `path`. Errors are emitted as diagnostics on
/// `context` (located at the offending node) and give a null module.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(llvm::StringRef path,
                                                 mlir::MLIRContext *context,
                                                 const ImportOptions &options);

/// Imports a model held in memory; `path` names it in messages, selects the
/// format (.onnxtext or binary) and is the folder external data is read from.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxBuffer(llvm::StringRef bytes, llvm::StringRef path,
                                                   mlir::MLIRContext *context,
                                                   const ImportOptions &options);

/// Signs that the model at `path` was exported for inference rather than
/// training (BatchNorm in inference mode, weights renamed by constant folding,
/// tied weights stored twice), each one sentence; empty when there are none. A
/// model that cannot be read sets `error`.
std::vector<std::string> inferenceExportSigns(llvm::StringRef path, std::string &error);

} // namespace pipe::onnx_import

#endif // PIPE_IMPORT_ONNX_ONNXIMPORTER_H
