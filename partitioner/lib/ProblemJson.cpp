// Problem JSON reader/writer (format in docs/partitioner.md).
#include "partitioner/ProblemJson.h"
#include "partitioner/Error.h"

#include <nlohmann/json.hpp>

namespace partitioner {

using nlohmann::json;

namespace {

double number(const json &object, const char *key, double fallback, const std::string &where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null())
    return fallback;
  if (it->is_number())
    return it->get<double>();
  if (it->is_string())
    return parseBytes(it->get<std::string>());
  throw Error(where + ": '" + key + "' must be a number");
}

double bytesField(const json &object, const char *key, double fallback, const std::string &where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null())
    return fallback;
  if (it->is_number())
    return it->get<double>();
  if (it->is_string())
    return parseBytes(it->get<std::string>());
  throw Error(where + ": '" + key + "' must be a number of bytes or a string like \"16GB\"");
}

LinkSpec readLink(const json &object, LinkSpec fallback, const std::string &where) {
  if (!object.is_object())
    throw Error(where + " must be an object");
  LinkSpec link = fallback;
  auto it = object.find("bandwidth_bytes_per_s");
  if (it != object.end()) {
    if (it->is_string())
      link.bandwidthBytesPerSecond = parseBandwidth(it->get<std::string>());
    else if (it->is_number())
      link.bandwidthBytesPerSecond = it->get<double>();
    else
      throw Error(where + ": bandwidth_bytes_per_s must be a number or a string");
  }
  link.latencyMs = number(object, "latency_ms", link.latencyMs, where);
  return link;
}

json writeLink(const LinkSpec &link) {
  json out;
  if (link.bandwidthBytesPerSecond == kInfinity)
    out["bandwidth_bytes_per_s"] = "inf";
  else
    out["bandwidth_bytes_per_s"] = link.bandwidthBytesPerSecond;
  out["latency_ms"] = link.latencyMs;
  return out;
}

} // namespace

Problem readProblemJson(std::istream &in, const std::string &name) {
  json document;
  try {
    in >> document;
  } catch (const json::exception &error) {
    throw Error(name + ": not valid JSON: " + error.what());
  }
  if (!document.is_object())
    throw Error(name + ": the problem must be a JSON object");
  Problem problem;
  problem.name = document.value("name", name);
  try {
    auto layers = document.find("layers");
    if (layers == document.end() || !layers->is_array())
      throw Error(name + ": 'layers' (an array) is required");
    for (size_t i = 0; i < layers->size(); ++i) {
      const json &item = (*layers)[i];
      const std::string where = name + ": layers[" + std::to_string(i) + "]";
      if (!item.is_object())
        throw Error(where + " must be an object");
      Layer layer;
      layer.name = item.value("name", "layer" + std::to_string(i));
      if (item.contains("node_ids"))
        layer.nodeIds = item.at("node_ids").get<std::vector<std::string>>();
      layer.forwardMs = number(item, "forward_ms", 0, where);
      layer.backwardMs = number(item, "backward_ms", 0, where);
      layer.backwardWeightMs = number(item, "backward_weight_ms", -1, where);
      layer.parameterBytes = bytesField(item, "parameter_bytes", 0, where);
      layer.savedBytes = bytesField(item, "saved_bytes", 0, where);
      layer.outputBytes = bytesField(item, "output_bytes", 0, where);
      problem.layers.push_back(layer);
    }
    if (document.contains("tensors")) {
      const json &tensors = document.at("tensors");
      if (!tensors.is_array())
        throw Error(name + ": 'tensors' must be an array");
      for (size_t i = 0; i < tensors.size(); ++i) {
        const json &item = tensors[i];
        const std::string where = name + ": tensors[" + std::to_string(i) + "]";
        Tensor tensor;
        if (!item.contains("producer") || !item.contains("consumers"))
          throw Error(where + " needs 'producer' and 'consumers'");
        tensor.producer = item.at("producer").get<int>();
        tensor.consumers = item.at("consumers").get<std::vector<int>>();
        tensor.bytes = bytesField(item, "bytes", 0, where);
        problem.tensors.push_back(tensor);
      }
    }
    if (document.contains("platform")) {
      const json &p = document.at("platform");
      const std::string where = name + ": platform";
      if (!p.is_object())
        throw Error(where + " must be an object");
      problem.platform.gpus = p.value("gpus", problem.platform.gpus);
      problem.platform.memoryBytesPerGpu =
          bytesField(p, "memory_bytes_per_gpu", problem.platform.memoryBytesPerGpu, where);
      problem.platform.gpusPerNode = p.value("gpus_per_node", problem.platform.gpusPerNode);
      if (p.contains("intra_node"))
        problem.platform.intraNode = readLink(p.at("intra_node"), problem.platform.intraNode,
                                              where + ".intra_node");
      if (p.contains("inter_node"))
        problem.platform.interNode = readLink(p.at("inter_node"), problem.platform.interNode,
                                              where + ".inter_node");
      if (p.contains("speed"))
        problem.platform.speed = p.at("speed").get<std::vector<double>>();
    }
    if (document.contains("training")) {
      const json &t = document.at("training");
      const std::string where = name + ": training";
      if (!t.is_object())
        throw Error(where + " must be an object");
      problem.training.microbatches = t.value("microbatches", problem.training.microbatches);
      problem.training.stateMultiplier =
          number(t, "state_multiplier", problem.training.stateMultiplier, where);
      if (t.contains("schedule"))
        problem.training.schedule = parseScheduleKind(t.at("schedule").get<std::string>());
      if (t.contains("weight_policy"))
        problem.training.weights = parseWeightPolicy(t.at("weight_policy").get<std::string>());
      problem.training.communicationBuffers =
          t.value("communication_buffers", problem.training.communicationBuffers);
      problem.training.interleaveChunks = t.value("interleave_chunks", problem.training.interleaveChunks);
    }
  } catch (const json::exception &error) {
    throw Error(name + ": " + error.what());
  }
  problem.finalize();
  return problem;
}

