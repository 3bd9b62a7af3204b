// Lower bounds on the period (docs/partitioner.md, "Lower bounds"), reported with
// every plan as its optimality gap.
#ifndef PARTITIONER_BOUNDS_H
#define PARTITIONER_BOUNDS_H

#include "partitioner/Planner.h"

#include <string>

namespace partitioner {


LowerBounds computeLowerBounds(const Problem &problem);

} // namespace partitioner

#endif
