// Replays a plan JSON (as writePlanJson writes it) on its problem: rebuilds the
// allocation from stage_of and gpu_of_stage, simulates it with the same simulator,
// and lists every reported figure the replay does not reproduce.
#ifndef PARTITIONER_REPLAY_H
#define PARTITIONER_REPLAY_H

#include "partitioner/Planner.h"

#include <string>
#include <vector>

namespace partitioner {

struct ReplayCheck {
  PlanResult replayed;
  /// One line per figure that differs (period, iteration time, a stage's memory).
  std::vector<std::string> mismatches;
  bool ok() const { return mismatches.empty(); }
};

/// Throws Error when the JSON does not describe a plan of `problem` (a layer's
/// nodes on different stages, a node missing, an unknown schedule).
ReplayCheck replayPlan(const Problem &problem, const std::string &planJson);

} // namespace partitioner

#endif
