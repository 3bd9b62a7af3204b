// Independent validity checks of schedules: every action exactly once, no deadlock
// (symbolic execution of the action lists), and for a timeline: no two actions
// overlapping on a GPU and every dependency (with its transfer) respected.
#ifndef PARTITIONER_CHECKER_H
#define PARTITIONER_CHECKER_H

#include "partitioner/Simulator.h"

#include <string>
#include <vector>

#include "partitioner/Planner.h"

namespace partitioner {



/// Timing checks of a timeline (usually the simulator's): per-GPU overlaps, each
/// action's duration, dependencies with their minimal transfer time, per-GPU order.
CheckReport checkTimeline(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule, const std::vector<TimedAction> &timeline);
/// checkSchedule and checkTimeline on the allocation's stage graph (buildStageGraph),
/// built once by a caller that simulates the plan too.
CheckReport checkSchedule(const StageGraph &graph, const Schedule &schedule);
CheckReport checkTimeline(const Problem &problem, const StageGraph &graph,
                          const Schedule &schedule, const std::vector<TimedAction> &timeline);

} // namespace partitioner

#endif
