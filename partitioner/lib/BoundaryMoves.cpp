// One-layer boundary moves and the local improvement of a plan by them.
#include "partitioner/BoundaryMoves.h"
#include "partitioner/Error.h"
#include "partitioner/Linearize.h"
#include "partitioner/Parallel.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"

#include <algorithm>
#include <cmath>

namespace partitioner {

namespace {
/// The moves of boundaryMoves, with the graph's successor and predecessor lists
/// given (the improvement computes them once).
std::vector<BoundaryMove> movesOf(const Allocation &allocation,
                                  const std::vector<std::vector<int>> &successors,
                                  const std::vector<std::vector<int>> &predecessors) {
  std::vector<BoundaryMove> moves;
  const int stages = allocation.numStages();
  const size_t layers = allocation.stageOfLayer.size();
  if (layers != successors.size())
    return moves;
  std::vector<int> size(static_cast<size_t>(std::max(stages, 0)), 0);
  for (int s : allocation.stageOfLayer) {
    if (s < 0 || s >= stages)
      return moves;
    ++size[static_cast<size_t>(s)];
  }
  for (size_t l = 0; l < layers; ++l) {
    const int stage = allocation.stageOfLayer[l];
    if (size[static_cast<size_t>(stage)] < 2)
      continue; // moving its only layer would leave the stage empty
    // Earlier: every producer already sits before `stage`, so none would follow it.
    bool earlier = stage > 0, later = stage + 1 < stages;
    for (int p : predecessors[l])
      earlier &= allocation.stageOfLayer[static_cast<size_t>(p)] < stage;
    for (int c : successors[l])
      later &= allocation.stageOfLayer[static_cast<size_t>(c)] > stage;
    if (earlier)
      moves.push_back({static_cast<int>(l), stage, stage - 1});
    if (later)
      moves.push_back({static_cast<int>(l), stage, stage + 1});
  }
  std::stable_sort(moves.begin(), moves.end(), [](const BoundaryMove &a, const BoundaryMove &b) {
    return a.fromStage < b.fromStage;
  });
  return moves;
}

} // namespace

bool strictlyLess(double a, double b) {
  return a < b - 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

double objectiveValue(const PlanResult &plan, Objective objective) {
  return objective == Objective::Period ? plan.periodMs : plan.iterationMs;
}

std::optional<PlanResult> improvingEvaluation(const Problem &problem, const Allocation &trial,
                                              ScheduleKind kind, const LowerBounds &bounds,
                                              Objective objective, double target) {
  try {
    if (problem.training.recompute == RecomputePolicy::None) {
      // Judging iteration times, the m micro-batches tell: the 2m that measure
      // the period are run only for a trial that improves.
      const SimulationResult simulation = objective == Objective::IterationTime
                                              ? simulateIteration(problem, trial, kind)
                                              : simulatePlan(problem, trial, kind);
      if (!simulation.completed)
        return std::nullopt;
      const double value =
          objective == Objective::Period ? simulation.periodMs : simulation.iterationMs;
      if (!strictlyLess(value, target))
        return std::nullopt;
      const double limit = problem.platform.memoryBytesPerGpu;
      if (std::any_of(simulation.memory.begin(), simulation.memory.end(),
                      [&](const GpuMemory &gpu) { return gpu.peakBytes > limit * (1 + 1e-12); }))
        return std::nullopt;
    }
    PlanResult result = evaluateUnderPolicyOrThrow(problem, trial, kind, bounds);
    if (!result.valid || !strictlyLess(objectiveValue(result, objective), target))
      return std::nullopt;
    return result;
  } catch (const Error &) {
    return std::nullopt; // a trial the schedule cannot run: not an improvement
  }
}

std::vector<BoundaryMove> boundaryMoves(const Problem &problem, const Allocation &allocation) {
  return movesOf(allocation, successorLists(problem), predecessorLists(problem));
}

Allocation applyMove(const Allocation &allocation, const BoundaryMove &move) {
  Allocation moved = allocation;
  if (move.layer >= 0 && static_cast<size_t>(move.layer) < moved.stageOfLayer.size())
    moved.stageOfLayer[static_cast<size_t>(move.layer)] = move.toStage;
  return moved;
}

PlanResult improveByBoundaryMovesOrThrow(const Problem &problem, const PlanResult &plan,
                                         const LowerBounds &bounds, Objective objective,
                                         BoundaryMoveStats *stats, int threads) {
  BoundaryMoveStats local;
  BoundaryMoveStats &counts = stats ? *stats : local;
  counts = BoundaryMoveStats{};
  PlanResult current = plan;
  if (!plan.valid)
    return current;
  const auto successors = successorLists(problem);
  const auto predecessors = predecessorLists(problem);
  const int gpus = problem.platform.gpus;
  const int m = problem.training.microbatches;
  // Per micro-batch, what one GPU computes of a layer: its forward and backward at
  // the GPU's speed, and the forward again when every stage recomputes. Under
  // `auto` a move may clear a stage's mark, so marks are not counted there.
  const bool allRecompute = problem.training.recompute == RecomputePolicy::All;
  auto work = [&](size_t layer, int gpu) {
    const Layer &l = problem.layers[layer];
    return (l.workMs() + (allRecompute ? l.forwardMs : 0.0)) / problem.platform.speedOf(gpu);
  };
  for (int round = 0; round < kMaxBoundaryMoves; ++round) {
    const Allocation &allocation = current.allocation;
    std::vector<double> load(static_cast<size_t>(gpus), 0.0);
    for (size_t l = 0; l < allocation.stageOfLayer.size(); ++l) {
      const int gpu = allocation.gpuOfStage[static_cast<size_t>(allocation.stageOfLayer[l])];
      load[static_cast<size_t>(gpu)] += work(l, gpu);
    }
    // The simulated period is never below the busiest GPU's work per micro-batch
    // (simulatePlan), nor the iteration time below m times it: a move whose
    // busiest GPU is no faster than the plan cannot improve it and is not simulated.
    const double target = objectiveValue(current, objective);
    const double scale = objective == Objective::Period ? 1.0 : m;
    struct Candidate {
      BoundaryMove move;
      double bound;
    };
    std::vector<Candidate> candidates;
    for (const BoundaryMove &move : movesOf(allocation, successors, predecessors)) {
      const size_t layer = static_cast<size_t>(move.layer);
      const int from = allocation.gpuOfStage[static_cast<size_t>(move.fromStage)];
      const int to = allocation.gpuOfStage[static_cast<size_t>(move.toStage)];
      double busiest = 0;
      for (int g = 0; g < gpus; ++g) {
        double value = load[static_cast<size_t>(g)];
        if (g == from)
          value -= work(layer, from);
        if (g == to)
          value += work(layer, to);
        busiest = std::max(busiest, value);
      }
      if (strictlyLess(busiest * scale, target))
        candidates.push_back({move, busiest * scale});
    }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Candidate &a, const Candidate &b) { return a.bound < b.bound; });
    // Evaluated `batch` at a time on threads, where a simulation is long enough to
    // pay for them; the first improving one in candidate order is kept, as one
    // after the other would (the count is of those up to it).
    const size_t batch = static_cast<size_t>(
        allocation.numStages() * m >= kThreadedSimulationWork ? threadCount(threads) : 1);
    std::vector<std::optional<PlanResult>> evaluated;
    auto evaluation = [&](size_t index) -> std::optional<PlanResult> & {
      const size_t first = index / batch * batch;
      if (index == first)
        evaluated = mapOnThreads<std::optional<PlanResult>>(
            std::min(batch, candidates.size() - first), static_cast<int>(batch), [&](size_t k) {
              return improvingEvaluation(problem, applyMove(allocation, candidates[first + k].move),
                                         current.scheduleKind, bounds, objective, target);
            });
      return evaluated[index - first];
    };
    bool kept = false;
    for (size_t index = 0; index < candidates.size(); ++index) {
      ++counts.evaluations;
      std::optional<PlanResult> &improved = evaluation(index);
      if (!improved)
        continue;
      PlanResult moved = std::move(*improved);
      moved.algorithm = current.algorithm;
      moved.notes = current.notes;
      moved.predictedPeriodMs = current.predictedPeriodMs;
      moved.plannerSeconds = current.plannerSeconds;
      if (current.lowerBoundMs > moved.lowerBoundMs) {
        moved.lowerBoundMs = current.lowerBoundMs; // proven for the algorithm's model
        moved.gap = moved.periodMs / moved.lowerBoundMs - 1;
      }
      current = std::move(moved);
      ++counts.movesKept;
      kept = true;
      break;
    }
    if (!kept)
      return current;
  }
  counts.stoppedAtLimit = true;
  return current;
}

} // namespace partitioner