void writeProblemJson(const Problem &problem, std::ostream &out) {
  json document;
  document["name"] = problem.name;
  json layers = json::array();
  for (const Layer &layer : problem.layers) {
    json item;
    item["name"] = layer.name;
    item["node_ids"] = layer.nodeIds;
    item["forward_ms"] = layer.forwardMs;
    item["backward_ms"] = layer.backwardMs;
    if (layer.backwardWeightMs >= 0)
      item["backward_weight_ms"] = layer.backwardWeightMs;
    item["parameter_bytes"] = layer.parameterBytes;
    item["saved_bytes"] = layer.savedBytes;
    item["output_bytes"] = layer.outputBytes;
    layers.push_back(item);
  }
  document["layers"] = layers;
  json tensors = json::array();
  for (const Tensor &tensor : problem.tensors)
    tensors.push_back({{"producer", tensor.producer},
                       {"consumers", tensor.consumers},
                       {"bytes", tensor.bytes}});
  document["tensors"] = tensors;
  json platform;
  platform["gpus"] = problem.platform.gpus;
  if (problem.platform.memoryBytesPerGpu == kInfinity)
    platform["memory_bytes_per_gpu"] = "inf";
  else
    platform["memory_bytes_per_gpu"] = problem.platform.memoryBytesPerGpu;
  platform["gpus_per_node"] = problem.platform.gpusPerNode;
  platform["intra_node"] = writeLink(problem.platform.intraNode);
  platform["inter_node"] = writeLink(problem.platform.interNode);
  if (!problem.platform.speed.empty())
    platform["speed"] = problem.platform.speed;
  document["platform"] = platform;
  json training;
  training["microbatches"] = problem.training.microbatches;
  training["state_multiplier"] = problem.training.stateMultiplier;
  training["schedule"] = toString(problem.training.schedule);
  training["weight_policy"] = toString(problem.training.weights);
  training["communication_buffers"] = problem.training.communicationBuffers;
  training["interleave_chunks"] = problem.training.interleaveChunks;
  document["training"] = training;
  out << document.dump(1) << "\n";
}

} // namespace partitioner
