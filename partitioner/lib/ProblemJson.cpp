// Problem JSON reader/writer (format in docs/partitioner.md).
#include "partitioner/Problem.h"
#include "partitioner/Error.h"

#include "JsonFields.h"

#include <nlohmann/json.hpp>

#include <iterator>

namespace partitioner {

using nlohmann::json;

namespace {
// The public parsers return errors as values; the reader throws them.
double bytesOf(const std::string &text) { return orThrow(parseBytes(text)); }
double bandwidthOf(const std::string &text) { return orThrow(parseBandwidth(text)); }


LinkSpec readLink(const JsonFields &parent, const char *key, LinkSpec fallback) {
  if (!parent.has(key))
    return fallback;
  JsonFields object(parent.at(key), parent.field(key), {"bandwidth_bytes_per_s", "latency_ms"});
  LinkSpec link = fallback;
  link.bandwidthBytesPerSecond =
      object.bytes("bandwidth_bytes_per_s", link.bandwidthBytesPerSecond, bandwidthOf);
  link.latencyMs = object.number("latency_ms", link.latencyMs);
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

Problem readDocument(const json &document, const std::string &name) {
  // `settings` is what pipe-opt's main job planned under (dtype, target, ...):
  // a record for the reader, not an input.
  const JsonFields root = JsonFields::document(
      document, name,
      {"name", "layers", "tensors", "shared_saved", "shared_parameters", "platform", "training", "settings"});
  Problem problem;
  problem.name = root.string("name", name);
  if (!root.has("layers"))
    throw Error(name + ": 'layers' (an array) is required");
  const json &layers = root.array("layers");
  if (layers.size() > kMaxLayers)
    throw Error(name + ": " + std::to_string(layers.size()) + " layers, more than the limit of " +
                std::to_string(kMaxLayers));
  const int64_t lastLayer = static_cast<int64_t>(layers.size()) - 1;
  for (size_t i = 0; i < layers.size(); ++i) {
    JsonFields item(layers[i], name + ": layers[" + std::to_string(i) + "]",
                    {"name", "node_ids", "forward_ms", "backward_ms", "backward_weight_ms",
                     "parameter_bytes", "saved_bytes", "output_bytes", "input_bytes",
                     "workspace_bytes"});
    Layer layer;
    layer.name = item.string("name", "layer" + std::to_string(i));
    if (item.has("node_ids"))
      layer.nodeIds = item.strings("node_ids");
    layer.forwardMs = item.number("forward_ms", 0);
    layer.backwardMs = item.number("backward_ms", 0);
    layer.backwardWeightMs = item.number("backward_weight_ms", -1);
    if (item.has("backward_weight_ms") && layer.backwardWeightMs < 0)
      throw Error(item.field("backward_weight_ms") + " must be non-negative");
    layer.parameterBytes = item.bytes("parameter_bytes", 0, bytesOf);
    layer.savedBytes = item.bytes("saved_bytes", 0, bytesOf);
    layer.inputBytes = item.bytes("input_bytes", 0, bytesOf);
    layer.workspaceBytes = item.bytes("workspace_bytes", 0, bytesOf);
    layer.outputBytes = item.bytes("output_bytes", 0, bytesOf);
    problem.layers.push_back(layer);
  }
  if (root.has("tensors")) {
    const json &tensors = root.array("tensors");
    for (size_t i = 0; i < tensors.size(); ++i) {
      JsonFields item(tensors[i], name + ": tensors[" + std::to_string(i) + "]",
                      {"producer", "consumers", "bytes"});
      if (!item.has("producer") || !item.has("consumers"))
        throw Error(item.location() + " needs 'producer' and 'consumers'");
      Tensor tensor;
      tensor.producer = static_cast<int>(item.integer("producer", 0, 0, lastLayer));
      for (int64_t consumer : item.integers("consumers", 0, lastLayer))
        tensor.consumers.push_back(static_cast<int>(consumer));
      tensor.bytes = item.bytes("bytes", 0, bytesOf);
      problem.tensors.push_back(tensor);
    }
  }
  // Lists of {layers, bytes}: shared saved values and shared parameters.
  auto readShared = [&](const char *key, auto &list) {
    if (!root.has(key))
      return;
    const json &shared = root.array(key);
    for (size_t i = 0; i < shared.size(); ++i) {
      JsonFields item(shared[i], name + ": " + key + "[" + std::to_string(i) + "]",
                      {"layers", "bytes"});
      if (!item.has("layers"))
        throw Error(item.location() + " needs 'layers'");
      typename std::decay_t<decltype(list)>::value_type value;
      for (int64_t layer : item.integers("layers", 0, lastLayer))
        value.layers.push_back(static_cast<int>(layer));
      value.bytes = item.bytes("bytes", 0, bytesOf);
      list.push_back(value);
    }
  };
  readShared("shared_saved", problem.sharedSaved);
  readShared("shared_parameters", problem.sharedParameters);
  if (root.has("platform")) {
    JsonFields p(root.at("platform"), name + ": platform",
                 {"gpus", "memory_bytes_per_gpu", "gpus_per_node", "intra_node", "inter_node",
                  "speed"});
    Platform &platform = problem.platform;
    platform.gpus = static_cast<int>(p.integer("gpus", platform.gpus, 1, kMaxGpus));
    platform.memoryBytesPerGpu =
        p.bytes("memory_bytes_per_gpu", platform.memoryBytesPerGpu, bytesOf);
    platform.gpusPerNode =
        static_cast<int>(p.integer("gpus_per_node", platform.gpusPerNode, 1, kMaxGpus));
    platform.intraNode = readLink(p, "intra_node", platform.intraNode);
    platform.interNode = readLink(p, "inter_node", platform.interNode);
    if (p.has("speed"))
      platform.speed = p.numbers("speed");
  }
  if (root.has("training")) {
    JsonFields t(root.at("training"), name + ": training",
                 {"microbatches", "state_multiplier", "schedule", "weight_policy",
                  "communication_buffers", "messages_from_timeline", "interleave_chunks",
                  "recompute"});
    TrainingSettings &training = problem.training;
    training.microbatches =
        static_cast<int>(t.integer("microbatches", training.microbatches, 1, kMaxMicrobatches));
    training.stateMultiplier = t.number("state_multiplier", training.stateMultiplier);
    if (t.has("schedule"))
      training.schedule = orThrow(parseScheduleKind(t.string("schedule", "")));
    if (t.has("weight_policy"))
      training.weights = orThrow(parseWeightPolicy(t.string("weight_policy", "")));
    training.communicationBuffers =
        t.boolean("communication_buffers", training.communicationBuffers);
    training.messagesFromTimeline =
        t.boolean("messages_from_timeline", training.messagesFromTimeline);
    training.interleaveChunks = static_cast<int>(
        t.integer("interleave_chunks", training.interleaveChunks, 1, kMaxInterleaveChunks));
    if (t.has("recompute"))
      training.recompute = orThrow(parseRecomputePolicy(t.string("recompute", "")));
  }
  return problem;
}

} // namespace

namespace {
Problem parseProblemJson(std::istream &in, const std::string &name) {
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  json document;
  try {
    document = json::parse(text); // strict: trailing bytes are an error
  } catch (const json::exception &error) {
    throw Error(name + ": not valid JSON: " + error.what());
  }
  Problem problem;
  try {
    problem = readDocument(document, name);
  } catch (const json::exception &error) {
    // JsonFields checks every type first; this is a last line of defence.
    throw Error(name + ": " + error.what());
  }
  orThrow(problem.finalize());
  return problem;
}
} // namespace

Expected<Problem> readProblemJson(std::istream &in, const std::string &name) {
  return catchErrors([&] { return parseProblemJson(in, name); });
}

void writeProblemJson(const Problem &problem, std::ostream &out,
                      const std::vector<std::pair<std::string, std::string>> &extraFields) {
  json document;
  for (const auto &[key, text] : extraFields) {
    try {
      document[key] = json::parse(text);
    } catch (const json::exception &error) {
      throw Error("problem JSON field '" + key + "' is not JSON: " + error.what());
    }
  }
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
    if (layer.inputBytes > 0)
      item["input_bytes"] = layer.inputBytes;
    if (layer.workspaceBytes > 0)
      item["workspace_bytes"] = layer.workspaceBytes;
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
  auto writeShared = [&](const char *key, const auto &list) {
    if (list.empty())
      return;
    json shared = json::array();
    for (const auto &value : list)
      shared.push_back({{"layers", value.layers}, {"bytes", value.bytes}});
    document[key] = shared;
  };
  writeShared("shared_saved", problem.sharedSaved);
  writeShared("shared_parameters", problem.sharedParameters);
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
  training["messages_from_timeline"] = problem.training.messagesFromTimeline;
  training["interleave_chunks"] = problem.training.interleaveChunks;
  training["recompute"] = toString(problem.training.recompute);
  document["training"] = training;
  out << document.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
}

} // namespace partitioner
