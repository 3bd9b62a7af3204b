// Validation and defaults of the planning problem, plus enum/size parsing.
#include "partitioner/Problem.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_map>

namespace partitioner {

namespace {
std::string layerLabel(const Problem &problem, int index) {
  const Layer &layer = problem.layers[static_cast<size_t>(index)];
  std::ostringstream out;
  out << "layer " << index << " ('" << layer.name << "')";
  return out.str();
}

void requireFiniteNonNegative(double value, const std::string &what,
                              const std::string &where) {
  if (!std::isfinite(value) || value < 0)
    throw Error(where + ": " + what + " must be a finite non-negative number, got " +
                std::to_string(value));
}
} // namespace

bool isValidUtf8(const std::string &text) {
  // RFC 3629, section 4: the well-formed byte sequences.
  const auto *p = reinterpret_cast<const unsigned char *>(text.data());
  const auto *end = p + text.size();
  while (p < end) {
    const unsigned char c = *p;
    int length;
    unsigned char low = 0x80, high = 0xBF; // range of the second byte
    if (c < 0x80) {
      ++p;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0)
        low = 0xA0; // no overlong forms
      if (c == 0xED)
        high = 0x9F; // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0)
        low = 0x90;
      if (c == 0xF4)
        high = 0x8F; // nothing past U+10FFFF
    } else {
      return false;
    }
    if (end - p < length || p[1] < low || p[1] > high)
      return false;
    for (int k = 2; k < length; ++k)
      if (p[k] < 0x80 || p[k] > 0xBF)
        return false;
    p += length;
  }
  return true;
}

