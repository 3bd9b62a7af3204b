//===- Rank.h - the state behind one pipe_rank ---------------------*- C++ -*-===//
//
// Everything one rank holds: its memory account, parameters and optimizer
// state, saved slots, the step in progress and what it measured. Only the
// rank's own thread touches it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_RANK_H
#define PIPE_RUNTIME_RANK_H

#include "Device.h"
#include "Run.h"
#include "Storage.h"
#include "Transport.h"
#include "pipe_runtime.h"

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace piperun {

struct Parameter {
  bool declared = false;
  std::string name;
  pipe_tensor *value = nullptr;    ///< borrowed by the program (pipe_param)
  pipe_tensor *gradient = nullptr; ///< fp32, trainable parameters only
  pipe_tensor *state[2] = {};      ///< momentum buffer / Adam's two moments, owner only
  bool trainable = false;
  int32_t owner = 0;
  int64_t updates = 0; ///< optimizer steps taken (Adam's t)
};

struct OptimizerConfig {
  bool set = false;
  int32_t kind = PIPE_SGD;
  double lr = 0, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
};

/// The scalars of Adam's / AdamW's step number `step` (from 1) under `o`.
AdamStep adamStepOf(const OptimizerConfig &o, int64_t step);

/// A send whose buffer (COMM) the transport still holds, and the device
/// buffer the message names (COMM) when it travels device to device.
struct OutstandingSend {
  std::unique_ptr<PendingSend> handle;
  Storage *buffer = nullptr;
  Storage *payload = nullptr;
  MessageKey key;
  /// What the message is, for a failure ("" : describeOutgoing(key)).
  std::string label;

  /// The bytes charged to the rank for it.
  int64_t bytes() const { return buffer->bytes + (payload ? payload->bytes : 0); }
};

} // namespace piperun

struct pipe_rank {
  /// The program's rank: its place in the pipeline (pipe_program_rank).
  int32_t id = 0;
  /// Data-parallel replicas (RunSettings::replicas): this rank runs pipeline
  /// rank `id` of replica `replica`, at the transport rank the run's layout
  /// gives (transportRank).
  int32_t replica = 0;
  int32_t pipelineRanks = 1;
  piperun::RunSettings settings;
  piperun::Transport *transport = nullptr; ///< null for a standalone rank
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
  std::function<void(int, const piperun::StepRecord &)> stepEnded;

  /// Where the tensors live: null on the CPU backend. Declared before `memory`,
  /// whose device cache gives its blocks back to it.
  std::unique_ptr<piperun::Device> device;
  int hostKernelDepth = 0; ///< > 0 inside a staged kernel (HostKernelScope)
  int64_t nativeKernelCalls = 0;                       ///< on the device, by its own kernels
  int64_t libraryConvCalls = 0; ///< of those, convolutions by the device's library (cuDNN)
  std::map<std::string, int64_t> stagedKernelCalls;    ///< by kernel: run staged on the host
  /// pipe_constant's uploads on a device, by (program data, bytes): each
  /// constant is copied to the device once and kept for the run.
  std::map<std::pair<const void *, int64_t>, piperun::Storage *> deviceConstants;

  piperun::MemoryAccount memory;
  std::unordered_set<const pipe_tensor *> tensors; ///< every live tensor of this rank
  std::vector<piperun::Parameter> params;          ///< by id, dense over the pipeline
  piperun::OptimizerConfig optimizer;
  int64_t inlineParams = 0;

  std::map<int32_t, int32_t> stageSlots; ///< stage -> saved slots per micro-batch
  std::map<std::tuple<int32_t, int32_t, int32_t>, pipe_tensor *> saved;

  std::unordered_map<int32_t, std::string> nodeNames;
  int32_t currentNode = -1;
  double nodeStartMs = 0;
  double nodeWaitMs = 0; ///< receive waits inside the running node (not its time)
  double waitMs = 0;     ///< all receive waits of the run
  std::map<int32_t, piperun::NodeTime> nodeTimes;

  int64_t step = 0; ///< index of the step in progress (or the next one)
  bool inStep = false;
  /// The step whose gradients pipe_all_reduce_grads averaged (-1: none yet).
  int64_t averagedStep = -1;
  piperun::StepRecord current;
  std::vector<piperun::StepRecord> steps;
  bool inAction = false;
  piperun::ActionRecord action;
  double waitMsAtActionBegin = 0; ///< waitMs when the running action began
  std::vector<piperun::ActionRecord> actions;

  std::vector<piperun::OutstandingSend> sends;
  int64_t pendingSendBytes = 0;
};

namespace piperun {

/// Parameter `id` of this rank; fails naming `what` when it is not declared here.
Parameter &parameterOf(pipe_rank *r, int32_t id, const char *what);
/// Milliseconds since the rank's epoch (the run's start).
double nowMs(const pipe_rank *r);
/// Frees the finished sends' buffers.
void reapSends(pipe_rank *r);
/// Waits (up to the run's timeout) until every send has left.
void drainSends(pipe_rank *r);
/// The transport rank of pipeline rank `rank` of replica `replica` (by default,
/// this rank's replica).
int32_t transportRank(const pipe_rank *r, int32_t rank, int32_t replica = -1);
/// "rank 3", or with replicas "rank 3 (replica 1's rank 1)": the transport's
/// rank, as messages about peers name them, and the pipeline's.
std::string rankName(const pipe_rank *r);
/// Places a rank in its replica: transport rank `rank` of `ranks`. Fails when
/// `ranks` is not a multiple of the run's replicas.
void placeInReplica(pipe_rank *r, int rank, int ranks);
/// Data-parallel replicas: makes the gradient of every trainable parameter the
/// rank owns the mean of every replica's (pipe_all_reduce_grads).
void allReduceGradients(pipe_rank *r);
/// Name of a node for messages: its declared name or "#id".
std::string nodeName(const pipe_rank *r, int32_t node);
/// Closes the running node's timing interval.
void closeNode(pipe_rank *r);

} // namespace piperun

#endif // PIPE_RUNTIME_RANK_H
