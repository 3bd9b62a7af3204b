// Data-parallel replicas of a pipeline (docs/partitioner.md, "Data-parallel
// replicas"): what the gradient all-reduces add to one plan of a replica.
#ifndef PARTITIONER_REPLICAS_H
#define PARTITIONER_REPLICAS_H

#include "partitioner/Planner.h"

#include <vector>

namespace partitioner {

/// The all-reduces of one plan of a replica's pipeline, and the iteration with them.
struct AllReduceFigures {
  AllReduceGroup group;              ///< the replicas of the pipeline's first GPU
  std::vector<double> gradientBytes; ///< per GPU of the pipeline
  std::vector<double> allReduceMs;   ///< per GPU of the pipeline
  double pipelineIterationMs = 0;    ///< the plan's own iteration
  /// With the all-reduces, each GPU's from the end of its last backward.
  double iterationMs = 0;
};

/// The figures of `plan` (a plan of `pipelineProblem`) when the GPUs hold
/// `split.replicas` replicas of it under `split.layout`.
AllReduceFigures allReduceFigures(const Problem &pipelineProblem, const PlanResult &plan,
                                  const ReplicaPlan &split);

} // namespace partitioner

#endif // PARTITIONER_REPLICAS_H
