// `balanced`: minimise the largest stage period max(compute, links), memory ignored
// (torchgpipe / chains-on-chains). Exact over contiguous partitions of the chain, and
// over all DAG-convex partitions when the downsets are few enough.
#include "Contiguous.h"

namespace partitioner {
namespace {
class BalancedAlgorithm : public Algorithm {
public:
  std::string name() const override { return "balanced"; }
  std::string summary() const override {
    return "exact min of the slowest stage, memory ignored";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    MinMaxOptions options;
    options.maxStages = problem.platform.gpus;
    options.memoryAware = false;
    return detail::solveOnLattices(
        problem, context,
        [&](const StageModel &model, double upperBound) {
          MinMaxOptions local = options;
          local.upperBoundMs = upperBound;
          local.keepOnlyBelowMs = upperBound; // solveOnLattices keeps only improvements
          return boundedMinMaxPartition(model, local);
        },
        [](const StageModel &) { return std::string("no partition"); });
  }
};
} // namespace

std::unique_ptr<Algorithm> makeBalancedAlgorithm() { return std::make_unique<BalancedAlgorithm>(); }

} // namespace partitioner