std::string printableName(const std::string &text) {
  static const char digits[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

namespace {
/// Problem::finalize, throwing Error.
void finalizeProblem(Problem &problem) {
  auto &layers = problem.layers;
  auto &tensors = problem.tensors;
  auto &sharedSaved = problem.sharedSaved;
  auto &name = problem.name;
  auto &platform = problem.platform;
  auto &training = problem.training;
  if (layers.empty())
    throw Error("problem '" + name + "' has no layers");
  if (layers.size() > kMaxLayers)
    throw Error("problem '" + name + "' has " + std::to_string(layers.size()) +
                " layers, more than the limit of " + std::to_string(kMaxLayers));
  const int count = static_cast<int>(layers.size());
  for (int i = 0; i < count; ++i) {
    Layer &layer = layers[static_cast<size_t>(i)];
    if (layer.name.empty())
      layer.name = "layer" + std::to_string(i);
    if (layer.nodeIds.empty())
      layer.nodeIds.push_back(layer.name);
    // Names become JSON strings and stage_of keys: they must be text.
    if (!isValidUtf8(layer.name))
      throw Error("layer " + std::to_string(i) + ": its name '" + printableName(layer.name) +
                  "' is not valid UTF-8");
    for (const std::string &id : layer.nodeIds)
      if (!isValidUtf8(id))
        throw Error("layer " + std::to_string(i) + ": node id '" + printableName(id) +
                    "' is not valid UTF-8");
    const std::string where = layerLabel(problem, i);
    requireFiniteNonNegative(layer.forwardMs, "forward time", where);
    requireFiniteNonNegative(layer.backwardMs, "backward time", where);
    requireFiniteNonNegative(layer.parameterBytes, "parameter bytes", where);
    requireFiniteNonNegative(layer.savedBytes, "saved bytes", where);
    requireFiniteNonNegative(layer.outputBytes, "output bytes", where);
    requireFiniteNonNegative(layer.inputBytes, "input bytes", where);
    requireFiniteNonNegative(layer.workspaceBytes, "workspace bytes", where);
    if (layer.backwardWeightMs > layer.backwardMs)
      throw Error(where + ": weight-gradient time exceeds the backward time");
  }
  // Node ids key a plan's stage_of: each belongs to one layer.
  std::unordered_map<std::string, int> layerOfNode;
  for (int i = 0; i < count; ++i)
    for (const std::string &id : layers[static_cast<size_t>(i)].nodeIds) {
      auto [it, inserted] = layerOfNode.emplace(id, i);
      if (!inserted && it->second != i)
        throw Error("node id '" + id + "' belongs to " + layerLabel(problem, it->second) +
                    " and " + layerLabel(problem, i));
    }
  if (tensors.empty()) {
    for (int i = 0; i + 1 < count; ++i)
      tensors.push_back(Tensor{i, {i + 1}, layers[static_cast<size_t>(i)].outputBytes});
  }
  for (size_t t = 0; t < tensors.size(); ++t) {
    Tensor &tensor = tensors[t];
    if (tensor.producer < 0 || tensor.producer >= count)
      throw Error("tensor " + std::to_string(t) + ": producer " +
                  std::to_string(tensor.producer) + " is not a layer index");
    requireFiniteNonNegative(tensor.bytes, "tensor bytes",
                             "tensor of " + layerLabel(problem, tensor.producer));
    std::sort(tensor.consumers.begin(), tensor.consumers.end());
    tensor.consumers.erase(std::unique(tensor.consumers.begin(), tensor.consumers.end()),
                           tensor.consumers.end());
    for (int consumer : tensor.consumers) {
      if (consumer < 0 || consumer >= count)
        throw Error("tensor of " + layerLabel(problem, tensor.producer) +
                    ": consumer " + std::to_string(consumer) + " is not a layer index");
      if (consumer == tensor.producer)
        throw Error("tensor of " + layerLabel(problem, tensor.producer) +
                    " is consumed by its own producer (self loop)");
    }
  }
  // Values and parameters shared by layers: sorted, distinct, two or more.
  auto checkShared = [&](std::vector<int> &sharers, double bytes, const std::string &where) {
    requireFiniteNonNegative(bytes, "bytes", where);
    std::sort(sharers.begin(), sharers.end());
    sharers.erase(std::unique(sharers.begin(), sharers.end()), sharers.end());
    if (sharers.size() < 2)
      throw Error(where + ": needs two or more distinct layers");
    for (int layer : sharers)
      if (layer < 0 || layer >= count)
        throw Error(where + ": " + std::to_string(layer) + " is not a layer index");
  };
  for (size_t v = 0; v < sharedSaved.size(); ++v)
    checkShared(sharedSaved[v].layers, sharedSaved[v].bytes,
                "shared saved value " + std::to_string(v));
  for (size_t v = 0; v < problem.sharedParameters.size(); ++v)
    checkShared(problem.sharedParameters[v].layers, problem.sharedParameters[v].bytes,
                "shared parameter " + std::to_string(v));
  if (platform.gpus < 1 || platform.gpus > kMaxGpus)
    throw Error("platform: the number of GPUs must be in 1.." + std::to_string(kMaxGpus) +
                ", got " + std::to_string(platform.gpus));
  if (!(platform.memoryBytesPerGpu > 0))
    throw Error("platform: memory per GPU must be positive");
  if (platform.gpusPerNode < 1 || platform.gpusPerNode > kMaxGpus)
    throw Error("platform: GPUs per node must be in 1.." + std::to_string(kMaxGpus));
  for (const LinkSpec *link : {&platform.intraNode, &platform.interNode}) {
    if (!(link->bandwidthBytesPerSecond > 0))
      throw Error("platform: link bandwidth must be positive");
    requireFiniteNonNegative(link->latencyMs, "link latency", "platform");
  }
  if (!platform.speed.empty()) {
    if (static_cast<int>(platform.speed.size()) != platform.gpus)
      throw Error("platform: " + std::to_string(platform.speed.size()) +
                  " speed factors given for " + std::to_string(platform.gpus) + " GPUs");
    for (double s : platform.speed)
      if (!(s > 0) || !std::isfinite(s))
        throw Error("platform: GPU speed factors must be positive and finite");
  }
  if (training.microbatches < 1 || training.microbatches > kMaxMicrobatches)
    throw Error("training: micro-batches per iteration must be in 1.." +
                std::to_string(kMaxMicrobatches) + ", got " +
                std::to_string(training.microbatches));
  if (static_cast<long long>(platform.gpus) * training.microbatches > kMaxScheduledActions)
    throw Error("training: " + std::to_string(platform.gpus) + " GPUs x " +
                std::to_string(training.microbatches) +
                " micro-batches is more than the limit of " +
                std::to_string(kMaxScheduledActions) + " scheduled (GPU, micro-batch) pairs");
  if (!(training.stateMultiplier >= 1) || !std::isfinite(training.stateMultiplier))
    throw Error("training: the state multiplier must be at least 1 (weights alone)");
  if (training.interleaveChunks < 1 || training.interleaveChunks > kMaxInterleaveChunks)
    throw Error("training: interleave chunks must be in 1.." +
                std::to_string(kMaxInterleaveChunks) + ", got " +
                std::to_string(training.interleaveChunks));
}

} // namespace

Status Problem::finalize() {
  return catchErrorsStatus([&] { finalizeProblem(*this); });
}

bool Problem::isChain() const {
  for (const Tensor &tensor : tensors)
    for (int consumer : tensor.consumers)
      if (consumer != tensor.producer + 1)
        return false;
  return true;
}

std::string toString(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return "gpipe";
  case ScheduleKind::OneFOneB:
    return "1f1b";
  case ScheduleKind::Interleaved:
    return "interleaved";
  case ScheduleKind::OneFOneBStash:
    return "1f1b-stash";
  case ScheduleKind::ZeroBubble:
    return "zb-h1";
  case ScheduleKind::Periodic:
    return "periodic";
  }
  return "?";
}

Expected<ScheduleKind> parseScheduleKind(const std::string &text) {
  for (ScheduleKind kind :
       {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
        ScheduleKind::OneFOneBStash, ScheduleKind::ZeroBubble, ScheduleKind::Periodic})
    if (toString(kind) == text)
      return kind;
  if (text == "1f1b-flush" || text == "flush")
    return ScheduleKind::OneFOneB;
  if (text == "pipedream" || text == "stash")
    return ScheduleKind::OneFOneBStash;
  if (text == "zero-bubble" || text == "zb")
    return ScheduleKind::ZeroBubble;
  return Expected<ScheduleKind>::failure(
      "unknown schedule '" + text +
      "' (expected gpipe, 1f1b, interleaved, 1f1b-stash, zb-h1 or periodic)");
}

std::string toString(WeightPolicy policy) {
  switch (policy) {
  case WeightPolicy::Default:
    return "default";
  case WeightPolicy::Single:
    return "single";
  case WeightPolicy::DoubleBuffered:
    return "double";
  case WeightPolicy::Stashed:
    return "stash";
  }
  return "?";
}

Expected<WeightPolicy> parseWeightPolicy(const std::string &text) {
  for (WeightPolicy policy : {WeightPolicy::Default, WeightPolicy::Single,
                              WeightPolicy::DoubleBuffered, WeightPolicy::Stashed})
    if (toString(policy) == text)
      return policy;
  if (text == "2bw")
    return WeightPolicy::DoubleBuffered;
  return Expected<WeightPolicy>::failure("unknown weight-version policy '" + text +
                                         "' (expected default, single, double or stash)");
}

std::string toString(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::None:
    return "none";
  case RecomputePolicy::Auto:
    return "auto";
  case RecomputePolicy::All:
    return "all";
  }
  return "?";
}

