// Lower bounds on the period (docs/partitioner.md, "Lower bounds"), reported with
// every plan as its optimality gap.
#ifndef PARTITIONER_BOUNDS_H
#define PARTITIONER_BOUNDS_H

#include "partitioner/Problem.h"

#include <string>

namespace partitioner {

struct LowerBounds {
  double workMs = 0;         ///< total work / total GPU speed
  double largestLayerMs = 0; ///< one layer cannot be split (contiguous or not)
  /// Little's law: on average a layer keeps span(l)/T copies alive, span(l) >= its
  /// downstream critical path, so ceil(span/T) copies (at most m) of s(l) plus its
  /// state must fit one GPU, and the time-averaged total must fit all GPUs.
  double memoryMs = 0;
  double bestMs = 0;               ///< the largest of the above
  bool memoryInfeasible = false;   ///< some layer cannot fit even with one copy
  std::string memoryReason;        ///< names the layer and its bytes when infeasible
};

LowerBounds computeLowerBounds(const Problem &problem);

} // namespace partitioner

#endif
