//===- ModelFile.h - an ONNX model read without its weight bytes -*- C++ -*-===//
//
// Reads the protobuf of a binary model by walking its wire format, so that the
// bytes of initializers (raw_data) are located, never copied: the rest of the
// model is parsed by protobuf, the weights stay in the memory-mapped file.
// Textual models (.onnxtext) go through onnx's own parser.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_IMPORT_ONNX_MODELFILE_H
#define PIPE_LIB_IMPORT_ONNX_MODELFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

namespace pipe::onnx_import {

/// Where the bytes of one initializer live.
struct InitializerData {
  /// The initializer with every field but raw_data.
  onnx::TensorProto tensor;
  /// Byte range of raw_data in the model file; -1 when it has none.
  int64_t rawOffset = -1, rawLength = -1;
  /// raw_data in the mapped file (valid while the ModelFile lives).
  const char *rawBytes = nullptr;
};

struct ModelFile {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  /// The model with its graph's initializers removed (they are below).
  onnx::ModelProto model;
  std::vector<InitializerData> initializers;
  bool textual = false;
};

/// Reads `path`; on failure returns null and sets `error` to one line.
std::unique_ptr<ModelFile> readModelFile(llvm::StringRef path, std::string &error);
/// Reads a model already in memory (binary, or textual when `textual`).
std::unique_ptr<ModelFile> readModelBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer,
                                           bool textual, std::string &error);

} // namespace pipe::onnx_import

#endif // PIPE_LIB_IMPORT_ONNX_MODELFILE_H