Expected<RecomputePolicy> parseRecomputePolicy(const std::string &text) {
  for (RecomputePolicy policy :
       {RecomputePolicy::None, RecomputePolicy::Auto, RecomputePolicy::All})
    if (toString(policy) == text)
      return policy;
  return Expected<RecomputePolicy>::failure("unknown recompute policy '" + text +
                                            "' (expected none, auto or all)");
}

namespace {
std::string lowerTrim(const std::string &text) {
  std::string out;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      out.push_back(c);
  return out;
}

double parseScaled(const std::string &original, bool bandwidth) {
  std::string text = lowerTrim(original);
  if (text.empty())
    throw Error("empty size");
  std::string lowered = text;
  for (char &c : lowered)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!lowered.empty() && lowered[0] == '+')
    lowered.erase(0, 1);
  if (lowered == "inf" || lowered == "infinite" || lowered == "unbounded" ||
      lowered == "none")
    return kInfinity;
  size_t consumed = 0;
  double value = 0;
  try {
    value = std::stod(text, &consumed);
  } catch (const std::exception &) {
    throw Error("cannot read '" + original + "' as a " +
                (bandwidth ? "bandwidth" : "size"));
  }
  std::string unit = text.substr(consumed);
  if (bandwidth && unit.size() >= 2 && unit.substr(unit.size() - 2) == "/s")
    unit = unit.substr(0, unit.size() - 2);
  // "Gb" (upper-case prefix, lower-case b) means gigabits; anything else is bytes,
  // case-insensitive ("16GB", "16gb", "16G", "16GiB").
  bool bits = unit.size() >= 2 && unit.back() == 'b' &&
              std::isupper(static_cast<unsigned char>(unit[0])) && unit.find('i') == std::string::npos;
  for (char &c : unit)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'b')
    unit.pop_back();
  double scale = 1;
  if (unit.empty())
    scale = 1;
  else if (unit == "k")
    scale = 1e3;
  else if (unit == "m")
    scale = 1e6;
  else if (unit == "g")
    scale = 1e9;
  else if (unit == "t")
    scale = 1e12;
  else if (unit == "ki")
    scale = 1024.0;
  else if (unit == "mi")
    scale = 1024.0 * 1024;
  else if (unit == "gi")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "ti")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else
    throw Error("unknown unit in '" + original + "' (use B, KB, MB, GB, GiB, ...)");
  double result = value * scale / (bits ? 8.0 : 1.0);
  if (!(result > 0) || !std::isfinite(result))
    throw Error("'" + original + "' must be positive");
  return result;
}
} // namespace

