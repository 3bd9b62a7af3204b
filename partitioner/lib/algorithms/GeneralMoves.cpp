// `general-moves`: memory-aware general allocations by local search. It starts from
// the best contiguous plan that fits (madpipe's, improved by one-layer boundary
// moves) and moves blocks of layers at the edges of its stages to other GPUs while
// the simulated period strictly improves and every GPU fits. A GPU may then hold
// several stages; the simulator judges each candidate with the in-flight counts the
// generated schedule really keeps, so the memory check is that of the plan that
// runs, not the position rule min(S - s, m) of `ilp-general`.
//
// Moves are over one topological order (the start plan's stages in order): a block
// is the first or last k positions of a stage (or all of it), and it goes to any
// other GPU. A move that cannot lower the busiest GPU's work per micro-batch cannot
// lower the period and is not simulated; the others are tried from the lowest such
// bound up, the first improvement kept, until none improves or the budget of
// simulations is spent (deterministic, unlike a time budget).
#include "General.h"
#include "partitioner/BoundaryMoves.h"
#include "partitioner/Parallel.h"
#include "partitioner/Error.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"

#include <algorithm>
#include <sstream>

namespace partitioner {
namespace {

/// The start plan's layers in one topological order that keeps each stage's layers
/// together: by stage, then by position in a topological order.
std::vector<int> orderByStage(const Problem &problem, const Allocation &allocation) {
  std::vector<int> order = topologicalOrder(problem);
  std::vector<int> rank(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    rank[static_cast<size_t>(order[i])] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int sa = allocation.stageOfLayer[static_cast<size_t>(a)];
    const int sb = allocation.stageOfLayer[static_cast<size_t>(b)];
    return sa != sb ? sa < sb : rank[static_cast<size_t>(a)] < rank[static_cast<size_t>(b)];
  });
  return order;
}

} // namespace

