// `madpipe`: memory-aware DP. Stages are built from the end of the network, so a
// stage knows what runs downstream of it. For 1F1B-like schedules its in-flight count
// is its real position rule min(stages after it + 1, m) (exact min-max with memory);
// for the periodic schedule it is ceil(span / T), the span coming from the real
// downstream latency, with bisection on T (exact at each T).
#include "Contiguous.h"

namespace partitioner {
namespace {
class MadPipeAlgorithm : public Algorithm {
public:
  std::string name() const override { return "madpipe"; }
  std::string summary() const override {
    return "memory-aware DP from the end of the network (bisection on T if periodic)";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    const ScheduleKind kind = problem.training.schedule;
    if (kind == ScheduleKind::Periodic) {
      return detail::solveOnLattices(
          problem, context,
          [&](const StageModel &model, double) {
            return periodicMinPeriod(model, problem.platform.gpus, context.bounds.bestMs);
          },
          [&](const StageModel &model) {
            return explainMemoryInfeasibility(model, problem.platform.gpus,
                                              ScheduleKind::OneFOneB);
          });
    }
    MinMaxOptions options;
    options.maxStages = problem.platform.gpus;
    options.memoryAware = true;
    options.inFlightRule = kind == ScheduleKind::GPipe ? ScheduleKind::GPipe : ScheduleKind::OneFOneB;
    AlgorithmOutput output = detail::solveOnLattices(
        problem, context,
        [&](const StageModel &model, double upperBound) {
          MinMaxOptions local = options;
          local.upperBoundMs = upperBound;
          if (upperBound == kInfinity && model.lattice().numCuts() > 1500)
            local.upperBoundMs = greedyUpperBound(model, local);
          return minMaxPartition(model, local);
        },
        [&](const StageModel &model) {
          return explainMemoryInfeasibility(model, problem.platform.gpus, options.inFlightRule);
        });
    if (output.allocation)
      output.allocation->inFlightLimit.clear();
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makeMadPipeAlgorithm() { return std::make_unique<MadPipeAlgorithm>(); }

} // namespace partitioner
