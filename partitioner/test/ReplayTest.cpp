// Replaying a plan JSON reproduces the figures it reports, and a plan whose
// figures were altered is caught.
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/Output.h"
#include "partitioner/Error.h"
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <random>
#include <sstream>

namespace partitioner {
namespace {
using testing::randomChain;
using testing::randomDag;

std::string planJsonOf(const Problem &problem, const PlanningReport &report) {
  std::ostringstream out;
  writePlanJson(problem, report, out);
  return out.str();
}

TEST(Replay, EveryScheduleOfRandomProblemsReplaysExactly) {
  std::mt19937 rng(7);
  int replayed = 0;
  for (int trial = 0; trial < 40; ++trial) {
    Problem problem = trial % 2 ? randomDag(rng, 12, 3) : randomChain(rng, 10, 3);
    problem.platform.memoryBytesPerGpu = trial % 3 ? kInfinity : problem.platform.memoryBytesPerGpu;
    problem.training.schedule =
        std::vector<ScheduleKind>{ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                                  ScheduleKind::Periodic, ScheduleKind::ZeroBubble}[trial % 4];
    orThrow(problem.finalize());
    PlanningReport report = planOrThrow(problem);
    if (!report.best())
      continue;
    ReplayCheck check = orThrow(replayPlan(problem, planJsonOf(problem, report)));
    EXPECT_TRUE(check.ok()) << "trial " << trial << ": " << check.mismatches.front();
    ++replayed;
  }
  EXPECT_GT(replayed, 20);
}

/// A random 8-layer chain on 2 GPUs with unlimited memory, and its plan JSON.
std::pair<Problem, nlohmann::json> plannedChain(unsigned seed) {
  std::mt19937 rng(seed);
  Problem problem = randomChain(rng, 8, 2);
  problem.platform.memoryBytesPerGpu = kInfinity;
  orThrow(problem.finalize());
  PlanningReport report = planOrThrow(problem);
  EXPECT_NE(report.best(), nullptr);
  return {problem, nlohmann::json::parse(planJsonOf(problem, report))};
}

TEST(Replay, AlteredFiguresAreReported) {
  auto [problem, json] = plannedChain(3);
  ASSERT_FALSE(json.contains("error"));
  json["period_ms"] = json["period_ms"].get<double>() * 0.9;
  json["stage_metrics"][0]["memory_bytes"] = 1.0;
  ReplayCheck check = orThrow(replayPlan(problem, json.dump()));
  ASSERT_EQ(check.mismatches.size(), 2u);
  EXPECT_NE(check.mismatches[0].find("period_ms"), std::string::npos);
  EXPECT_NE(check.mismatches[1].find("stage 0 memory_bytes"), std::string::npos);
}

TEST(Replay, APlanOfAnotherModelIsRejected) {
  auto [problem, json] = plannedChain(5);
  ASSERT_FALSE(json.contains("error"));
  json["stage_of"].erase(json["stage_of"].begin());
  EXPECT_THROW(orThrow(replayPlan(problem, json.dump())), Error);
}

} // namespace
} // namespace partitioner
