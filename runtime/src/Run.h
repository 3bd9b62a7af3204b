//===- Run.h - libpiperun's C++ face for pipe-run and the tests ----*- C++ -*-===//
//
// Runs rank programs: one thread per rank in this process, or this process's
// rank of an MPI world. Not part of the C ABI (generated code never sees it);
// pipe-run and the runtime's tests use it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_RUN_H
#define PIPE_RUNTIME_RUN_H

#include "Device.h"
#include "Npz.h"
#include "pipe_runtime.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace piperun {

class DataSource;
class Transport;

/// How the transport ranks of data-parallel replicas are laid out (the plan's
/// `replica_layout`): pipeline-major, replica j on ranks j*P .. j*P+P-1 (each
/// pipeline on consecutive ranks); stage-major, pipeline rank p's replicas on
/// ranks p*R .. p*R+R-1 (each all-reduce group on consecutive ranks).
enum class ReplicaLayout { PipelineMajor, StageMajor };

/// "pipeline-major" or "stage-major".
PIPE_EXPORT const char *layoutName(ReplicaLayout layout);

/// A transport rank's place: its replica and its rank in the pipeline.
struct RankPlace {
  int replica = 0;
  int rank = 0;
};

/// The place of transport rank `k` among `replicas` copies of a pipeline of
/// `pipelineRanks` ranks, and back.
PIPE_EXPORT RankPlace rankPlace(ReplicaLayout layout, int replicas, int pipelineRanks, int k);
PIPE_EXPORT int transportRankOf(ReplicaLayout layout, int replicas, int pipelineRanks,
                                RankPlace place);

/// What every rank of a run shares.
struct RunSettings {
  int ranks = 1;        ///< of one pipeline (the program's)
  int microbatches = 1; ///< per step and replica; --data rows are replicas x microbatches x
                        ///< micro-batch size
  /// Data-parallel replicas of the pipeline: the run's transport ranks are
  /// replicas x the pipeline's, placed by `layout`; each step's micro-batches
  /// are split among them and every parameter's gradient is averaged over them
  /// before its update (docs/runtime.md, "Replicas").
  int replicas = 1;
  ReplicaLayout layout = ReplicaLayout::PipelineMajor;
  /// The largest bucket of one ring all-reduce of the gradients (replicas > 1;
  /// pipe_all_reduce_grads): the plan's, program.json "all_reduce_bucket_bytes".
  int64_t allReduceBucketBytes = int64_t(25) << 20;
  uint64_t seed = 0;
  double timeoutSeconds = 60; ///< bounds every wait on another rank
  std::string modelPath; ///< PIPE_SOURCE_FILE reads it; EXTERNAL paths are relative to its folder
  /// Every parameter drawn from the seed, the model's values neither read nor
  /// needed (pipe-run --random-params: timing runs without the weights).
  bool randomParameters = false;
  std::shared_ptr<const DataSource> data; ///< synthetic data when null
  int kernelThreads = 1;                  ///< per rank
  /// runInThreads: each rank's thread on its own CPUs (rankCpus), when there are
  /// enough; otherwise, or when false, wherever the system puts it.
  bool pinThreads = true;
  /// Where each rank's tensors live and its kernels run (Device.h).
  Backend backend = Backend::Cpu;
  /// The memory of each rank's emulated device (Backend::Emulated).
  int64_t emulatedDeviceBytes = int64_t(4) << 30;
};

/// The CPUs of each of `ranks` ranks of `threadsPerRank` kernel threads: disjoint
/// sets of this process's allowed CPUs, in their order; empty when there are
/// fewer allowed CPUs than ranks x threadsPerRank (nothing is pinned then).
PIPE_EXPORT std::vector<std::vector<int>> rankCpus(int ranks, int threadsPerRank);

/// One pipe_step_begin .. pipe_step_end of one rank; times in ms since the run's start.
struct StepRecord {
  int64_t step = 0;
  double startMs = 0, endMs = 0;
  bool hasLoss = false;
  double loss = 0;
  /// Time in the gradient all-reduce over replicas (pipe_all_reduce_grads).
  double allReduceMs = 0;
};

/// One pipe_action_begin .. pipe_action_end.
struct ActionRecord {
  int32_t kind = 0, stage = -1, microbatch = -1;
  int64_t step = 0;
  double startMs = 0, endMs = 0;
  /// Time blocked in receives during the action: its inputs were all in at
  /// startMs + waitMs at the latest (the plan's start of the action).
  double waitMs = 0;
};

