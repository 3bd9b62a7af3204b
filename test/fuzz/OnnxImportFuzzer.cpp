//===- OnnxImportFuzzer.cpp - libFuzzer harness: binary ONNX import -------===//
//
// Feeds arbitrary bytes to the importer as a binary model (wire-format
// reader, protobuf parsing, initializer checks, the op handlers, shape
// inference and folding, the verifiers). Any input must give a module or an
// error diagnostic, never a crash, a sanitizer report or a hang.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext *context = [] {
    auto *c = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
    c->loadDialect<pipe::nn::NNDialect, mlir::func::FuncDialect>();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  mlir::ScopedDiagnosticHandler quiet(context, [](mlir::Diagnostic &) {
    return mlir::success();
  });
  pipe::onnx_import::ImportOptions options;
  options.microBatchSize = 2;
  llvm::StringRef bytes(reinterpret_cast<const char *>(data), size);
  // External data resolves against a folder that does not exist: every
  // location is checked, none is read.
  auto module = pipe::onnx_import::importOnnxBuffer(bytes, "fuzz-model-folder/model.onnx",
                                                    context, options);
  (void)module;
  return 0;
}
