//===- ExportCheck.cpp - signs of an inference (eval-mode) export ---------===//
//
// pipe-opt plans training: a model exported for inference plans a different
// network (BatchNorm with running statistics, or folded into the
// convolutions; weights renamed by constant folding; tied weights stored
// twice). These checks read the ONNX graph itself, without importing it.
//
//===----------------------------------------------------------------------===//
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "ModelFile.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <cstring>
#include <map>
#include <string_view>
#include <tuple>
#include <unordered_map>

using namespace pipe::onnx_import;

namespace {
/// The default-domain opset of the model (0 when it declares none).
int64_t defaultOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &id : model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      return id.version();
  return 0;
}

/// Whether a BatchNormalization node uses its running statistics (inference):
/// training_mode 0 or absent from opset 14 on; one output before (the
/// training form also outputs the updated statistics).
bool inferenceBatchNorm(const onnx::NodeProto &node, int64_t opset) {
  if (opset >= 14) {
    for (const onnx::AttributeProto &attr : node.attribute())
      if (attr.name() == "training_mode")
        return attr.i() == 0;
    return true;
  }
  int outputs = 0;
  for (const std::string &output : node.output())
    outputs += !output.empty();
  return outputs <= 1;
}

/// Whether every element of an initializer held as raw bytes is the same:
/// the bytes repeat with the element's width.
bool allElementsEqual(const InitializerData &data) {
  int64_t width = 1;
  switch (data.tensor.data_type()) {
  case onnx::TensorProto::DOUBLE:
  case onnx::TensorProto::INT64:
  case onnx::TensorProto::UINT64: width = 8; break;
  case onnx::TensorProto::FLOAT:
  case onnx::TensorProto::INT32:
  case onnx::TensorProto::UINT32: width = 4; break;
  case onnx::TensorProto::FLOAT16:
  case onnx::TensorProto::BFLOAT16:
  case onnx::TensorProto::INT16:
  case onnx::TensorProto::UINT16: width = 2; break;
  default: break;
  }
  return data.rawLength > width &&
         !std::memcmp(data.rawBytes, data.rawBytes + width,
                      static_cast<size_t>(data.rawLength - width));
}

std::string sample(const std::vector<std::string> &names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 3; ++i)
    text += (i ? ", " : "") + names[i];
  if (names.size() > 3)
    text += ", ...";
  return text;
}
} // namespace

std::vector<std::string> pipe::onnx_import::inferenceExportSigns(llvm::StringRef path,
                                                                  std::string &error) {
  std::vector<std::string> signs;
  std::unique_ptr<ModelFile> file = readModelFile(path, error);
  if (!file)
    return signs;
  const onnx::GraphProto &graph = file->model.graph();
  const int64_t opset = defaultOpset(file->model);

  size_t batchNorms = 0, inference = 0;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "BatchNormalization" &&
        (node.domain().empty() || node.domain() == "ai.onnx")) {
      ++batchNorms;
      inference += inferenceBatchNorm(node, opset);
    }
  if (inference > 0)
    signs.push_back(std::to_string(inference) + " of its " + std::to_string(batchNorms) +
                    " BatchNormalization nodes use the running statistics (inference mode): "
                    "training normalises with the statistics of each batch");

  // torch names the constants it creates by folding "onnx::<Op>_<n>": weights
  // so named no longer map to the framework's parameters (a BatchNorm folded
  // into the convolution before it, for one).
  std::vector<std::string> folded;
  for (const InitializerData &data : file->initializers)
    if (llvm::StringRef(data.tensor.name()).starts_with("onnx::") &&
        data.tensor.dims_size() > 0)
      folded.push_back(data.tensor.name());
  // A BatchNorm folded into the convolution before it leaves a Conv whose
  // weight and bias the exporter computed (and named), and no BatchNorm.
  // Equal folded tensors are stored once and shared through Identity nodes.
  llvm::StringSet<> foldedNames;
  for (const std::string &name : folded)
    foldedNames.insert(name);
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Identity" && node.input_size() == 1 && node.output_size() == 1 &&
        foldedNames.contains(node.input(0)))
      foldedNames.insert(node.output(0));
  size_t foldedConvs = 0;
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Conv" && node.input_size() >= 3 &&
        foldedNames.contains(node.input(1)) && foldedNames.contains(node.input(2)))
      ++foldedConvs;
  if (batchNorms == 0 && foldedConvs > 0)
    signs.push_back(std::to_string(foldedConvs) +
                    " convolutions read a weight and a bias the exporter computed, and the "
                    "graph has no BatchNormalization: BatchNorm was folded into the "
                    "convolutions (eval mode with constant folding), so there is no BatchNorm "
                    "left to train");
  if (!folded.empty())
    signs.push_back(std::to_string(folded.size()) +
                    " weights have names the exporter made up (" + sample(folded) +
                    "): constant folding computed or renamed them, so they are not the "
                    "framework's parameters");

  // Tied weights (one parameter used twice) that the export stored twice would
  // be trained as two. Compared: initializers of 1 KiB or more with the same
  // type, shape and bytes, whose elements are not all equal (a fresh model's
  // BatchNorm scales are all ones, its shifts and running means all zeros:
  // equal, and not tied).
  std::map<std::tuple<int, std::vector<int64_t>, int64_t>, std::vector<const InitializerData *>>
      bySignature;
  for (const InitializerData &data : file->initializers)
    if (data.rawBytes && data.rawLength >= 1024 && !allElementsEqual(data))
      bySignature[{data.tensor.data_type(),
                   std::vector<int64_t>(data.tensor.dims().begin(), data.tensor.dims().end()),
                   data.rawLength}]
          .push_back(&data);
  // Each initializer is paired with the first earlier one of its group holding the
  // same bytes; only those with the same hash of the bytes are compared (a chain of
  // 20,000 blocks has 20,000 weights of one shape).
  std::vector<std::string> duplicates;
  for (const auto &[signature, group] : bySignature) {
    std::unordered_map<size_t, std::vector<const InitializerData *>> byHash;
    for (const InitializerData *data : group) {
      const size_t length = static_cast<size_t>(data->rawLength);
      std::vector<const InitializerData *> &same =
          byHash[std::hash<std::string_view>()(std::string_view(data->rawBytes, length))];
      for (const InitializerData *earlier : same)
        if (!std::memcmp(data->rawBytes, earlier->rawBytes, length)) {
          duplicates.push_back("'" + earlier->tensor.name() + "' and '" + data->tensor.name() +
                               "'");
          break;
        }
      same.push_back(data);
    }
  }
  if (!duplicates.empty())
    signs.push_back(std::to_string(duplicates.size()) +
                    " pairs of weights hold the same values (" + sample(duplicates) +
                    "): a tied weight stored twice would be trained as two");
  return signs;
}
