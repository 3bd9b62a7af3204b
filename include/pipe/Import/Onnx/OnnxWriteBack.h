//===- OnnxWriteBack.h - the plan written back into the ONNX model -*- C++ -*-===//
//
// The other direction of the importer: a copy of the model the plan was made
// from, with each node's stage as node metadata.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_IMPORT_ONNX_ONNXWRITEBACK_H
#define PIPE_IMPORT_ONNX_ONNXWRITEBACK_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"

#include <map>
#include <string>

namespace pipe::onnx_import {

/// Writes a copy of the ONNX model at `input` to `output` with each node's
/// stage as node metadata (`metadata_props`, key `pipe.stage`; ONNX IR 10
/// field, ignored by older readers) and `planSummary` as model metadata
/// (`pipe.plan`). Nodes are named as the importer names them. External data
/// is linked (or copied) next to `output`; the file is written beside
/// `output` and renamed over it, so no partial model is left.
mlir::LogicalResult writeOnnxWithStages(llvm::StringRef input, llvm::StringRef output,
                                        const std::map<std::string, int> &stageOf,
                                        llvm::StringRef planSummary, std::string &error);

} // namespace pipe::onnx_import

#endif // PIPE_IMPORT_ONNX_ONNXWRITEBACK_H
