//===- ProgramInfo.cpp - reading OUT/program.json --------------------------===//
//
// The schema is docs/runtime-abi.md's "out/program.json". The reader is strict
// (support/'s JsonFields): an unknown key, a value of the wrong type, a decimal
// or out-of-range integer, or a null is an error naming the file and the field,
// so a damaged or hand-edited file stops before anything is compiled instead of
// running with a converted value.
//
//===----------------------------------------------------------------------===//
#include "ProgramInfo.h"

#include "pipe_runtime.h"

#include "pipe-support/JsonFields.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

using json = nlohmann::json;

namespace piperun {

namespace {

using Fields = pipe_support::JsonFields<std::runtime_error>;

// The partitioner's limits (partitioner/include/partitioner/Problem.h): a
// program.json beyond them was not written by pipe-opt.
constexpr int64_t kMaxMicrobatches = 16384;
constexpr int64_t kMaxStages = 4096;
// Dims of one tensor and its element count: far beyond any model, small enough
// that byte counts cannot overflow.
constexpr int64_t kMaxRank = 16, kMaxDim = int64_t{1} << 40;
constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

int32_t dtypeOf(const std::string &name, const std::string &where) {
  static const std::map<std::string, int32_t> names = {
      {"f32", PIPE_F32}, {"f64", PIPE_F64}, {"f16", PIPE_F16},  {"bf16", PIPE_BF16},
      {"i64", PIPE_I64}, {"i32", PIPE_I32}, {"bool", PIPE_BOOL}};
  auto it = names.find(name);
  if (it == names.end())
    throw std::runtime_error(where + " is '" + name +
                             "', not one of f32, f64, f16, bf16, i64, i32, bool");
  return it->second;
}

std::vector<int64_t> shapeOf(const Fields &object) {
  std::vector<int64_t> shape = object.integers("shape", 0, kMaxDim);
  if (static_cast<int64_t>(shape.size()) > kMaxRank)
    throw std::runtime_error(object.field("shape") + " has " + std::to_string(shape.size()) +
                             " dims, more than " + std::to_string(kMaxRank));
  double elements = 1;
  for (int64_t d : shape)
    elements *= static_cast<double>(d);
  if (elements > static_cast<double>(kMaxDim))
    throw std::runtime_error(object.field("shape") + " has more than 2^40 elements");
  return shape;
}

std::vector<DataArrayInfo> arraysOf(const Fields &document, const char *key) {
  std::vector<DataArrayInfo> arrays;
  if (!document.has(key))
    return arrays;
  const json &list = document.array(key);
  std::set<int32_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    Fields entry(list[i], document.field(key) + "[" + std::to_string(i) + "]",
                 {"index", "name", "dtype", "shape", "range"});
    DataArrayInfo array;
    array.index = static_cast<int32_t>(entry.integer("index", -1, 0, 1 << 20));
    if (array.index < 0)
      throw std::runtime_error(entry.field("index") + " is missing");
    if (!seen.insert(array.index).second)
      throw std::runtime_error(entry.field("index") + " " + std::to_string(array.index) +
                               " appears twice");
    array.name = entry.string("name", "");
    array.dtype = dtypeOf(entry.string("dtype", ""), entry.field("dtype"));
    array.shape = shapeOf(entry);
    array.range = entry.integer("range", 0, 0, kMaxDim);
    arrays.push_back(array);
  }
  return arrays;
}

std::map<std::string, double> memoryOf(const Fields &rank) {
  std::map<std::string, double> memory;
  if (!rank.has("memory"))
    return memory;
  Fields categories(rank.at("memory"), rank.field("memory"),
                    {"parameters", "gradients", "optimizer", "saved", "comm", "workspace",
                     "total"});
  for (const char *category :
       {"parameters", "gradients", "optimizer", "saved", "comm", "workspace", "total"})
    if (categories.has(category)) {
      double bytes = categories.number(category, 0);
      if (bytes < 0)
        throw std::runtime_error(categories.field(category) + " is negative");
      memory[category] = bytes;
    }
  return memory;
}

void readPredicted(const Fields &document, ProgramInfo &info) {
  if (!document.has("predicted"))
    return;
  Fields predicted(document.at("predicted"), document.field("predicted"),
                   {"period_ms", "iteration_ms", "target", "ranks"});
  auto nonNegative = [&](const char *key) -> std::optional<double> {
    if (!predicted.has(key))
      return std::nullopt;
    double value = predicted.number(key, 0);
    if (value < 0)
      throw std::runtime_error(predicted.field(key) + " is negative");
    return value;
  };
  info.predictedPeriodMs = nonNegative("period_ms");
  info.predictedIterationMs = nonNegative("iteration_ms");
  info.predictedTarget = predicted.string("target", "");
  if (!predicted.has("ranks"))
    return;
  const json &ranks = predicted.array("ranks");
  for (size_t i = 0; i < ranks.size(); ++i) {
    Fields rank(ranks[i], predicted.field("ranks") + "[" + std::to_string(i) + "]",
                {"rank", "stages", "memory", "sources", "program_workspace", "program_saved",
                 "program_received_peak", "all_reduce_ms", "all_reduce_message_bytes"});
    int64_t index = rank.integer("rank", -1, 0, info.ranks - 1);
    if (index < 0)
      throw std::runtime_error(rank.field("rank") + " is missing");
    if (info.predictedMemory.count(static_cast<int>(index)))
      throw std::runtime_error(rank.field("rank") + " " + std::to_string(index) +
                               " appears twice");
    if (rank.has("stages"))
      (void)rank.integers("stages", 0, kMaxStages - 1);
    if (rank.has("sources"))
      (void)Fields(rank.at("sources"), rank.field("sources"));
    (void)rank.number("program_workspace", 0);
    (void)rank.number("program_saved", 0);
    (void)rank.number("program_received_peak", 0);
    info.predictedMemory[static_cast<int>(index)] = memoryOf(rank);
    if (rank.has("all_reduce_ms")) {
      const double ms = rank.number("all_reduce_ms", 0);
      if (ms < 0)
        throw std::runtime_error(rank.field("all_reduce_ms") + " is negative");
      info.predictedAllReduceMs[static_cast<int>(index)] = ms;
    }
    if (rank.has("all_reduce_message_bytes")) {
      const double bytes = rank.number("all_reduce_message_bytes", 0);
      if (bytes < 0)
        throw std::runtime_error(rank.field("all_reduce_message_bytes") + " is negative");
      info.predictedAllReduceMessageBytes[static_cast<int>(index)] = bytes;
    }
  }
}

} // namespace

