//===- OnnxWriteBack.cpp - the plan written back into the ONNX model ------===//
#include "pipe/Import/Onnx/OnnxWriteBack.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>
#include <sstream>

using namespace mlir;
using namespace pipe::onnx_import;

/// A model's external-data locations are relative to its folder (the importer
/// refuses any other). When the model with the plan goes to another folder,
/// each data file is linked (or copied) to the same location there, so the
/// written model loads; a different file already at that place is an error.
static LogicalResult placeExternalData(const onnx::ModelProto &model, llvm::StringRef input,
                                       llvm::StringRef output, std::string &error) {
  std::set<std::string> locations;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      for (const onnx::StringStringEntryProto &entry : tensor.external_data())
        if (entry.key() == "location")
          locations.insert(entry.value());
  if (locations.empty())
    return success();
  auto folderOf = [](llvm::StringRef path) {
    llvm::SmallString<256> folder(llvm::sys::path::parent_path(path));
    if (folder.empty())
      folder = ".";
    return folder;
  };
  llvm::SmallString<256> from = folderOf(input), to = folderOf(output), realFrom, realTo;
  if (llvm::sys::fs::real_path(from, realFrom) || llvm::sys::fs::real_path(to, realTo)) {
    error = "cannot write '" + output.str() + "': its folder does not exist";
    return failure();
  }
  if (realFrom == realTo)
    return success();
  for (const std::string &location : locations) {
    llvm::SmallString<256> source(from), target(to);
    llvm::sys::path::append(source, location);
    llvm::sys::path::append(target, location);
    if (llvm::sys::fs::exists(target)) {
      if (llvm::sys::fs::equivalent(source, target))
        continue;
      auto a = llvm::MemoryBuffer::getFile(source, false, false);
      auto b = llvm::MemoryBuffer::getFile(target, false, false);
      if (a && b && (*a)->getBuffer() == (*b)->getBuffer())
        continue;
      error = "cannot write '" + output.str() + "': '" + target.str().str() +
              "' exists and differs from the model's external data '" + location +
              "'; write the model with the plan to another folder";
      return failure();
    }
    std::error_code ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(target));
    if (!ec && llvm::sys::fs::create_hard_link(source, target)) {
      std::string temporary = (target + ".tmp").str();
      ec = llvm::sys::fs::copy_file(source, temporary);
      if (!ec)
        ec = llvm::sys::fs::rename(temporary, target);
      if (ec)
        llvm::sys::fs::remove(temporary);
    }
    if (ec) {
      error = "cannot copy the external data '" + location + "' next to '" + output.str() +
              "': " + ec.message();
      return failure();
    }
  }
  return success();
}

LogicalResult pipe::onnx_import::writeOnnxWithStages(llvm::StringRef input, llvm::StringRef output,
                                                const std::map<std::string, int> &stageOf,
                                                llvm::StringRef planSummary, std::string &error) {
  std::ifstream in(input.str(), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!in || !model.ParseFromString(bytes.str())) {
    error = "cannot read '" + input.str() + "' as an ONNX model";
    return failure();
  }
  // NodeProto.metadata_props is field 9 (ONNX IR version 10); the onnx
  // headers here predate it, so it is written as a known-layout unknown field.
  constexpr int kNodeMetadataProps = 9;
  auto annotate = [&](onnx::NodeProto &node, const char *key, const std::string &value) {
    onnx::StringStringEntryProto entry;
    entry.set_key(key);
    entry.set_value(value);
    node.mutable_unknown_fields()->AddLengthDelimited(kNodeMetadataProps,
                                                      entry.SerializeAsString());
  };
  for (auto [index, node] : llvm::enumerate(*model.mutable_graph()->mutable_node())) {
    // A control-flow node's unrolled ops are named `<node>/<branch or
    // iteration>/...` and may lie on several stages: the node gets the first
    // as `pipe.stage` and all of them as `pipe.stages`.
    std::string name = nodeDisplayName(node.name(), node.op_type(), index);
    std::set<int> stages;
    if (auto it = stageOf.find(name); it != stageOf.end())
      stages.insert(it->second);
    const std::string scope = name + "/";
    for (auto it = stageOf.lower_bound(scope);
         it != stageOf.end() && llvm::StringRef(it->first).starts_with(scope); ++it)
      stages.insert(it->second);
    if (stages.empty())
      continue;
    annotate(node, "pipe.stage", std::to_string(*stages.begin()));
    if (stages.size() > 1) {
      std::string list;
      for (int stage : stages)
        list += (list.empty() ? "" : ",") + std::to_string(stage);
      annotate(node, "pipe.stages", list);
    }
  }
  auto *prop = model.add_metadata_props();
  prop->set_key("pipe.plan");
  prop->set_value(planSummary.str());
  if (failed(placeExternalData(model, input, output, error)))
    return failure();
  // Written beside the target and renamed over it: no partial model is left.
  std::string temporary = (output + ".tmp").str();
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
      llvm::sys::fs::remove(temporary);
      error = "cannot write '" + output.str() + "'";
      return failure();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temporary, output)) {
    llvm::sys::fs::remove(temporary);
    error = "cannot write '" + output.str() + "': " + ec.message();
    return failure();
  }
  return success();
}
