//===- ProgramInfo.cpp - reading OUT/program.json --------------------------===//
//
// The schema is docs/runtime-abi.md's "out/program.json"; every field the run
// needs is checked here so that a bad file stops before anything is compiled.
//
//===----------------------------------------------------------------------===//
#include "ProgramInfo.h"

#include "pipe_runtime.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <stdexcept>

using json = nlohmann::json;

namespace piperun {

namespace {

int32_t dtypeOf(const std::string &name, const std::string &where) {
  static const std::map<std::string, int32_t> names = {
      {"f32", PIPE_F32}, {"f64", PIPE_F64}, {"f16", PIPE_F16},  {"bf16", PIPE_BF16},
      {"i64", PIPE_I64}, {"i32", PIPE_I32}, {"bool", PIPE_BOOL}};
  auto it = names.find(name);
  if (it == names.end())
    throw std::runtime_error(where + ": unknown dtype '" + name + "'");
  return it->second;
}

std::vector<DataArrayInfo> arraysOf(const json &document, const char *key,
                                    const std::string &file) {
  std::vector<DataArrayInfo> arrays;
  if (!document.contains(key))
    return arrays;
  for (const json &entry : document.at(key)) {
    DataArrayInfo array;
    array.index = entry.at("index").get<int32_t>();
    array.name = entry.value("name", "");
    std::string where = file + ": " + key + "[" + std::to_string(array.index) + "]";
    array.dtype = dtypeOf(entry.at("dtype").get<std::string>(), where);
    array.shape = entry.at("shape").get<std::vector<int64_t>>();
    array.range = entry.value("range", int64_t{0});
    arrays.push_back(array);
  }
  return arrays;
}

} // namespace

ProgramInfo readProgramInfo(const std::string &directory) {
  const std::string file = directory + "/program.json";
  std::ifstream in(file);
  if (!in)
    throw std::runtime_error(file + ": no such file (is " + directory +
                             " a pipe-opt output directory?)");
  json document;
  try {
    document = json::parse(in);
  } catch (const json::exception &e) {
    throw std::runtime_error(file + ": not valid JSON (" + e.what() + ")");
  }
  ProgramInfo info;
  info.directory = directory;
  try {
    int schema = document.value("schema_version", 1);
    if (schema != 1)
      throw std::runtime_error(file + ": schema_version " + std::to_string(schema) +
                               " (this pipe-run reads version 1)");
    // The partitioner's limits (partitioner/include/partitioner/Problem.h):
    // a program.json beyond them was not written by pipe-opt.
    constexpr int kMaxRanks = 4096, kMaxMicrobatches = 16384;
    info.ranks = document.at("ranks").get<int>();
    if (info.ranks < 1 || info.ranks > kMaxRanks)
      throw std::runtime_error(file + ": ranks is " + std::to_string(info.ranks) +
                               ", not in [1, " + std::to_string(kMaxRanks) + "]");
    info.microbatches = document.value("microbatches", 1);
    info.microBatchSize = document.value("micro_batch_size", int64_t{1});
    if (info.microbatches < 1 || info.microbatches > kMaxMicrobatches)
      throw std::runtime_error(file + ": microbatches is " + std::to_string(info.microbatches) +
                               ", not in [1, " + std::to_string(kMaxMicrobatches) + "]");
    std::string model = document.value("model", "");
    if (!model.empty() && model[0] != '/')
      model = directory + "/" + model;
    info.model = model;
    if (document.contains("loss") && document.at("loss").is_string())
      info.loss = document.at("loss").get<std::string>();
    if (info.loss == "none")
      info.loss.clear();
    info.inputs = arraysOf(document, "inputs", file);
    info.labels = arraysOf(document, "labels", file);
    info.outputGrads = arraysOf(document, "output_grads", file);
    if (document.contains("parameters"))
      for (const json &entry : document.at("parameters"))
        info.parameters.push_back({entry.at("id").get<int32_t>(),
                                   entry.at("name").get<std::string>(),
                                   entry.value("owner_rank", 0)});
    if (document.contains("predicted")) {
      const json &predicted = document.at("predicted");
      if (predicted.contains("period_ms"))
        info.predictedPeriodMs = predicted.at("period_ms").get<double>();
      if (predicted.contains("target") && predicted.at("target").is_string())
        info.predictedTarget = predicted.at("target").get<std::string>();
      if (predicted.contains("iteration_ms"))
        info.predictedIterationMs = predicted.at("iteration_ms").get<double>();
      if (predicted.contains("ranks"))
        for (const json &rank : predicted.at("ranks")) {
          auto &memory = info.predictedMemory[rank.at("rank").get<int>()];
          if (rank.contains("memory"))
            for (const auto &[category, bytes] : rank.at("memory").items())
              memory[category] = bytes.get<double>();
        }
    }
  } catch (const json::exception &e) {
    throw std::runtime_error(file + ": " + e.what());
  }
  return info;
}

} // namespace piperun
