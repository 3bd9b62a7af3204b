// `pipedream`: PipeDream's partitioning DP (straight pipeline, all machines used):
// minimise the slowest stage; memory is only a filter by stage position,
// (stages after it) x (activations + parameters) <= M, PipeDream's stash estimate.
// Its plans are then judged under the real schedule's memory by the simulator.
#include "Contiguous.h"

namespace partitioner {
namespace {
class PipeDreamAlgorithm : public Algorithm {
public:
  std::string name() const override { return "pipedream"; }
  std::string summary() const override {
    return "PipeDream's DP, memory as a position filter";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    MinMaxOptions options;
    options.maxStages = problem.platform.gpus;
    options.exactStageCount = true;
    options.pipeDreamFilter = true;
    options.tieBreak = false;
    AlgorithmOutput output = detail::solveOnLattices(
        problem, context,
        [&](const StageModel &model, double upperBound) {
          MinMaxOptions local = options;
          local.upperBoundMs = upperBound;
          // As madpipe: on a long chain a greedy split's period bounds the DP's
          // window. The result stays exact: if no split is found within the bound
          // (the greedy split breaks PipeDream's rules), the DP runs unbounded.
          if (upperBound == kInfinity && model.lattice().numCuts() > 1500) {
            local.upperBoundMs = greedyUpperBound(model, local);
            if (auto bounded = minMaxPartition(model, local))
              return bounded;
            local.upperBoundMs = kInfinity;
          }
          return minMaxPartition(model, local);
        },
        [](const StageModel &) {
          return std::string("infeasible: PipeDream's stash filter rejects every split");
        });
    // Its counts (stages after each one) are a memory filter, not the schedule's caps.
    if (output.allocation)
      output.allocation->inFlightLimit.clear();
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makePipeDreamAlgorithm() {
  return std::make_unique<PipeDreamAlgorithm>();
}

} // namespace partitioner
