// The planner's choice: only a plan whose schedule passes the checker wins, the
// objective decides between period and iteration time, GPUs are numbered in
// pipeline order, and every algorithm's result is reported as it finishes.
#include "partitioner/Planner.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Output.h"
#include "partitioner/Parallel.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace partitioner {
namespace {

Problem chain(int layers, int gpus, int microbatches) {
  Problem problem;
  for (int l = 0; l < layers; ++l) {
    Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.forwardMs = 1 + l % 3;
    layer.backwardMs = 2 * layer.forwardMs;
    layer.outputBytes = 1e6;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = gpus;
  problem.training.microbatches = microbatches;
  orThrow(problem.finalize());
  return problem;
}

TEST(Planner, ACandidateWhoseScheduleFailsTheCheckerIsDroppedAndTheNextWins) {
  Problem problem = chain(8, 4, 8);
  PlanOptions options;
  options.algorithms = {"balanced", "uniform", "params"};
  PlanningReport report = planOrThrow(problem, options);
  ASSERT_NE(report.best(), nullptr);
  const int first = report.chosen;
  // Break the winner's schedule: the first GPU runs a backward before the
  // forward it needs, so its list deadlocks.
  std::vector<Action> &list = report.results[static_cast<size_t>(first)].schedule.actions[0];
  auto backward = std::find_if(list.begin(), list.end(),
                               [](const Action &a) { return a.kind == ActionKind::Backward; });
  ASSERT_NE(backward, list.end());
  std::rotate(list.begin(), backward, backward + 1);
  chooseBest(problem, report, options);
  ASSERT_NE(report.chosen, -1);
  EXPECT_NE(report.chosen, first);
  const PlanResult &dropped = report.results[static_cast<size_t>(first)];
  EXPECT_FALSE(dropped.valid);
  EXPECT_EQ(dropped.reason.rfind("dropped: its schedule fails the checker: deadlock", 0), 0u)
      << dropped.reason;
  // The new winner is the best of the others.
  for (size_t i = 0; i < report.results.size(); ++i)
    if (report.results[i].valid)
      EXPECT_FALSE(betterPlan(report.results[i], *report.best())) << report.results[i].algorithm;
  // Nothing valid left: no plan rather than an unchecked one.
  for (PlanResult &result : report.results)
    if (!result.schedule.actions.empty())
      std::reverse(result.schedule.actions[0].begin(), result.schedule.actions[0].end());
  chooseBest(problem, report, options);
  EXPECT_EQ(report.best(), nullptr);
}

TEST(Planner, TheObjectiveChoosesBetweenPeriodAndIterationTime) {
  PlanResult shortPeriod, shortIteration;
  shortPeriod.periodMs = 1.0;
  shortPeriod.iterationMs = 50;
  shortIteration.periodMs = 1.1;
  shortIteration.iterationMs = 40;
  EXPECT_TRUE(betterPlan(shortPeriod, shortIteration, Objective::Period));
  EXPECT_TRUE(betterPlan(shortIteration, shortPeriod, Objective::IterationTime));
  // Ties on the first criterion go to the other.
  shortIteration.periodMs = 1.0;
  EXPECT_TRUE(betterPlan(shortIteration, shortPeriod, Objective::Period));
  EXPECT_EQ(orThrow(parseObjective("iteration")), Objective::IterationTime);
  EXPECT_EQ(orThrow(parseObjective("period")), Objective::Period);
  EXPECT_THROW(orThrow(parseObjective("speed")), Error);
}

TEST(Planner, ReportsTheBestByTheOtherObjective) {
  Problem problem = chain(12, 4, 8);
  for (Objective objective : {Objective::Period, Objective::IterationTime}) {
    PlanOptions options;
    options.objective = objective;
    PlanningReport report = planOrThrow(problem, options);
    ASSERT_NE(report.best(), nullptr);
    ASSERT_GE(report.bestByOtherObjective, 0);
    const Objective other =
        objective == Objective::Period ? Objective::IterationTime : Objective::Period;
    const PlanResult &alternative =
        report.results[static_cast<size_t>(report.bestByOtherObjective)];
    for (const PlanResult &result : report.results) {
      if (!result.valid)
        continue;
      EXPECT_FALSE(betterPlan(result, *report.best(), objective)) << result.algorithm;
      EXPECT_FALSE(betterPlan(result, alternative, other)) << result.algorithm;
    }
  }
}

TEST(Planner, GpusAreNumberedInPipelineOrderOfTheirFirstStage) {
  Problem problem = chain(6, 4, 4);
  Allocation allocation;
  allocation.stageOfLayer = {0, 1, 2, 3, 4, 5};
  allocation.gpuOfStage = {2, 0, 3, 2, 1, 0};
  Allocation numbered = numberGpusInPipelineOrder(problem, allocation);
  EXPECT_EQ(numbered.gpuOfStage, (std::vector<int>{0, 1, 2, 0, 3, 1}));
  PlanResult result =
      evaluateOrThrow(problem, allocation, ScheduleKind::OneFOneB, computeLowerBounds(problem));
  ASSERT_TRUE(result.valid) << result.reason;
  EXPECT_EQ(result.allocation.gpuOfStage, numbered.gpuOfStage);
  // GPUs of different speeds are not interchangeable: kept as they are.
  problem.platform.speed = {1, 1, 2, 1};
  EXPECT_EQ(numberGpusInPipelineOrder(problem, allocation).gpuOfStage, allocation.gpuOfStage);
}

TEST(Planner, ReportsEachAlgorithmAsItFinishes) {
  Problem problem = chain(8, 2, 4);
  PlanOptions options;
  std::vector<std::string> seen;
  options.onResult = [&](const PlanResult &result) { seen.push_back(result.algorithm); };
  PlanningReport report = planOrThrow(problem, options);
  ASSERT_EQ(seen.size(), report.results.size());
  for (size_t i = 0; i < seen.size(); ++i)
    EXPECT_EQ(seen[i], report.results[i].algorithm);
}

TEST(Planner, MapOnThreadsReportsInOrderAndThrowsTheFirstError) {
  for (int threads : {1, 2, 4}) {
    // Later indices finish first; ready still sees 0, 1, 2, ... on this thread.
    std::vector<size_t> seen;
    const std::thread::id caller = std::this_thread::get_id();
    const std::vector<int> squares = mapOnThreads<int>(
        6, threads,
        [](size_t i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(6 - static_cast<int>(i)));
          return static_cast<int>(i * i);
        },
        [&](size_t i, const int &value) {
          EXPECT_EQ(std::this_thread::get_id(), caller);
          EXPECT_EQ(value, static_cast<int>(i * i));
          seen.push_back(i);
        });
    EXPECT_EQ(squares, (std::vector<int>{0, 1, 4, 9, 16, 25})) << threads;
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4, 5})) << threads;
    // fn throws at 2 and 4: the error of 2 is thrown, after ready saw 0 and 1 only.
    seen.clear();
    try {
      mapOnThreads<int>(
          6, threads,
          [](size_t i) -> int {
            if (i == 2 || i == 4)
              throw Error("failed at " + std::to_string(i));
            return 0;
          },
          [&](size_t i, const int &) { seen.push_back(i); });
      ADD_FAILURE() << "no exception with " << threads << " threads";
    } catch (const Error &error) {
      EXPECT_STREQ(error.what(), "failed at 2") << threads;
    }
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1})) << threads;
    // ready throws at 1: that is the error, and ready sees nothing after it.
    seen.clear();
    EXPECT_THROW(mapOnThreads<int>(
                     4, threads, [](size_t) { return 0; },
                     [&](size_t i, const int &) {
                       seen.push_back(i);
                       if (i == 1)
                         throw Error("ready failed");
                     }),
                 Error);
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1})) << threads;
  }
}