PlanResult improveByBlockMovesOrThrow(const Problem &problem, const PlanResult &start,
                                      const LowerBounds &bounds, Objective objective,
                                      const BlockMoveBudget &budget, BlockMoveStats *out,
                                      int threads) {
  BlockMoveStats local;
  BlockMoveStats &stats = out ? *out : local;
  const ScheduleKind kind = start.scheduleKind;
  const int P = problem.platform.gpus;
  const detail::GeneralChain chain(problem, orderByStage(problem, start.allocation));
  const int L = chain.size();
  std::vector<int> gpuOf(static_cast<size_t>(L));
  for (int i = 0; i < L; ++i) {
    const int layer = chain.order[static_cast<size_t>(i)];
    gpuOf[static_cast<size_t>(i)] = start.allocation.gpuOfStage[static_cast<size_t>(
        start.allocation.stageOfLayer[static_cast<size_t>(layer)])];
  }
  const bool allRecompute = problem.training.recompute == RecomputePolicy::All;
  // Work at speed 1 of the positions before i (prefix sums: a block's work is a
  // difference, whatever its length).
  std::vector<double> workBefore(static_cast<size_t>(L) + 1, 0.0);
  for (int i = 0; i < L; ++i) {
    const Layer &layer = problem.layers[static_cast<size_t>(chain.order[static_cast<size_t>(i)])];
    workBefore[static_cast<size_t>(i) + 1] =
        workBefore[static_cast<size_t>(i)] + layer.workMs() + (allRecompute ? layer.forwardMs : 0.0);
  }
  auto work = [&](int begin, int end, int gpu) {
    return (workBefore[static_cast<size_t>(end)] - workBefore[static_cast<size_t>(begin)]) /
           problem.platform.speedOf(gpu);
  };
  const int m = problem.training.microbatches;
  const double scale = objective == Objective::Period ? 1.0 : m;
  // What a GPU holds at least for a layer whatever the schedule: its parameters
  // with their state, and one micro-batch of its saved activations (a stage keeps
  // at least the one it runs; recomputing keeps one copy too). A move whose
  // destination cannot hold that much cannot fit and is not simulated.
  const double limit = problem.platform.memoryBytesPerGpu * (1 + 1e-12);
  std::vector<double> heldBefore(static_cast<size_t>(L) + 1, 0.0);
  for (int i = 0; i < L; ++i) {
    const Layer &layer =
        problem.layers[static_cast<size_t>(chain.order[static_cast<size_t>(i)])];
    heldBefore[static_cast<size_t>(i) + 1] = heldBefore[static_cast<size_t>(i)] +
                                             layer.parameterBytes * problem.training.stateMultiplier +
                                             layer.savedBytes;
  }
  auto held = [&](int begin, int end) {
    return heldBefore[static_cast<size_t>(end)] - heldBefore[static_cast<size_t>(begin)];
  };

  auto spent = [&] {
    return stats.evaluations >= budget.simulations ||
           stats.stageMicrobatches >= budget.stageMicrobatches;
  };
  PlanResult current = start;
  while (!spent()) {
    const double target = objectiveValue(current, objective);
    std::vector<double> load(static_cast<size_t>(P), 0.0), holds(static_cast<size_t>(P), 0.0);
    for (int i = 0; i < L; ++i) {
      const int gpu = gpuOf[static_cast<size_t>(i)];
      load[static_cast<size_t>(gpu)] += work(i, i + 1, gpu);
      holds[static_cast<size_t>(gpu)] += held(i, i + 1);
    }
    struct Candidate {
      int begin, end, to;
      double bound;
    };
    std::vector<Candidate> candidates;
    auto consider = [&](int begin, int end, int from) {
      const double moved = held(begin, end);
      // The busiest GPU other than `from` and `to` is the same for every `to`
      // but one: the two largest loads besides `from` cover them all.
      double first = 0, second = 0;
      int firstGpu = -1;
      for (int g = 0; g < P; ++g) {
        const double value = load[static_cast<size_t>(g)];
        if (g == from)
          continue;
        if (value > first) {
          second = first;
          first = value;
          firstGpu = g;
        } else if (value > second) {
          second = value;
        }
      }
      const double fromAfter = load[static_cast<size_t>(from)] - work(begin, end, from);
      for (int to = 0; to < P; ++to) {
        if (to == from || holds[static_cast<size_t>(to)] + moved > limit) {
          stats.skippedForMemory += to != from;
          continue;
        }
        const double others = to == firstGpu ? second : first;
        const double busiest = std::max(
            {fromAfter, load[static_cast<size_t>(to)] + work(begin, end, to), others});
        if (strictlyLess(busiest * scale, target))
          candidates.push_back({begin, end, to, busiest * scale});
      }
    };
    for (int first = 0; first < L;) {
      int last = first;
      while (last < L && gpuOf[static_cast<size_t>(last)] == gpuOf[static_cast<size_t>(first)])
        ++last;
      const int gpu = gpuOf[static_cast<size_t>(first)];
      for (int k = 1; k <= last - first; ++k) {
        consider(first, first + k, gpu);
        if (k < last - first)
          consider(last - k, last, gpu);
      }
      first = last;
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate &a, const Candidate &b) { return a.bound < b.bound; });
    // Evaluated `batch` at a time on threads where a simulation is long enough to pay
    // for them: the candidates the budget allows, in order, and the first improving
    // one kept, with the counts one after the other would give.
    const size_t batch = static_cast<size_t>(
        current.allocation.numStages() * m >= kThreadedSimulationWork ? threadCount(threads) : 1);
    bool improved = false;
    size_t index = 0;
    while (!improved && index < candidates.size() && !spent()) {
      std::vector<std::vector<int>> maps;
      std::vector<Allocation> trials;
      int evaluations = stats.evaluations;
      double simulated = stats.stageMicrobatches;
      while (trials.size() < batch && index + trials.size() < candidates.size() &&
             evaluations < budget.simulations && simulated < budget.stageMicrobatches) {
        const Candidate &candidate = candidates[index + trials.size()];
        std::vector<int> trialMap = gpuOf;
        std::fill(trialMap.begin() + candidate.begin, trialMap.begin() + candidate.end,
                  candidate.to);
        trials.push_back(detail::allocationFromGpuMap(problem, chain, trialMap));
        maps.push_back(std::move(trialMap));
        ++evaluations;
        simulated += static_cast<double>(trials.back().numStages()) * m;
      }
      std::vector<std::optional<PlanResult>> results =
          mapOnThreads<std::optional<PlanResult>>(trials.size(), static_cast<int>(batch), [&](size_t k) {
            return improvingEvaluation(problem, trials[k], kind, bounds, objective, target);
          });
      for (size_t k = 0; k < trials.size(); ++k) {
        ++stats.evaluations;
        stats.stageMicrobatches += static_cast<double>(trials[k].numStages()) * m;
        if (!results[k])
          continue;
        current = std::move(*results[k]);
        gpuOf = std::move(maps[k]);
        ++stats.movesKept;
        improved = true;
        break;
      }
      index += trials.size();
    }
    if (!improved)
      break;
  }
  stats.budgetSpent = spent();
  current.algorithm = start.algorithm;
  current.notes = start.notes;
  current.lowerBoundMs = start.lowerBoundMs;
  return current;
}

