// Local improvement of a plan: one layer moved across a stage boundary
// (boundaryMoves, Planner.h), the plan evaluated again by the simulator under the
// same schedule and memory limit, and strictly better moves kept until none is.
#ifndef PARTITIONER_BOUNDARYMOVES_H
#define PARTITIONER_BOUNDARYMOVES_H

#include "partitioner/Planner.h"

#include <optional>

namespace partitioner {

/// The objective's first criterion of a plan: its period or its iteration time.
double objectiveValue(const PlanResult &plan, Objective objective);

/// a < b by more than the tolerance betterPlan uses to call two figures equal.
bool strictlyLess(double a, double b);

/// `trial` evaluated with evaluateUnderPolicyOrThrow when the result is valid and
/// strictly below `target` by `objective`, else nothing (also when the schedule
/// cannot run it). Without recomputation the simulation alone, whose period and
/// memory are the evaluation's, rejects a trial that is no better or overflows
/// before the evaluation adds its checks and metrics. The local searches
/// (boundary moves, `general-moves`) judge their candidates with it.
std::optional<PlanResult> improvingEvaluation(const Problem &problem, const Allocation &trial,
                                              ScheduleKind kind, const LowerBounds &bounds,
                                              Objective objective, double target);

/// What improveByBoundaryMoves did: the moves it kept and the plans it simulated.
struct BoundaryMoveStats {
  int movesKept = 0;
  int evaluations = 0;
  bool stoppedAtLimit = false; ///< kMaxBoundaryMoves moves kept, more may improve
};

/// Moves kept at most per plan: each is one round over the plan's boundaries.
constexpr int kMaxBoundaryMoves = 256;

/// `plan` (valid) after improving moves: each round evaluates, with
/// evaluateUnderPolicyOrThrow and plan.scheduleKind, the moves whose busiest GPU's
/// work per micro-batch (a lower bound on the period, and times m on the iteration
/// time) could still beat the plan, most relieving first, and keeps the first
/// valid one that is strictly better by `objective`'s first criterion. Stops when
/// a round keeps none (no move improves the plan) or after kMaxBoundaryMoves. The
/// result keeps the plan's algorithm, notes and proven lower bound.
PlanResult improveByBoundaryMovesOrThrow(const Problem &problem, const PlanResult &plan,
                                         const LowerBounds &bounds, Objective objective,
                                         BoundaryMoveStats *stats = nullptr);

} // namespace partitioner

#endif
