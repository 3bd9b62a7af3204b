//===- ModelFile.cpp - an ONNX model read without its weight bytes --------===//
//
// Protobuf wire format (protobuf.dev/programming-guides/encoding): a message
// is a sequence of (tag = field << 3 | wire type, value); wire type 0 is a
// varint, 1 a fixed 64-bit value, 2 a length-delimited byte string, 5 a fixed
// 32-bit value. ModelProto.graph is field 7, GraphProto.initializer field 5,
// TensorProto.raw_data field 9 (onnx/onnx.proto).
//
//===----------------------------------------------------------------------===//
#include "ModelFile.h"

#include <onnx/defs/parser.h>

#include "llvm/ADT/Twine.h"

using namespace pipe::onnx_import;

namespace {
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;

struct Field {
  uint32_t number;
  const uint8_t *begin;      // the tag
  const uint8_t *valueBegin; // the payload of a length-delimited field
  const uint8_t *end;
};

class WireScanner {
public:
  WireScanner(const uint8_t *fileStart) : fileStart(fileStart) {}

  /// Splits [begin, end) into fields; false with `error` set on bad input.
  bool scan(const uint8_t *begin, const uint8_t *end, std::vector<Field> &fields,
            std::string &error) {
    const uint8_t *p = begin;
    while (p < end) {
      const uint8_t *tagStart = p;
      uint64_t tag;
      if (!readVarint(p, end, tag))
        return fail(tagStart, "truncated field tag", error);
      uint32_t wireType = tag & 7;
      uint32_t number = static_cast<uint32_t>(tag >> 3);
      if (number == 0)
        return fail(tagStart, "field number 0", error);
      const uint8_t *valueBegin = p;
      switch (wireType) {
      case 0: {
        uint64_t ignored;
        if (!readVarint(p, end, ignored))
          return fail(tagStart, "truncated varint", error);
        break;
      }
      case 1:
        if (end - p < 8)
          return fail(tagStart, "truncated fixed64", error);
        p += 8;
        break;
      case 2: {
        uint64_t length;
        if (!readVarint(p, end, length))
          return fail(tagStart, "truncated length", error);
        if (length > static_cast<uint64_t>(end - p))
          return fail(tagStart, "field runs past the end of the file", error);
        valueBegin = p;
        p += length;
        break;
      }
      case 5:
        if (end - p < 4)
          return fail(tagStart, "truncated fixed32", error);
        p += 4;
        break;
      default:
        return fail(tagStart, "unsupported wire type " + std::to_string(wireType), error);
      }
      fields.push_back({number, tagStart, valueBegin, p});
    }
    return true;
  }

private:
  static bool readVarint(const uint8_t *&p, const uint8_t *end, uint64_t &value) {
    value = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t byte = *p++;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return true;
    }
    return false;
  }
  bool fail(const uint8_t *at, const std::string &what, std::string &error) {
    error = "corrupt or truncated protobuf at byte " + std::to_string(at - fileStart) +
            ": " + what;
    return false;
  }
  const uint8_t *fileStart;
};

/// Concatenates the wire bytes of every field but `skip`.
std::string keepFieldsExcept(const std::vector<Field> &fields, uint32_t skip) {
  std::string bytes;
  for (const Field &f : fields)
    if (f.number != skip)
      bytes.append(reinterpret_cast<const char *>(f.begin), f.end - f.begin);
  return bytes;
}

bool parseMessage(google::protobuf::MessageLite &message, const std::string &bytes,
                  const char *what, std::string &error) {
  if (message.ParseFromString(bytes))
    return true;
  error = std::string("malformed ") + what + " in the protobuf";
  return false;
}

std::unique_ptr<ModelFile> readBinary(std::unique_ptr<ModelFile> file, std::string &error) {
  const auto *start = reinterpret_cast<const uint8_t *>(file->buffer->getBufferStart());
  const auto *end = reinterpret_cast<const uint8_t *>(file->buffer->getBufferEnd());
  WireScanner scanner(start);
  std::vector<Field> modelFields;
  if (!scanner.scan(start, end, modelFields, error))
    return nullptr;
  if (!parseMessage(file->model, keepFieldsExcept(modelFields, kModelGraph), "ModelProto",
                    error))
    return nullptr;
  const Field *graphField = nullptr;
  for (const Field &f : modelFields)
    if (f.number == kModelGraph)
      graphField = &f;
  if (!graphField) {
    error = "the file holds no ONNX graph (is it an ONNX model?)";
    return nullptr;
  }
  std::vector<Field> graphFields;
  if (!scanner.scan(graphField->valueBegin, graphField->end, graphFields, error))
    return nullptr;
  if (!parseMessage(*file->model.mutable_graph(),
                    keepFieldsExcept(graphFields, kGraphInitializer), "GraphProto", error))
    return nullptr;
  for (const Field &f : graphFields) {
    if (f.number != kGraphInitializer)
      continue;
    std::vector<Field> tensorFields;
    if (!scanner.scan(f.valueBegin, f.end, tensorFields, error))
      return nullptr;
    InitializerData data;
    if (!parseMessage(data.tensor, keepFieldsExcept(tensorFields, kTensorRawData),
                      "initializer TensorProto", error))
      return nullptr;
    for (const Field &t : tensorFields) {
      if (t.number != kTensorRawData)
        continue;
      data.rawOffset = t.valueBegin - start;
      data.rawLength = t.end - t.valueBegin;
      data.rawBytes = reinterpret_cast<const char *>(t.valueBegin);
    }
    file->initializers.push_back(std::move(data));
  }
  return file;
}

/// onnx's text parser has no comments; fixtures use `//` lines, drop them.
std::string stripComments(llvm::StringRef text) {
  std::string out;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    if (!line.ltrim().starts_with("//"))
      out.append(line.begin(), line.end());
    out.push_back('\n');
    text = rest;
  }
  return out;
}

std::unique_ptr<ModelFile> readText(std::unique_ptr<ModelFile> file, std::string &error) {
  file->textual = true;
  std::string text = stripComments(file->buffer->getBuffer());
  onnx::OnnxParser parser(text.c_str());
  auto status = parser.Parse(file->model);
  if (!status.IsOK()) {
    error = "cannot parse textual ONNX: " + status.ErrorMessage();
    std::replace(error.begin(), error.end(), '\n', ' ');
    return nullptr;
  }
  auto *graph = file->model.mutable_graph();
  for (const onnx::TensorProto &tensor : graph->initializer())
    file->initializers.push_back(InitializerData{tensor});
  graph->clear_initializer();
  // Point at raw_data only now that the vector no longer moves its elements.
  for (InitializerData &data : file->initializers) {
    if (!data.tensor.has_raw_data())
      continue;
    data.rawBytes = data.tensor.raw_data().data();
    data.rawLength = static_cast<int64_t>(data.tensor.raw_data().size());
  }
  return file;
}
} // namespace

std::unique_ptr<ModelFile> pipe::onnx_import::readModelFile(llvm::StringRef path,
                                                            std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot open: " + buffer.getError().message();
    return nullptr;
  }
  return readModelBuffer(std::move(*buffer), path.ends_with(".onnxtext"), error);
}

std::unique_ptr<ModelFile>
pipe::onnx_import::readModelBuffer(std::unique_ptr<llvm::MemoryBuffer> buffer, bool textual,
                                   std::string &error) {
  auto file = std::make_unique<ModelFile>();
  file->buffer = std::move(buffer);
  if (textual)
    return readText(std::move(file), error);
  if (file->buffer->getBufferSize() == 0) {
    error = "the file is empty";
    return nullptr;
  }
  return readBinary(std::move(file), error);
}