TEST(Planner, RunsAlgorithmsOnThreadsWithTheSameResults) {
  // Each algorithm on its own thread: the same results in the same order as one
  // after the other, and onResult sees them in that order on the calling thread.
  // The last two are large enough (stages x micro-batches >= kThreadedSimulationWork)
  // for the boundary and block moves to simulate their candidates on threads too.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 8; ++trial) {
    const bool large = trial >= 6;
    Problem problem = testing::randomChain(rng, large ? 80 : 12 + trial * 4,
                                           large ? 24 : 2 + trial % 3);
    problem.training.microbatches = large ? 48 : 8;
    if (large)
      problem.platform.memoryBytesPerGpu *= 64; // 48 micro-batches in flight fit
    PlanOptions sequential;
    sequential.threads = 1;
    const PlanningReport one = planOrThrow(problem, sequential);
    PlanOptions parallel;
    parallel.threads = 4;
    std::vector<std::string> seen;
    const std::thread::id caller = std::this_thread::get_id();
    parallel.onResult = [&](const PlanResult &result) {
      EXPECT_EQ(std::this_thread::get_id(), caller);
      seen.push_back(result.algorithm);
    };
    const PlanningReport many = planOrThrow(problem, parallel);
    ASSERT_EQ(one.results.size(), many.results.size());
    if (large) {
      ASSERT_GE(one.chosen, 0);
      EXPECT_GE(one.results[static_cast<size_t>(one.chosen)].allocation.numStages() * 48,
                kThreadedSimulationWork);
      // The block moves ran (the budget spent within a batch in one of the two).
      EXPECT_NE(one.results[static_cast<size_t>(one.chosen)].notes.find("block moves"),
                std::string::npos);
    }
    EXPECT_EQ(one.chosen, many.chosen);
    for (size_t i = 0; i < one.results.size(); ++i) {
      const PlanResult &a = one.results[i], &b = many.results[i];
      EXPECT_EQ(a.algorithm, b.algorithm);
      EXPECT_EQ(a.valid, b.valid) << a.algorithm;
      EXPECT_EQ(a.reason, b.reason) << a.algorithm;
      EXPECT_EQ(a.allocation.stageOfLayer, b.allocation.stageOfLayer) << a.algorithm;
      EXPECT_EQ(a.allocation.gpuOfStage, b.allocation.gpuOfStage) << a.algorithm;
      EXPECT_EQ(a.periodMs, b.periodMs) << a.algorithm;
      EXPECT_EQ(a.notes, b.notes) << a.algorithm; // the moves' counts among them
      if (i < seen.size())
        EXPECT_EQ(seen[i], b.algorithm);
    }
  }
  // A progress callback that throws stops planning with its error, every thread joined.
  PlanOptions failing;
  failing.threads = 3;
  int calls = 0;
  failing.onResult = [&](const PlanResult &) {
    if (++calls == 2)
      throw Error("stop here");
  };
  try {
    planOrThrow(chain(10, 3, 6), failing);
    ADD_FAILURE() << "no error";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "stop here");
  }
  EXPECT_EQ(calls, 2);
}

