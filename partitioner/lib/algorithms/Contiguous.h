// Internal helper shared by the contiguous algorithms: run a lattice DP on the chain of
// one topological order and, for DAGs with few enough downsets, on all downsets
// (DAG-aware cuts), and keep the better partition.
#ifndef PARTITIONER_ALGORITHMS_CONTIGUOUS_H
#define PARTITIONER_ALGORITHMS_CONTIGUOUS_H

#include "partitioner/Algorithm.h"
#include "partitioner/CutLattice.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"
#include "partitioner/Planner.h"

#include <functional>
#include <queue>
#include <random>
#include <tuple>
#include <sstream>

namespace partitioner {
namespace detail {

/// A topological order that keeps `allocation`'s stages contiguous and, inside each
/// stage, puts first the layers that could move to the previous stage (all inputs from
/// earlier stages) and last those that could move to the next (all consumers later),
/// so that a chain DP on it can shift every boundary across both.
inline std::vector<int> flexibleOrder(const Problem &problem, const Allocation &allocation,
                                      const std::vector<int> &previousOrder, unsigned seed) {
  const size_t count = problem.layers.size();
  auto successors = successorLists(problem);
  auto predecessors = predecessorLists(problem);
  std::vector<int> position(count, 0);
  for (size_t i = 0; i < previousOrder.size(); ++i)
    position[static_cast<size_t>(previousOrder[i])] = static_cast<int>(i);
  // Seed 0 keeps the previous order among equals; others shuffle the ties
  // (deterministically) to try other subsets of movable layers.
  if (seed != 0) {
    std::mt19937 rng(seed);
    for (auto &p : position)
      p = static_cast<int>(rng() % 1000003);
  }
  std::vector<int> priority(count, 1), indegree(count, 0);
  for (size_t l = 0; l < count; ++l) {
    const int stage = allocation.stageOfLayer[l];
    bool sourceOfStage = true, sinkOfStage = true;
    for (int p : predecessors[l])
      sourceOfStage &= allocation.stageOfLayer[static_cast<size_t>(p)] < stage;
    for (int c : successors[l])
      sinkOfStage &= allocation.stageOfLayer[static_cast<size_t>(c)] > stage;
    priority[l] = sourceOfStage ? 0 : sinkOfStage ? 2 : 1;
    indegree[l] = static_cast<int>(predecessors[l].size());
  }
  using Key = std::tuple<int, int, int, int>; // stage, priority, old position, layer
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  auto push = [&](size_t l) {
    ready.push({allocation.stageOfLayer[l], priority[l], position[l], static_cast<int>(l)});
  };
  for (size_t l = 0; l < count; ++l)
    if (indegree[l] == 0)
      push(l);
  std::vector<int> order;
  while (!ready.empty()) {
    const int layer = std::get<3>(ready.top());
    ready.pop();
    order.push_back(layer);
    for (int c : successors[static_cast<size_t>(layer)])
      if (--indegree[static_cast<size_t>(c)] == 0)
        push(static_cast<size_t>(c));
  }
  return order;
}

/// DAG-aware cuts are tried when the downsets are at most PlanOptions::maxDownsets and
/// the stages between them no slower than the chain's plan (the pairs every DP pass
/// walks) at most this many: a DP pass then takes well under a second.
constexpr size_t kMaxDownsetStages = 1000000;

/// The local search over orders tries at most kOrderRounds orders, and stops after
/// kRoundsWithoutImprovement in a row that improve nothing: on Inception-v3 the
/// improvements come at most 8 rounds apart (S = 4, 8, 16; 8 and 16 GB), and each
/// round is a full DP on a new order.
constexpr unsigned kOrderRounds = 48;
constexpr unsigned kRoundsWithoutImprovement = 12;
constexpr unsigned kSpanRoundsWithoutImprovement = 4;
/// The local search over orders runs up to this many layers (one topological
/// order beyond), and `madpipe`'s 1F1B span search too (its min-max DP beyond:
/// the span search costs about 15 DPs, 4 s more on a 5,000-layer chain).
constexpr size_t kMaxLayersForSearch = 3000;

/// solve(model, upperBound) returns a partition (or nothing); smaller periodMs wins.
/// The local search over orders stops after `patience` rounds in a row without
/// improvement (kRoundsWithoutImprovement unless a costlier solve asks for fewer).
inline AlgorithmOutput solveOnLattices(
    const Problem &problem, const AlgorithmContext &context,
    const std::function<std::optional<CutPartition>(const StageModel &, double)> &solve,
    const std::function<std::string(const StageModel &)> &explainFailure,
    unsigned patience = kRoundsWithoutImprovement) {
  AlgorithmOutput output;
  const CutLattice chain = chainLattice(problem, topologicalOrder(problem));
  const StageModel chainModel(problem, chain);
  std::optional<CutPartition> best = solve(chainModel, kInfinity);
  const CutLattice *bestLattice = &chain;
  std::optional<CutLattice> own;     // the ideal lattice, when no cache holds it
  const CutLattice *ideals = nullptr; // the ideal lattice, when it is used
  std::vector<CutLattice> lattices;  // orders tried by the local search (kept alive)
  std::ostringstream notes;
  notes << "chain of " << problem.layers.size() << " layers";
  if (context.options.dagAware && !problem.isChain()) {
    const std::optional<CutLattice> *built =
        context.ideals ? context.ideals->find(problem, context.options.maxDownsets) : nullptr;
    if (!built) {
      own = idealLattice(problem, context.options.maxDownsets);
      built = &own;
    }
    if (*built)
      ideals = &**built;
    std::ostringstream tooMany;
    if (!ideals) {
      tooMany << "more than " << context.options.maxDownsets << " downsets";
    } else if (countLatticeStages(problem, *ideals, best ? best->periodMs : kInfinity,
                                  kMaxDownsetStages) > kMaxDownsetStages) {
      // Many blocks in series: few downsets each, but quadratically many stages.
      tooMany << ideals->numCuts() << " downsets, more than " << kMaxDownsetStages
              << " stages between them";
      ideals = nullptr;
    }
    if (ideals) {
      const StageModel idealModel(problem, *ideals);
      auto dag = solve(idealModel, best ? best->periodMs : kInfinity);
      notes.str("");
      notes << "DAG-aware cuts over " << ideals->numCuts() << " downsets";
      if (dag && (!best || dag->periodMs < best->periodMs * (1 - 1e-12))) {
        best = dag;
        bestLattice = ideals;
      }
    } else {
      notes << " (" << tooMany.str();
      // Local search over topological orders: re-solve on an order built around the
      // current stages that lets every boundary move across parallel branches.
      std::vector<int> order = topologicalOrder(problem);
      int improvements = 0;
      unsigned lastImprovement = 0;
      lattices.reserve(64);
      for (unsigned round = 0;
           round < kOrderRounds && best && problem.layers.size() <= kMaxLayersForSearch &&
                               round < lastImprovement + patience;
           ++round) {
        const Allocation current = allocationFromCuts(problem, *bestLattice, *best);
        std::vector<int> candidateOrder = flexibleOrder(problem, current, order, round);
        lattices.push_back(chainLattice(problem, candidateOrder));
        const StageModel model(problem, lattices.back());
        auto candidate = solve(model, best->periodMs);
        if (candidate && candidate->periodMs < best->periodMs * (1 - 1e-12)) {
          best = candidate;
          bestLattice = &lattices.back();
          order = candidateOrder;
          ++improvements;
          lastImprovement = round + 1;

        } else {
          lattices.pop_back();
        }
      }
      if (problem.layers.size() <= kMaxLayersForSearch)
        notes << "; local search over orders: " << improvements << " improvements)";
      else
        notes << ": one topological order)";
    }
  }
  output.notes = notes.str();
  if (!best) {
    output.reason = explainFailure(chainModel);
    return output;
  }
  output.allocation = allocationFromCuts(problem, *bestLattice, *best);
  output.everySplit = problem.isChain() || ideals != nullptr;
  output.allocation->inFlightLimit = best->inFlight;
  output.allocation->targetPeriodMs = best->periodMs;
  output.predictedPeriodMs = best->periodMs;
  return output;
}

/// `madpipe` under GPipe and 1F1B-like schedules: the memory-aware min-max DP
/// (in-flight counts by position) over the lattices of solveOnLattices; with
/// `spans`, each lattice's partition is the smallest T at which the 1F1B spans fit
/// with their transfers timed so (oneFOneBMinPeriod), the min-max bottleneck its
/// lower bound. The `ilp` warm start asks for it without spans: its own model is
/// the min-max one.
AlgorithmOutput madPipe(const Problem &problem, const AlgorithmContext &context,
                        std::optional<TransferModel> spans);

/// The 1F1B span model's period (port slots) of a contiguous plan, along a
/// topological order that keeps its stages together: oneFOneBSpanPeriod from
/// `fromMs`, the period it was planned at (or a lower bound on it). Infinity when
/// a stage is not one run of that order.
double spanPeriodOf(const Problem &problem, const Allocation &allocation, double fromMs);

} // namespace detail
} // namespace partitioner

#endif
