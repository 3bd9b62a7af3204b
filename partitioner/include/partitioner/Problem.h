// The planning problem (docs/partitioner.md, "The model"): a chain/DAG of layers,
// the platform and the training settings, its checks, and the formats it is read
// from and written to. Everything else in the library reads a Problem.
//
// One of the partitioner's three public headers (Problem.h, Planner.h, Output.h).
// No public function throws: one that can fail returns an Expected or a Status
// whose error is one line naming the layer, field or value.
#ifndef PARTITIONER_PROBLEM_H
#define PARTITIONER_PROBLEM_H

#include <iosfwd>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace partitioner {

/// A value, or the one-line reason there is none.
template <typename T> class Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  static Expected failure(std::string error) {
    Expected result;
    result.error_ = std::move(error);
    return result;
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  /// Why there is no value ("" when there is one).
  const std::string &error() const { return error_; }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  Expected() = default;
  std::optional<T> value_;
  std::string error_;
};

/// Success, or the one-line reason of a failure.
struct [[nodiscard]] Status {
  std::string error;
  bool ok() const { return error.empty(); }
  explicit operator bool() const { return ok(); }
  static Status failure(std::string error) { return Status{std::move(error)}; }
};

constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// Limits checked by Problem::finalize() and the readers, so that no input makes
/// planning need unbounded memory or time (docs/reliability.md). Schedules and the
/// simulator hold every action of an iteration: O(GPUs x micro-batches) of them.
constexpr int kMaxGpus = 4096;
constexpr int kMaxMicrobatches = 16384;
/// GPUs x micro-batches: the actions of one simulated iteration.
constexpr long long kMaxScheduledActions = 1LL << 18;
constexpr size_t kMaxLayers = 1000000;
constexpr int kMaxInterleaveChunks = 64;

/// One layer of the model (a node of the graph, or a group of nodes).
struct Layer {
  std::string name;
  std::vector<std::string> nodeIds; ///< original graph node ids held by this layer
  double forwardMs = 0;             ///< uF(l)
  double backwardMs = 0;            ///< uB(l), input + weight gradient
  /// Part of backwardMs that computes weight gradients (zero-bubble B/W split).
  /// Negative means unknown: half of backwardMs is assumed.
  double backwardWeightMs = -1;
  double parameterBytes = 0; ///< W(l)
  double savedBytes = 0;     ///< s(l): bytes kept from F(l) to B(l) per micro-batch
  double outputBytes = 0;    ///< size of the layer's output tensor
  /// Bytes of the model's own inputs (data, labels) the layer reads per
  /// micro-batch: what a recomputing stage keeps besides what it receives.
  double inputBytes = 0;
  /// Transient bytes the layer needs while it runs (values that are not saved,
  /// kernel scratch), forward or backward, whichever is larger. A stage holds the
  /// largest of its layers' on top of what it keeps (docs/partitioner.md,
  /// "Memory of a GPU").
  double workspaceBytes = 0;

  double workMs() const { return forwardMs + backwardMs; }
  double weightGradientMs() const {
    return backwardWeightMs >= 0 ? backwardWeightMs : 0.5 * backwardMs;
  }
};

/// A tensor produced by one layer and consumed by others (exact cut sets, skip
/// connections). Its gradient travels back with the same size.
struct Tensor {
  int producer = 0;
  std::vector<int> consumers;
  double bytes = 0;
};

/// A value several layers keep for their backward (one computes it and keeps it,
/// another reads it and keeps it too). Each stage holding one of `layers` keeps
/// its own copy per micro-batch in flight (the later stage's is the copy it
/// received); the bytes are in none of those layers' savedBytes.
struct SharedSaved {
  std::vector<int> layers; ///< two or more, sorted
  double bytes = 0;
};

/// A trainable parameter read by several layers (a tied weight: GPT-2's token
/// embedding and output projection). Its bytes are in none of those layers'
/// parameterBytes. The GPU of the first stage holding one of `layers` owns it:
/// weight, gradient and optimizer state (stateMultiplier x bytes, as a layer's
/// own parameters). Every other GPU holding one keeps the weight and its gradient
/// (readerStateMultiplier x bytes); at the end of a step its gradient is added
/// into the owner's, which sends the updated weight back.
struct SharedParameter {
  std::vector<int> layers; ///< two or more, sorted
  double bytes = 0;
};

