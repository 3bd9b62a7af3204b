// Data-parallel replicas of a pipeline (docs/partitioner.md, "Data-parallel
// replicas"): what the gradient all-reduces add to one plan of a replica.
#ifndef PARTITIONER_REPLICAS_H
#define PARTITIONER_REPLICAS_H

#include "partitioner/Planner.h"

#include <vector>

namespace partitioner {

/// The figures of `plan` (a plan of `pipelineProblem`) when the GPUs hold
/// `split.replicas` replicas of it under `split.layout`.
AllReduceFigures allReduceFigures(const Problem &pipelineProblem, const PlanResult &plan,
                                  const ReplicaPlan &split);

} // namespace partitioner

#endif // PARTITIONER_REPLICAS_H