TEST(Planner, DescribesTheStagesItRunsOnTheGpus) {
  Problem problem = chain(6, 4, 4);
  PlanResult plan;
  plan.allocation.stageOfLayer = {0, 1, 2, 3, 4, 5};
  plan.allocation.gpuOfStage = {0, 1, 2, 0, 1, 2};
  plan.scheduleKind = ScheduleKind::Interleaved;
  EXPECT_EQ(describeStages(problem, plan),
            "6 stages on 3 of the 4 GPUs (1 idle), 2 virtual stages per GPU (interleaved)");
  plan.scheduleKind = ScheduleKind::OneFOneB;
  plan.allocation.gpuOfStage = {0, 1, 2, 3, 1, 0};
  EXPECT_EQ(describeStages(problem, plan),
            "6 stages on 4 GPUs, up to 2 stages per GPU (general allocation)");
}

TEST(Planner, MemorySizesNeedAUnitAndKeepIt) {
  EXPECT_DOUBLE_EQ(orThrow(parseMemorySize("80GB")), 80e9);
  EXPECT_DOUBLE_EQ(orThrow(parseMemorySize("80GiB")), 80.0 * (1 << 30));
  EXPECT_DOUBLE_EQ(orThrow(parseMemorySize("1.5 MB")), 1.5e6);
  EXPECT_THROW(orThrow(parseMemorySize("80")), Error);
  EXPECT_THROW(orThrow(parseMemorySize("8e10")), Error);
  EXPECT_EQ(byteUnitsOf("80GiB"), ByteUnits::Binary);
  EXPECT_EQ(byteUnitsOf("512 mib"), ByteUnits::Binary);
  EXPECT_EQ(byteUnitsOf("80GB"), ByteUnits::Decimal);
  EXPECT_EQ(byteUnitsOf("inf"), ByteUnits::Decimal);
  EXPECT_EQ(formatBytes(80.0 * (1 << 30), ByteUnits::Binary), "80.00 GiB");
  EXPECT_EQ(formatBytes(80.0 * (1 << 30)), "85.90 GB");
  EXPECT_EQ(formatBytes(3.0 * (1 << 20), ByteUnits::Binary), "3.00 MiB");
  EXPECT_EQ(formatBytes(1536, ByteUnits::Binary), "1.50 KiB");
}

} // namespace
} // namespace partitioner