/// Time spent after pipe_node(id) until the next pipe_node or action end,
/// less the time blocked in receives.
struct NodeTime {
  int32_t node = 0;
  std::string name;
  double ms = 0; ///< all of it, whatever the action (or none)
  int64_t calls = 0;
  bool declared = false; ///< named by pipe_declare_node (else name is "#id")
  /// Per step index: the part spent in forward actions, and in backward
  /// actions (B, Bi, W). Shorter than the run when the node's last steps had none.
  std::vector<double> forwardMs, backwardMs;
};

/// What a rank measured: peaks per category (pipe_mem order), steps, actions.
struct RankReport {
  int rank = 0;    ///< in the pipeline
  int replica = 0; ///< RunSettings::replicas
  std::vector<int64_t> peak;
  int64_t peakTotal = 0;
  std::vector<StepRecord> steps;
  std::vector<ActionRecord> actions;
  std::vector<NodeTime> nodes;
  double waitMs = 0; ///< time spent blocked in receives
  /// Device backends: kernel calls run by the device, and by kernel those run
  /// staged on the host.
  int64_t nativeKernelCalls = 0;
  int64_t libraryConvCalls = 0; ///< of the native calls, convolutions by cuDNN
  std::map<std::string, int64_t> stagedKernelCalls;
};

/// "F3@s1", "B3@s1", "Bi", "W", "reduce", "optimizer": the schedule's own names.
PIPE_EXPORT std::string actionName(const ActionRecord &action);

/// A rank program's two entry points (from rankK.so, or a test's functions).
struct RankProgram {
  pipe_program_setup_fn setup = nullptr;
  pipe_program_step_fn step = nullptr;
};

struct RunHooks {
  /// After each pipe_step_end, on the rank's thread (serialise output yourself);
  /// `rank` is the transport's (replica x pipeline ranks + the pipeline's).
  std::function<void(int rank, const StepRecord &step)> stepEnded;
  /// After the last step, on the rank's thread, while the rank still exists.
  std::function<void(pipe_rank *rank)> finished;
  /// runInThreads could not keep the rank's thread on its CPUs (settings.pinThreads):
  /// on the rank's thread, before its set-up, with the system's reason.
  std::function<void(int rank, const std::string &reason)> notPinned;
};

/// Runs programs[k] as rank k, one thread each, for `steps` steps. Returns ""
/// on success or the first failure's message ("rank R, node N: ..."); every
/// other rank stops within moments of it.
PIPE_EXPORT std::string runInThreads(const RunSettings &settings,
                                     const std::vector<RankProgram> &programs, int64_t steps,
                                     const RunHooks &hooks);

/// Runs one rank over `transport` (the MPI transport: every process calls it
/// with its own program). Returns "" or this rank's failure message; the
/// caller prints it and aborts the world.
PIPE_EXPORT std::string runRank(const RunSettings &settings, Transport &transport,
                                const RankProgram &program, int64_t steps, const RunHooks &hooks);

/// A standalone-style rank with run settings (model path, data, seed), no transport.
PIPE_EXPORT pipe_rank *createRank(const RunSettings &settings, int rank);

PIPE_EXPORT RankReport reportOf(pipe_rank *rank);
/// Parameters whose owner is this rank, keyed by name (--save-weights).
PIPE_EXPORT std::vector<NpyArray> ownedParameters(pipe_rank *rank);
/// Their accumulated gradients of the last step (--save-grads).
PIPE_EXPORT std::vector<NpyArray> ownedGradients(pipe_rank *rank);

/// OpenBLAS's kernel set for this process ("Haswell", "SkylakeX", ...).
PIPE_EXPORT std::string blasKernels();
/// The kernel set to ask OpenBLAS for (OPENBLAS_CORETYPE, read when the library
/// loads) where it chose its generic SSE kernels on a CPU with AVX2 or more: a
/// CPU newer than the library (Debian 12's 0.3.21 takes Emerald Rapids, family
/// 6 model 207, for a Prescott), whose SSE sgemm is slower and rounds each
/// product and sum apart. Empty where the library chose well, or the variable
/// is set.
PIPE_EXPORT std::string betterBlasKernels();

} // namespace piperun

#endif // PIPE_RUNTIME_RUN_H
