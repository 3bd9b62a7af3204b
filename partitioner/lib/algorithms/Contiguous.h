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
#include <sstream>

namespace partitioner {
namespace detail {

/// solve(model, upperBound) returns a partition (or nothing); smaller periodMs wins.
inline AlgorithmOutput solveOnLattices(
    const Problem &problem, const AlgorithmContext &context,
    const std::function<std::optional<CutPartition>(const StageModel &, double)> &solve,
    const std::function<std::string(const StageModel &)> &explainFailure) {
  AlgorithmOutput output;
  const CutLattice chain = chainLattice(problem, topologicalOrder(problem));
  const StageModel chainModel(problem, chain);
  std::optional<CutPartition> best = solve(chainModel, kInfinity);
  const CutLattice *bestLattice = &chain;
  std::optional<CutLattice> ideals;
  std::ostringstream notes;
  notes << "chain of " << problem.layers.size() << " layers";
  if (context.options.dagAware && !problem.isChain()) {
    ideals = idealLattice(problem, context.options.maxDownsets);
    if (ideals) {
      const StageModel idealModel(problem, *ideals);
      auto dag = solve(idealModel, best ? best->periodMs : kInfinity);
      notes.str("");
      notes << "DAG-aware cuts over " << ideals->numCuts() << " downsets";
      if (dag && (!best || dag->periodMs < best->periodMs * (1 - 1e-12))) {
        best = dag;
        bestLattice = &*ideals;
      }
    } else {
      notes << " (more than " << context.options.maxDownsets
            << " downsets: one topological order)";
    }
  }
  output.notes = notes.str();
  if (!best) {
    output.reason = explainFailure(chainModel);
    return output;
  }
  output.allocation = allocationFromCuts(problem, *bestLattice, *best);
  output.allocation->inFlightLimit = best->inFlight;
  output.allocation->targetPeriodMs = best->periodMs;
  output.predictedPeriodMs = best->periodMs;
  return output;
}

} // namespace detail
} // namespace partitioner

#endif
