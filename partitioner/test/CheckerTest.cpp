// The checker rejects broken schedules and timelines (each case is built to fail).
#include "partitioner/Error.h"
#include "partitioner/Checker.h"
#include "partitioner/Simulator.h"

#include <gtest/gtest.h>

namespace partitioner {
namespace {

Problem twoStages() {
  Problem problem;
  for (int s = 0; s < 2; ++s) {
    Layer layer;
    layer.name = "l" + std::to_string(s);
    layer.forwardMs = 1;
    layer.backwardMs = 2;
    layer.outputBytes = 1e6;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 2;
  problem.platform.intraNode = LinkSpec{1e9, 0.1}; // 1 MB: 1.1 ms
  problem.training.microbatches = 2;
  orThrow(problem.finalize());
  return problem;
}

Allocation split() {
  Allocation allocation;
  allocation.stageOfLayer = {0, 1};
  allocation.gpuOfStage = {0, 1};
  return allocation;
}

Action F(int stage, int mb) { return {ActionKind::Forward, stage, mb}; }
Action B(int stage, int mb) { return {ActionKind::Backward, stage, mb}; }

Schedule valid() {
  Schedule schedule;
  schedule.microbatches = 2;
  schedule.actions = {{F(0, 0), F(0, 1), B(0, 0), B(0, 1)}, {F(1, 0), B(1, 0), F(1, 1), B(1, 1)}};
  return schedule;
}

bool mentions(const CheckReport &report, const std::string &text) {
  for (const auto &v : report.violations)
    if (v.find(text) != std::string::npos)
      return true;
  return false;
}

TEST(Checker, AcceptsAValidScheduleAndItsSimulation) {
  Problem problem = twoStages();
  Schedule schedule = valid();
  EXPECT_TRUE(checkSchedule(problem, split(), schedule).ok());
  SimulationResult result = simulate(problem, split(), schedule);
  ASSERT_TRUE(result.completed);
  EXPECT_TRUE(checkTimeline(problem, split(), schedule, result.timeline).ok());
}

TEST(Checker, RejectsMissingDuplicateAndMisplacedActions) {
  Problem problem = twoStages();
  Schedule missing = valid();
  missing.actions[1].pop_back();
  EXPECT_TRUE(mentions(checkSchedule(problem, split(), missing), "B1@s1 is missing"));
  Schedule duplicate = valid();
  duplicate.actions[0].push_back(F(0, 1));
  EXPECT_TRUE(mentions(checkSchedule(problem, split(), duplicate), "more than once"));
  Schedule misplaced = valid();
  misplaced.actions[0].push_back(F(1, 0));
  misplaced.actions[1].erase(misplaced.actions[1].begin());
  EXPECT_TRUE(mentions(checkSchedule(problem, split(), misplaced), "listed on GPU 0"));
}

TEST(Checker, RejectsDeadlocks) {
  Problem problem = twoStages();
  // GPU 1 wants F1 first, which needs GPU 0's F1, which comes after B0 on GPU 0, which
  // needs GPU 1's B0 -- behind F1 on GPU 1.
  Schedule cyclic;
  cyclic.microbatches = 2;
  cyclic.actions = {{F(0, 0), B(0, 0), F(0, 1), B(0, 1)}, {F(1, 1), F(1, 0), B(1, 0), B(1, 1)}};
  CheckReport report = checkSchedule(problem, split(), cyclic);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(mentions(report, "deadlock"));
  SimulationResult result = simulate(problem, split(), cyclic);
  EXPECT_FALSE(result.completed);
  EXPECT_NE(result.error.find("deadlock"), std::string::npos);
  // A backward before its own forward on the same GPU.
  Schedule selfBlocked = valid();
  std::swap(selfBlocked.actions[1][0], selfBlocked.actions[1][1]);
  EXPECT_TRUE(mentions(checkSchedule(problem, split(), selfBlocked), "deadlock"));
}

TEST(Checker, RejectsOverlapsAndBrokenDependenciesInTimelines) {
  Problem problem = twoStages();
  Schedule schedule = valid();
  SimulationResult result = simulate(problem, split(), schedule);
  ASSERT_TRUE(result.completed);
  auto overlapping = result.timeline;
  for (auto &t : overlapping)
    if (t.action == F(0, 1)) {
      t.startMs -= 0.5;
      t.endMs -= 0.5;
    }
  EXPECT_TRUE(mentions(checkTimeline(problem, split(), schedule, overlapping), "overlap on GPU 0"));
  auto early = result.timeline;
  for (auto &t : early)
    if (t.action == F(1, 0)) {
      // Starts when F0@s0 ends, ignoring the 1.1 ms transfer.
      t.startMs = 1.0;
      t.endMs = 2.0;
    }
  CheckReport report = checkTimeline(problem, split(), schedule, early);
  EXPECT_TRUE(mentions(report, "broken dependency: F0@s1")) << (report.ok() ? "" : report.violations.front());
  auto reordered = result.timeline;
  for (auto &t : reordered)
    if (t.action == F(0, 1))
      t.action = F(0, 0);
  EXPECT_FALSE(checkTimeline(problem, split(), schedule, reordered).ok());
}

} // namespace
} // namespace partitioner