ProgramInfo parseProgramInfo(const std::string &text, const std::string &file,
                             const std::string &directory) {
  json document;
  try {
    document = json::parse(text);
  } catch (const json::exception &e) {
    throw std::runtime_error(file + ": not valid JSON (" + e.what() + ")");
  }
  ProgramInfo info;
  info.directory = directory;
  try {
    const Fields root = Fields::document(
        document, file,
        {"schema_version", "model", "ranks", "stages", "microbatches", "replicas",
         "replica_layout", "all_reduce_bucket_bytes", "micro_batch_size",
         "rank_of_stage", "loss", "optimizer", "inputs", "labels", "output_grads", "parameters",
         "predicted"});
    int64_t schema = root.integer("schema_version", 1, 0, kMaxInt32);
    if (schema != 1)
      throw std::runtime_error(file + ": schema_version " + std::to_string(schema) +
                               " (this pipe-run reads version 1)");
    if (!root.has("ranks"))
      throw std::runtime_error(root.field("ranks") + " is missing");
    info.ranks = static_cast<int>(root.integer("ranks", 0, 1, kMaxRanks));
    info.microbatches = static_cast<int>(root.integer("microbatches", 1, 1, kMaxMicrobatches));
    info.replicas = static_cast<int>(root.integer("replicas", 1, 1, kMaxRanks / info.ranks));
    info.allReduceBucketBytes =
        root.integer("all_reduce_bucket_bytes", 0, 1, int64_t(1) << 50);
    info.replicaLayout = root.string("replica_layout", "pipeline-major");
    if (info.replicaLayout != "pipeline-major" && info.replicaLayout != "stage-major")
      throw std::runtime_error(root.field("replica_layout") + " is '" + info.replicaLayout +
                               "', expected pipeline-major or stage-major");
    info.microBatchSize = root.integer("micro_batch_size", 1, 0, kMaxDim);
    // A plan may leave GPUs idle (fewer stages than ranks): their programs
    // only take part in the optimizer step.
    int64_t stages = root.integer("stages", info.ranks, 1, kMaxStages);
    if (root.has("rank_of_stage")) {
      std::vector<int64_t> rankOfStage = root.integers("rank_of_stage", 0, info.ranks - 1);
      if (static_cast<int64_t>(rankOfStage.size()) != stages)
        throw std::runtime_error(root.field("rank_of_stage") + " has " +
                                 std::to_string(rankOfStage.size()) + " entries for " +
                                 std::to_string(stages) + " stages");
    }
    std::string model = root.string("model", "");
    if (model.find('\0') != std::string::npos)
      throw std::runtime_error(root.field("model") + " contains a NUL byte");
    if (!model.empty() && model[0] != '/')
      model = directory + "/" + model;
    info.model = model;
    // The loss's name documents what the programs compute (pipe-opt writes
    // none, cross_entropy or mse; hand-written programs name their own).
    info.loss = root.string("loss", "none");
    if (info.loss == "none")
      info.loss.clear();
    if (root.has("optimizer")) {
      Fields optimizer(root.at("optimizer"), root.field("optimizer"),
                       {"kind", "lr", "momentum", "beta1", "beta2", "eps", "weight_decay"});
      std::string kind = optimizer.string("kind", "sgd");
      if (kind != "sgd" && kind != "momentum" && kind != "adam" && kind != "adamw")
        throw std::runtime_error(optimizer.field("kind") + " is '" + kind +
                                 "', not one of sgd, momentum, adam, adamw");
      for (const char *key : {"lr", "momentum", "beta1", "beta2", "eps", "weight_decay"})
        if (optimizer.number(key, 0) < 0)
          throw std::runtime_error(optimizer.field(key) + " is negative");
    }
    info.inputs = arraysOf(root, "inputs");
    info.labels = arraysOf(root, "labels");
    info.outputGrads = arraysOf(root, "output_grads");
    if (root.has("parameters")) {
      const json &list = root.array("parameters");
      std::set<int64_t> ids;
      for (size_t i = 0; i < list.size(); ++i) {
        Fields entry(list[i], root.field("parameters") + "[" + std::to_string(i) + "]",
                     {"id", "name", "dtype", "shape", "trainable", "owner_rank", "ranks"});
        ParameterInfo parameter;
        parameter.id = static_cast<int32_t>(entry.integer("id", -1, 0, kMaxInt32));
        if (parameter.id < 0)
          throw std::runtime_error(entry.field("id") + " is missing");
        if (!ids.insert(parameter.id).second)
          throw std::runtime_error(entry.field("id") + " " + std::to_string(parameter.id) +
                                   " appears twice");
        parameter.name = entry.string("name", "");
        parameter.ownerRank = static_cast<int32_t>(entry.integer("owner_rank", 0, 0, info.ranks - 1));
        if (entry.has("dtype"))
          (void)dtypeOf(entry.string("dtype", ""), entry.field("dtype"));
        if (entry.has("shape"))
          (void)shapeOf(entry);
        (void)entry.boolean("trainable", true);
        if (entry.has("ranks"))
          (void)entry.integers("ranks", 0, info.ranks - 1);
        info.parameters.push_back(parameter);
      }
    }
    readPredicted(root, info);
  } catch (const json::exception &e) {
    // JsonFields checks every type first; this is a last line of defence.
    throw std::runtime_error(file + ": " + e.what());
  }
  return info;
}

ProgramInfo readProgramInfo(const std::string &directory) {
  const std::string file = directory + "/program.json";
  std::ifstream in(file, std::ios::binary);
  if (!in)
    throw std::runtime_error(file + ": no such file (is " + directory +
                             " a pipe-opt output directory?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parseProgramInfo(text.str(), file, directory);
}

} // namespace piperun