Expected<double> parseBytes(const std::string &text) {
  return catchErrors([&] { return parseScaled(text, false); });
}

Expected<double> parseMemorySize(const std::string &text) {
  return catchErrors([&] {
    const double bytes = parseScaled(text, false);
    const bool hasUnit = std::any_of(text.begin(), text.end(), [](char c) {
      return std::isalpha(static_cast<unsigned char>(c)) && c != 'e' && c != 'E';
    });
    if (!hasUnit)
      throw Error("'" + text + "' has no unit: write e.g. " + text + "GB or " + text + "GiB");
    return bytes;
  });
}

ByteUnits byteUnitsOf(const std::string &text) {
  std::string unit;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c)))
      unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (!unit.empty() && unit.back() == 'b')
    unit.pop_back();
  const bool binary = unit.size() >= 2 && unit.back() == 'i' &&
                      std::string("kmgt").find(unit[unit.size() - 2]) != std::string::npos;
  return binary ? ByteUnits::Binary : ByteUnits::Decimal;
}
Expected<double> parseBandwidth(const std::string &text) {
  return catchErrors([&] { return parseScaled(text, true); });
}

int weightVersions(const TrainingSettings &settings, int inFlight) {
  WeightPolicy policy = settings.weights;
  if (policy == WeightPolicy::Default)
    policy = settings.schedule == ScheduleKind::OneFOneBStash ? WeightPolicy::Stashed
                                                              : WeightPolicy::Single;
  switch (policy) {
  case WeightPolicy::Stashed:
    return std::max(1, inFlight);
  case WeightPolicy::DoubleBuffered:
    return 2;
  default:
    return 1;
  }
}

double readerStateMultiplier(const TrainingSettings &settings) {
  return std::min(2.0, settings.stateMultiplier);
}

std::string formatBytes(double bytes, ByteUnits units) {
  char buffer[64];
  if (bytes == kInfinity)
    return "unbounded";
  if (units == ByteUnits::Binary) {
    const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
    if (bytes >= gib)
      std::snprintf(buffer, sizeof buffer, "%.2f GiB", bytes / gib);
    else if (bytes >= mib)
      std::snprintf(buffer, sizeof buffer, "%.2f MiB", bytes / mib);
    else if (bytes >= 1024)
      std::snprintf(buffer, sizeof buffer, "%.2f KiB", bytes / 1024);
    else
      std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
    return buffer;
  }
  if (bytes >= 1e9)
    std::snprintf(buffer, sizeof buffer, "%.2f GB", bytes / 1e9);
  else if (bytes >= 1e6)
    std::snprintf(buffer, sizeof buffer, "%.2f MB", bytes / 1e6);
  else
    std::snprintf(buffer, sizeof buffer, "%.0f B", bytes);
  return buffer;
}

} // namespace partitioner