/// A point-to-point link class: a transfer of c bytes costs latency + c / bandwidth.
struct LinkSpec {
  double bandwidthBytesPerSecond = kInfinity;
  double latencyMs = 0;
  /// Time the sender's and receiver's ports are busy (latency does not occupy them).
  double occupancyMs(double bytes) const {
    if (bytes <= 0 || bandwidthBytesPerSecond == kInfinity)
      return 0;
    return bytes / bandwidthBytesPerSecond * 1e3;
  }
  double transferMs(double bytes) const {
    if (bytes <= 0)
      return 0;
    return latencyMs + (bandwidthBytesPerSecond == kInfinity
                            ? 0.0
                            : bytes / bandwidthBytesPerSecond * 1e3);
  }
};

/// How byte counts are printed: GB/MB (powers of 1000) or GiB/MiB (powers of 1024).
enum class ByteUnits { Decimal, Binary };

struct Platform {
  int gpus = 1;
  double memoryBytesPerGpu = kInfinity;
  /// The units the memory limit was given in; tables and messages print bytes in them.
  ByteUnits byteUnits = ByteUnits::Decimal;
  int gpusPerNode = 8;
  /// Defaults (documented in docs/partitioner.md): NVLink-class intra-node links and
  /// 100 Gb/s inter-node links.
  LinkSpec intraNode{25e9, 0.005};
  LinkSpec interNode{12.5e9, 0.010};
  /// Relative speed of each GPU (1 = the speed the profile was measured at); empty
  /// means homogeneous.
  std::vector<double> speed;

  double speedOf(int gpu) const {
    return speed.empty() ? 1.0 : speed[static_cast<size_t>(gpu)];
  }
  const LinkSpec &linkBetween(int a, int b) const {
    return (a / gpusPerNode == b / gpusPerNode) ? intraNode : interNode;
  }
};

/// Schedule families (docs/partitioner.md, "Schedules").
enum class ScheduleKind {
  GPipe,         ///< all forwards then all backwards, flush
  OneFOneB,      ///< 1F1B with flush (PipeDream-Flush, Megatron, DAPPLE)
  Interleaved,   ///< interleaved 1F1B over virtual stages (Megatron)
  OneFOneBStash, ///< 1F1B with weight stashing (PipeDream, asynchronous)
  ZeroBubble,    ///< 1F1B with the backward split into B (input) and W (weight), ZB-H1 style
  Periodic,      ///< memory-constrained 1-periodic schedule (offsets and shifts)
};

/// How many weight versions a layer keeps (docs/partitioner.md, "Memory of a GPU").
enum class WeightPolicy {
  Default,        ///< what the schedule implies (stash for OneFOneBStash, else one)
  Single,         ///< one version (flush-based schedules)
  DoubleBuffered, ///< two versions (PipeDream-2BW)
  Stashed,        ///< one version per in-flight micro-batch (PipeDream)
};

/// Whether stages recompute their forward in the backward (activation
/// checkpointing at stage granularity; docs/partitioner.md, "Recomputation").
/// A recomputing stage keeps only the tensors it receives for each micro-batch in
/// flight; its backward first runs the forward again (+ forward time) and holds
/// one micro-batch's saved activations until that backward ends.
enum class RecomputePolicy {
  None, ///< no stage recomputes
  Auto, ///< a stage recomputes only when it would not fit otherwise
  All,  ///< every stage recomputes
};

/// Buffers a stage holds per cut tensor it sends or receives: one for the
/// activation and one for its gradient, which travels the other way. With
/// asynchronous sends both are live at once in the steady state (the sender's
/// activation waits for the receiver while the gradient of an earlier
/// micro-batch arrives), as the CPU runtime measures.
constexpr double kBuffersPerCutTensor = 2;