namespace {

class GeneralMovesAlgorithm : public Algorithm {
public:
  std::string name() const override { return "general-moves"; }
  std::string summary() const override {
    return "memory-aware general allocation: madpipe's contiguous plan, then blocks of "
           "layers moved to other GPUs while the simulated period improves and all fit "
           "(best does the same from its chosen plan)";
  }
  bool partOfBest() const override { return false; }

  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    AlgorithmOutput output;
    const ScheduleKind kind = detail::generalScheduleKind(problem);
    output.schedule = kind;
    const Algorithm *contiguous = findAlgorithm("madpipe");
    if (problem.platform.gpus < 2 || !contiguous) {
      output.reason = "general-moves: needs at least 2 GPUs";
      return output;
    }
    AlgorithmOutput startOutput = contiguous->run(problem, context);
    if (!startOutput.allocation) {
      output.reason = "general-moves: no contiguous plan to start from (" + startOutput.reason + ")";
      return output;
    }
    PlanResult start = evaluateUnderPolicyOrThrow(problem, *startOutput.allocation, kind, context.bounds);
    if (!start.valid) {
      output.reason = "general-moves: madpipe's plan is not valid under " + toString(kind) + " (" +
                      start.reason + ")";
      return output;
    }
    start = improveByBoundaryMovesOrThrow(problem, start, context.bounds, context.options.objective);
    BlockMoveStats stats;
    const PlanResult moved = improveByBlockMovesOrThrow(problem, start, context.bounds,
                                                        context.options.objective,
                                                        kGeneralMovesBudget, &stats);
    output.allocation = moved.allocation;
    output.predictedPeriodMs = bottleneckPeriod(problem, moved.allocation);
    output.notes = "from madpipe's " + describeBlockMoves(start, moved, stats, context.options.objective);
    return output;
  }
};

} // namespace

std::string describeBlockMoves(const PlanResult &start, const PlanResult &moved,
                               const BlockMoveStats &stats, Objective objective) {
  std::ostringstream notes;
  notes << objectiveValue(start, objective) << " ms: " << stats.movesKept << " block move"
        << (stats.movesKept == 1 ? "" : "s") << " -> " << objectiveValue(moved, objective)
        << " ms, " << moved.allocation.numStages() << " stages on "
        << moved.allocation.numGpusUsed() << " GPUs (" << stats.evaluations << " simulations"
        << (stats.budgetSpent ? ", budget spent" : "") << "; " << stats.skippedForMemory
        << " moves that cannot fit not simulated)";
  return notes.str();
}

std::unique_ptr<Algorithm> makeGeneralMovesAlgorithm() {
  return std::make_unique<GeneralMovesAlgorithm>();
}

} // namespace partitioner
