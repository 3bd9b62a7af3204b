// `interleaved`: v virtual stages per GPU (stage s on GPU s mod P), balanced by an
// exact min-max DP over v*P contiguous chunks, scheduled with Megatron's interleaved
// 1F1B. Applies when m is a multiple of P; memory is judged by the simulator.
#include "Contiguous.h"

#include <algorithm>

namespace partitioner {
namespace {
class InterleavedAlgorithm : public Algorithm {
public:
  std::string name() const override { return "interleaved"; }
  std::string summary() const override {
    return "v balanced chunks per GPU, interleaved 1F1B (Megatron)";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &) const override {
    AlgorithmOutput output;
    output.schedule = ScheduleKind::Interleaved;
    const int gpus = problem.platform.gpus;
    const int chunks = std::max(2, problem.training.interleaveChunks);
    const int layers = static_cast<int>(problem.layers.size());
    if (gpus < 2) {
      output.reason = "interleaved: needs at least 2 GPUs";
      return output;
    }
    if (layers < chunks * gpus) {
      output.reason = "interleaved: " + std::to_string(layers) + " layers cannot fill " +
                      std::to_string(chunks * gpus) + " virtual stages";
      return output;
    }
    if (problem.training.microbatches % gpus != 0) {
      output.reason = "interleaved: micro-batches (" + std::to_string(problem.training.microbatches) +
                      ") must be a multiple of the GPU count (" + std::to_string(gpus) + ")";
      return output;
    }
    // Price the chunks on a virtual platform with one "GPU" per chunk whose speed is
    // the real GPU's; the simulator replays the real placement afterwards.
    Problem virtualProblem = problem;
    virtualProblem.platform.gpus = chunks * gpus;
    virtualProblem.platform.gpusPerNode = chunks * gpus;
    if (!problem.platform.speed.empty()) {
      virtualProblem.platform.speed.clear();
      for (int s = 0; s < chunks * gpus; ++s)
        virtualProblem.platform.speed.push_back(problem.platform.speedOf(s % gpus));
    }
    const CutLattice chain = chainLattice(virtualProblem, topologicalOrder(virtualProblem));
    const StageModel model(virtualProblem, chain);
    MinMaxOptions options;
    options.maxStages = chunks * gpus;
    options.exactStageCount = true;
    options.memoryAware = false;
    options.tieBreak = false;
    auto partition = boundedMinMaxPartition(model, options);
    if (!partition) {
      output.reason = "interleaved: no split into " + std::to_string(chunks * gpus) + " chunks";
      return output;
    }
    Allocation allocation = allocationFromCuts(virtualProblem, chain, *partition);
    for (size_t s = 0; s < allocation.gpuOfStage.size(); ++s)
      allocation.gpuOfStage[s] = static_cast<int>(s) % gpus;
    allocation.inFlightLimit.clear();
    output.allocation = allocation;
    output.predictedPeriodMs = partition->periodMs * chunks;
    output.notes = std::to_string(chunks) + " chunks per GPU";
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makeInterleavedAlgorithm() {
  return std::make_unique<InterleavedAlgorithm>();
}

} // namespace partitioner
