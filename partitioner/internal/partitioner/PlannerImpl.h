// What plan() is made of, for the partitioner's own algorithms, tools and tests.
#ifndef PARTITIONER_PLANNERIMPL_H
#define PARTITIONER_PLANNERIMPL_H

#include "partitioner/Algorithm.h"
#include "partitioner/Bounds.h"
#include "partitioner/Checker.h"
#include "partitioner/Planner.h"
#include "partitioner/Simulator.h"

namespace partitioner {

/// plan() and evaluateAllocation() as the partitioner's own code calls them:
/// errors thrown as Error (evaluateOrThrow assumes a valid allocation).
PlanningReport planOrThrow(const Problem &problem, const PlanOptions &options = {});
/// evaluateOrThrow takes the allocation's recompute flags as they are (replay);
/// evaluateUnderPolicyOrThrow applies the problem's RecomputePolicy first: All
/// marks every stage; Auto keeps the allocation's flags, marks stages of GPUs that
/// overflow (the one that frees the most bytes first) until every GPU fits or none
/// is left, keeps recomputing every stage instead when that is valid and faster,
/// then clears each mark whose stage fits without it at no cost in period.
/// Fills in the messages a plan's timeline holds (GpuMemory::messageBytes, in
/// its simulation and its GPU metrics) where the simulation left them out: the
/// problem does not charge them, and the planner reports them for its results.
void recordMessages(const Problem &problem, PlanResult &result);
PlanResult evaluateOrThrow(const Problem &problem, const Allocation &allocation,
                           ScheduleKind kind, const LowerBounds &bounds);
PlanResult evaluateUnderPolicyOrThrow(const Problem &problem, const Allocation &allocation,
                                      ScheduleKind kind, const LowerBounds &bounds);

/// True when `a` is a better plan than `b` (both valid): period then iteration time
/// (the other way round for Objective::IterationTime), crossing bytes, memory headroom.
bool betterPlan(const PlanResult &a, const PlanResult &b, Objective objective = Objective::Period);

/// Sets report.chosen (and bestByOtherObjective): candidates in order of preference
/// are checked again with checkSchedule; one that fails is marked invalid with a
/// note ("dropped: ...") and the next one wins. With options.requireSchedule only
/// plans of the problem's schedule family compete.
void chooseBest(const Problem &problem, PlanningReport &report, const PlanOptions &options);

/// Relabels the GPUs of `allocation` so that they are numbered in pipeline order of
/// their first stage (stage 0 on GPU 0, the next GPU to appear is GPU 1, ...), when
/// the GPUs are interchangeable (same speed, one node); otherwise returns it as is.
Allocation numberGpusInPipelineOrder(const Problem &problem, const Allocation &allocation);

} // namespace partitioner

#endif
