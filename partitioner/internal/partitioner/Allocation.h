// An allocation maps layers to stages and stages to GPUs. Stages are numbered in
// pipeline order; a GPU may hold several stages (interleaved / general allocations).
#ifndef PARTITIONER_ALLOCATION_H
#define PARTITIONER_ALLOCATION_H

#include "partitioner/CutLattice.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Planner.h"

#include <vector>

namespace partitioner {


/// Throws Error when a layer has no stage, a stage is empty, a GPU index is out of
/// range, or a tensor flows from a later stage to an earlier one.
void validateAllocation(const Problem &problem, const Allocation &allocation);

/// Allocation of a lattice partition (stage i = cuts[i+1] \ cuts[i] on gpus[i]).
Allocation allocationFromCuts(const Problem &problem, const CutLattice &lattice,
                              const CutPartition &partition);

/// Contiguous split of `order` at the given stage sizes, stage i on GPU i.
Allocation allocationFromSizes(const Problem &problem, const std::vector<int> &order,
                               const std::vector<int> &stageSizes);

/// The stage-level graph an allocation induces, used by the schedule generators, the
/// simulator and the checker. A tensor is sent once to each stage that consumes it.
struct StageGraph {
  struct Edge {
    int stage;
    double bytes;
  };
  int numStages = 0;
  std::vector<int> gpu;
  /// At the GPU's speed. A recomputing stage's backwardMs (and its input-gradient
  /// part, backwardMs - weightGradientMs) includes the recomputed forward.
  std::vector<double> forwardMs, backwardMs, weightGradientMs;
  std::vector<double> savedBytes;
  /// Its layers' parameters, and the shared parameters it owns (the first stage
  /// reading one).
  std::vector<double> parameterBytes;
  /// Shared parameters an earlier stage owns, held by the first stage on each other
  /// GPU that reads them (one copy per GPU): the weight and its gradient.
  std::vector<double> readParameterBytes;
  std::vector<double> inputBytes; ///< the model inputs its layers read (Layer::inputBytes)
  /// The largest Layer::workspaceBytes among its layers: held while it runs.
  std::vector<double> workspaceBytes;
  /// Per stage: recomputes its forward in the backward (Allocation::recompute).
  std::vector<bool> recompute;
  /// What a stage keeps per micro-batch when it recomputes: what it receives and
  /// the model inputs it reads.
  double checkpointBytes(int stage) const {
    const size_t s = static_cast<size_t>(stage);
    return inBytes[s] + inputBytes[s];
  }
  /// Bytes a stage keeps per micro-batch in flight from its F to the end of its B
  /// (or W): its saved activations, or its checkpoint when it recomputes.
  double keptBytes(int stage) const {
    const size_t s = static_cast<size_t>(stage);
    return recompute[s] ? checkpointBytes(stage) : savedBytes[s];
  }
  /// Bytes a recomputing stage holds from the start of its B (or Bi) to the end of
  /// its B (or W): one micro-batch's saved activations, recomputed; 0 otherwise.
  double recomputedBytes(int stage) const {
    const size_t s = static_cast<size_t>(stage);
    return recompute[s] ? savedBytes[s] : 0.0;
  }
  std::vector<double> inBytes, outBytes; ///< per micro-batch, forward direction
  std::vector<std::vector<Edge>> predecessors, successors;
  std::vector<std::vector<int>> layers;
};

StageGraph buildStageGraph(const Problem &problem, const Allocation &allocation);

/// Bytes crossing stages per micro-batch (forward direction), summed over stages.
double crossingBytes(const StageGraph &graph);

} // namespace partitioner

#endif
