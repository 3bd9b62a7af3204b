// Local improvement of a plan: one layer moved across a stage boundary
// (boundaryMoves, Planner.h), the plan evaluated again by the simulator under the
// same schedule and memory limit, and strictly better moves kept until none is.
#ifndef PARTITIONER_BOUNDARYMOVES_H
#define PARTITIONER_BOUNDARYMOVES_H

#include "partitioner/Planner.h"

#include <optional>
#include <string>

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
/// result keeps the plan's algorithm, notes and proven lower bound. Where a plan
/// has at least kThreadedSimulationWork stages x micro-batches (Parallel.h), the
/// moves are evaluated `threads` at a time (PlanOptions::threads), with the same result.
PlanResult improveByBoundaryMovesOrThrow(const Problem &problem, const PlanResult &plan,
                                         const LowerBounds &bounds, Objective objective,
                                         BoundaryMoveStats *stats = nullptr, int threads = 1);

/// What improveByBlockMoves did.
struct BlockMoveStats {
  int movesKept = 0;
  int evaluations = 0;
  /// Moves not simulated: the destination GPU cannot hold the block's parameters
  /// with their state and one micro-batch of its saved activations.
  long skippedForMemory = 0;
  double stageMicrobatches = 0;
  bool budgetSpent = false; ///< stopped at the budget, more may improve
};

/// What the block moves may spend: simulations, and simulated work (each
/// simulation counts its stages times the micro-batches, about what it costs).
/// Deterministic, unlike a time budget.
struct BlockMoveBudget {
  int simulations = 400;
  double stageMicrobatches = kInfinity;
};
/// `general-moves`: 400 simulations.
constexpr BlockMoveBudget kGeneralMovesBudget{400, kInfinity};
/// `best`'s last step: 400 simulations, and as much simulated work as 400 plans
/// of 6 stages (at S = 16, about 130 simulations: `best` stays under a second).
constexpr BlockMoveBudget kBestBlockMoveBudget{400, 400.0 * 6 * 32};

/// `plan` (valid) after improving block moves (algorithms/GeneralMoves.cpp): over
/// one topological order that keeps each stage's layers together, a block is the
/// first or last k positions of a stage (or all of it), and it goes to any other
/// GPU, so that a GPU may hold several stages. The moves whose busiest GPU's work
/// per micro-batch could still beat the plan, and whose destination can hold the
/// block's parameters with their state and one micro-batch of its saved
/// activations, are simulated from the lowest such bound up under
/// plan.scheduleKind, and the first strictly better valid one is kept, until none
/// improves or the budget is spent. The result keeps the plan's algorithm, notes
/// and proven lower bound. Evaluated `threads` at a time as the boundary moves are,
/// with the same result and counts.
PlanResult improveByBlockMovesOrThrow(const Problem &problem, const PlanResult &plan,
                                      const LowerBounds &bounds, Objective objective,
                                      const BlockMoveBudget &budget,
                                      BlockMoveStats *stats = nullptr, int threads = 1);

/// "X ms: N block moves -> Y ms, S stages on G GPUs (E simulations; K moves that
/// cannot fit not simulated)".
std::string describeBlockMoves(const PlanResult &start, const PlanResult &moved,
                               const BlockMoveStats &stats, Objective objective);

} // namespace partitioner

#endif