struct TrainingSettings {
  int microbatches = 32;
  /// Bytes held per parameter byte for weights + gradients + optimizer state
  /// (4 = weights, gradients and the two Adam moments).
  double stateMultiplier = 4;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  WeightPolicy weights = WeightPolicy::Default;
  /// Count communication buffers in the stage memory: kBuffersPerCutTensor
  /// per cut tensor on each side of the cut.
  bool communicationBuffers = true;
  /// With communicationBuffers, charge each GPU the larger of those buffers and
  /// the messages its simulated timeline holds at once (GpuMemory::messageBytes):
  /// what a runtime whose sends never block holds, the CPU runtime's. The main
  /// job sets it; the profiles' planners (and their figures) do not.
  bool messagesFromTimeline = false;
  int interleaveChunks = 2; ///< virtual stages per GPU for the interleaved schedule
  RecomputePolicy recompute = RecomputePolicy::None;
};

struct Problem {
  std::string name;
  std::vector<Layer> layers;
  /// Tensors between layers. Empty on input means a plain chain whose layer l sends
  /// outputBytes to l+1; finalize() fills it.
  std::vector<Tensor> tensors;
  /// Values kept by several layers (docs/partitioner.md, "Memory of a GPU").
  std::vector<SharedSaved> sharedSaved;
  /// Parameters read by several layers (same section).
  std::vector<SharedParameter> sharedParameters;
  Platform platform;
  TrainingSettings training;

  /// Checks every field and fills defaults; the error names the layer or field.
  Status finalize();
  /// True when tensors only connect consecutive layers (a chain).
  bool isChain() const;
};

// Names and parsing of enums and sizes used by the CLI and the JSON formats.
std::string toString(ScheduleKind kind);
Expected<ScheduleKind> parseScheduleKind(const std::string &text);
std::string toString(WeightPolicy policy);
Expected<WeightPolicy> parseWeightPolicy(const std::string &text);
std::string toString(RecomputePolicy policy);
/// "none", "auto" or "all".
Expected<RecomputePolicy> parseRecomputePolicy(const std::string &text);
/// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
/// code points past U+10FFFF): names end up as JSON strings and keys.
bool isValidUtf8(const std::string &text);
/// `text` for a message: bytes that are not printable ASCII as \xNN.
std::string printableName(const std::string &text);
/// "16GB" / "16 GiB" / "512MB" / "1e9" / "inf" -> bytes (GB = 1e9, GiB = 2^30).
Expected<double> parseBytes(const std::string &text);
/// A memory size that must say its unit: like parseBytes, but "80" alone is an
/// error (80 bytes is never what a user means by a GPU's memory).
Expected<double> parseMemorySize(const std::string &text);
/// Binary when `text` names a binary unit ("80GiB", "512 MiB"), else decimal.
ByteUnits byteUnitsOf(const std::string &text);
/// "18.20 GB" (or "16.95 GiB" in binary units): the reverse of parseBytes, as
/// messages and tables print sizes.
std::string formatBytes(double bytes, ByteUnits units = ByteUnits::Decimal);
/// "25GB/s", "100Gb/s", "inf" -> bytes per second.
Expected<double> parseBandwidth(const std::string &text);
/// Number of weight versions of a stage that keeps `inFlight` micro-batches.
int weightVersions(const TrainingSettings &settings, int inFlight);
/// Bytes per parameter byte on a GPU that reads a shared parameter it does not
/// own: the weight and its gradient, min(2, stateMultiplier).
double readerStateMultiplier(const TrainingSettings &settings);

// The problem formats (docs/partitioner.md): problem JSON, and the per-layer
// profiles people already have (PipeDream / DAPPLE graph.txt). Readers check
// every field and finalize() the problem; `name` names it in messages.
Expected<Problem> readProblemJson(std::istream &in, const std::string &name);
/// Writes `problem` as problem JSON (round-trips through readProblemJson), with
/// `extraFields` as more top-level fields, each a (key, JSON text) pair: what a
/// caller keeps beside the problem, such as the main job's settings (readers
/// ignore unknown fields only where the format says so: `settings` is one).
void writeProblemJson(const Problem &problem, std::ostream &out,
                      const std::vector<std::pair<std::string, std::string>> &extraFields = {});
/// One layer per node, one tensor per node output, platform and training at their
/// defaults. Nodes whose description starts with "Input" are data sources and cost
/// nothing (as in the reference evaluator).
Expected<Problem> readGraphText(std::istream &in, const std::string &name);
/// `.json` files as problem JSON, others as graph.txt.
Expected<Problem> readProblemFile(const std::string &path);

} // namespace partitioner

#endif
