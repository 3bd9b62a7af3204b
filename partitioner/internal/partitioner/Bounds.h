// Lower bounds on the period (docs/partitioner.md, "Lower bounds"), reported with
// every plan as its optimality gap.
#ifndef PARTITIONER_BOUNDS_H
#define PARTITIONER_BOUNDS_H

#include "partitioner/Planner.h"

#include <string>

namespace partitioner {

LowerBounds computeLowerBounds(const Problem &problem);

/// What generalAllocationBound proved.
struct GeneralAllocationBound {
  /// No allocation, contiguous or general, that fits without recomputation has a
  /// period below this (the `lowerMs` it was given when nothing more was proven).
  double periodMs = 0;
  /// The lowest period at which the relaxation has a solution (infinity: none
  /// found); the bound cannot rise above it.
  double feasibleMs = kInfinity;
  int solves = 0, unknown = 0; ///< CBC solves, and those stopped by the time limit
  double seconds = 0;          ///< wall-clock time taken
  std::string notes;           ///< solves and stops (no times: the plan JSON is stable)
};

/// A lower bound on the period of every general allocation (docs/partitioner.md,
/// "A bound over every general allocation"): bisection on the period between
/// `lowerMs` (a proven bound, computeLowerBounds) and `upperMs` (a plan's period),
/// each step a CBC feasibility solve of a relaxation (per-GPU load, and per-GPU
/// memory by Little's law), within `seconds` of wall-clock time. When the relaxation
/// has no solution just below `upperMs`, the plan is within 0.1 % of every general
/// allocation. Holds only without recomputation; in a build without CBC it proves
/// nothing (periodMs = lowerMs, and the notes say why).
GeneralAllocationBound generalAllocationBound(const Problem &problem, double lowerMs,
                                              double upperMs, double seconds);

} // namespace partitioner

#endif
