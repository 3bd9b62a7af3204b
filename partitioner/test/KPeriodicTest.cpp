// k-periodic orders: generation (coverage, the peak each order keeps), and the
// search over every word against the best 1-periodic order.
#include "TestUtil.h"

#include "partitioner/Checker.h"
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/KPeriodic.h"
#include "partitioner/Schedule.h"
#include "partitioner/Simulator.h"

#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <sstream>

namespace partitioner {
namespace {

using testing::randomChain;
using testing::scaledTrials;

Allocation evenSplit(int layers, int stages) {
  Allocation allocation;
  for (int l = 0; l < layers; ++l)
    allocation.stageOfLayer.push_back(l * stages / layers);
  for (int s = 0; s < stages; ++s)
    allocation.gpuOfStage.push_back(s);
  return allocation;
}

/// The peak of an order counted letter by letter on the action list it generates.
int peakOfActions(const std::vector<Action> &actions) {
  int alive = 0, peak = 0;
  for (const Action &action : actions) {
    alive += action.kind == ActionKind::Forward ? 1 : -1;
    peak = std::max(peak, alive);
  }
  return peak;
}

TEST(KPeriodic, WordsCoverEveryOrderAndKeepTheirPeak) {
  // Words of k B's and k F's starting with B: C(2k - 1, k - 1) of them.
  const size_t words[] = {0, 1, 3, 10, 35};
  for (int k = 1; k <= 4; ++k) {
    const std::vector<StageOrder> all = stageWords(k, 2 * k + 1);
    size_t distinct = 0;
    for (size_t i = 0; i < all.size(); ++i)
      distinct += i == 0 || all[i].word != all[i - 1].word;
    EXPECT_EQ(distinct, words[k]) << "k = " << k;
    for (const StageOrder &order : stageWords(k, 3)) {
      EXPECT_EQ(order.word.size(), static_cast<size_t>(2 * k));
      EXPECT_EQ(order.word.front(), 'B');
      EXPECT_LE(peakInFlight(order), 3);
    }
  }
  std::mt19937 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int stages = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, 6, stages);
    const Allocation allocation = evenSplit(6, stages);
    const int k = 1 + static_cast<int>(rng() % 4);
    std::vector<StageOrder> orders;
    for (int s = 0; s < stages; ++s) {
      const auto options = stageWords(k, stages - s);
      orders.push_back(options[rng() % options.size()]);
    }
    const int m = 1 + static_cast<int>(rng() % 12);
    const Schedule schedule = wordSchedule(problem, allocation, orders, m);
    // Every F and B of every micro-batch once, on its GPU; the simulator then
    // finishes the order or reports the deadlock the checker finds.
    const CheckReport report = checkSchedule(problem, allocation, schedule);
    bool covered = true;
    for (const std::string &violation : report.violations)
      covered &= violation.find("deadlock") != std::string::npos;
    EXPECT_TRUE(covered) << report.violations.front();
    const SimulationResult result = simulate(problem, allocation, schedule);
    EXPECT_EQ(result.completed, report.ok());
    for (int s = 0; s < stages; ++s) {
      const int peak = peakOfActions(schedule.actions[static_cast<size_t>(s)]);
      EXPECT_LE(peak, peakInFlight(orders[static_cast<size_t>(s)]));
      if (m >= 3 * (2 * k + stages))
        EXPECT_EQ(peak, peakInFlight(orders[static_cast<size_t>(s)]));
      if (result.completed)
        EXPECT_LE(result.stageInFlight[static_cast<size_t>(s)], peak);
    }
  }
}

TEST(KPeriodic, EveryKContainsTheOnePeriodicOrdersAndTheTextbookOrder) {
  std::mt19937 rng(21);
  const int trials = scaledTrials(40);
  int better = 0, planned = 0;
  double largestGain = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int stages = 2 + static_cast<int>(rng() % 2);
    Problem problem = randomChain(rng, 6, stages);
    problem.platform.speed.clear();
    if (rng() % 2)
      problem.platform.intraNode = problem.platform.interNode = LinkSpec{kInfinity, 0};
    // Memory from one copy per stage to the textbook's counts.
    const Allocation allocation = evenSplit(6, stages);
    const StageGraph graph = buildStageGraph(problem, allocation);
    problem.platform.memoryBytesPerGpu = kInfinity;
    orThrow(problem.finalize());
    std::vector<StageOrder> textbook;
    for (int s = 0; s < stages; ++s)
      textbook.push_back({stages - s, "BF"});
    const double textbookPeriod = wordPeriod(problem, allocation, graph, textbook);
    const double tight = [&] {
      Problem one = problem;
      std::vector<StageOrder> single(static_cast<size_t>(stages), StageOrder{1, "BF"});
      const SimulationResult result =
          simulate(one, allocation, wordSchedule(one, allocation, single, 12), graph);
      const SimulationResult full =
          simulate(one, allocation, wordSchedule(one, allocation, textbook, 12), graph);
      double low = 0, high = 0;
      for (size_t g = 0; g < result.memory.size(); ++g) {
        low = std::max(low, result.memory[g].peakBytes);
        high = std::max(high, full.memory[g].peakBytes);
      }
      return low + (high - low) * std::uniform_real_distribution<double>(0, 1)(rng);
    }();
    problem.platform.memoryBytesPerGpu = tight;
    const WordScheduleResult one = bestWordSchedule(problem, allocation, 1);
    ASSERT_LT(one.periodMs, kInfinity) << "one copy per stage fits";
    ++planned;
    double bestK = one.periodMs;
    for (int k = 2; k <= 4; ++k) {
      const WordScheduleResult result = bestWordSchedule(problem, allocation, k);
      // Every k holds the 1-periodic orders (each word repeated k times).
      EXPECT_LE(result.periodMs, one.periodMs * (1 + 1e-9)) << "k = " << k;
      bestK = std::min(bestK, result.periodMs);
      const Schedule schedule = wordSchedule(problem, allocation, result.orders, 12);
      EXPECT_TRUE(checkSchedule(problem, allocation, schedule).ok());
    }
    if (bestK < one.periodMs * (1 - 1e-6)) {
      ++better;
      // The gain is the steady state's: the winning orders run at the same
      // period over four times the micro-batches.
      const WordScheduleResult winner = [&] {
        WordScheduleResult r;
        for (int k = 2; k <= 4 && r.orders.empty(); ++k) {
          WordScheduleResult candidate = bestWordSchedule(problem, allocation, k);
          if (candidate.periodMs <= bestK * (1 + 1e-12))
            r = candidate;
        }
        return r;
      }();
      const SimulationResult once =
          simulate(problem, allocation, wordSchedule(problem, allocation, winner.orders, 48), graph);
      const SimulationResult twice =
          simulate(problem, allocation, wordSchedule(problem, allocation, winner.orders, 96), graph);
      EXPECT_NEAR((twice.iterationMs - once.iterationMs) / 48, bestK, 1e-6 * bestK);
    }
    largestGain = std::max(largestGain, 1 - bestK / one.periodMs);
    // Without a memory limit the best 1-periodic order is no slower than the
    // textbook order it includes.
    Problem unbounded = problem;
    unbounded.platform.memoryBytesPerGpu = kInfinity;
    EXPECT_LE(bestWordSchedule(unbounded, allocation, 1).periodMs, textbookPeriod * (1 + 1e-9));
  }
  std::cout << "k-periodic: better than every 1-periodic order on " << better << " of " << planned
            << " chains, largest gain " << 100 * largestGain << " %\n";
}

// Three stages whose memory lets the first two keep two micro-batches each (the
// textbook 1F1B keeps three on the first): stage 1 forwarding two micro-batches,
// then running both backwards (2:BBFF), beats every 1-periodic order.
TEST(KPeriodic, TwoPeriodicOrdersBeatEveryOnePeriodicOrderUnderTheseCaps) {
  Problem problem;
  problem.name = "caps-2-2-1";
  const double forward[] = {7.98, 17.24, 12.07}, backward[] = {8.83, 9.13, 4.04};
  for (int l = 0; l < 3; ++l) {
    Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.forwardMs = forward[l];
    layer.backwardMs = backward[l];
    layer.savedBytes = 1e6;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 3;
  problem.platform.memoryBytesPerGpu = 2.5e6;
  problem.platform.intraNode = problem.platform.interNode = LinkSpec{kInfinity, 0};
  problem.training.communicationBuffers = false;
  orThrow(problem.finalize());
  const Allocation allocation = evenSplit(3, 3);
  EXPECT_EQ(memoryCaps(problem, allocation, buildStageGraph(problem, allocation)),
            (std::vector<int>{2, 2, 1}));
  const WordScheduleResult one = bestWordSchedule(problem, allocation, 1);
  const WordScheduleResult two = bestWordSchedule(problem, allocation, 2);
  ASSERT_EQ(two.orders.size(), 3u);
  EXPECT_EQ(two.orders[1].word, "BBFF");
  EXPECT_LT(two.periodMs, 0.9 * one.periodMs) << one.periodMs << " vs " << two.periodMs;
  std::cout << "caps 2, 2, 1: best 1-periodic " << one.periodMs << " ms, best 2-periodic "
            << two.periodMs << " ms\n";

  // `best` finds them too: its plan carries the orders, runs at their period in
  // its own simulation, writes them to the plan JSON, and replays.
  PlanningReport report = planOrThrow(problem);
  ASSERT_NE(report.best(), nullptr);
  EXPECT_EQ(report.best()->algorithm, "k-periodic");
  EXPECT_EQ(report.best()->allocation.stageOrders.size(), 3u);
  double others = kInfinity;
  for (const PlanResult &result : report.results)
    if (result.valid && result.algorithm != "k-periodic")
      others = std::min(others, result.periodMs);
  EXPECT_LT(report.best()->periodMs, 0.9 * others);
  std::ostringstream json;
  writePlanJson(problem, report, json);
  EXPECT_NE(json.str().find("\"stage_orders\""), std::string::npos);
  ReplayCheck check = orThrow(replayPlan(problem, json.str()));
  EXPECT_TRUE(check.ok()) << (check.mismatches.empty() ? "" : check.mismatches[0]);
  // The searches (candidates x k) run on threads with the plan of one after the other.
  for (int threads : {1, 4}) {
    PlanOptions options;
    options.threads = threads;
    PlanningReport again = planOrThrow(problem, options);
    ASSERT_NE(again.best(), nullptr);
    EXPECT_EQ(again.best()->algorithm, "k-periodic") << threads;
    EXPECT_EQ(again.best()->notes, report.best()->notes) << threads;
    EXPECT_EQ(again.best()->periodMs, report.best()->periodMs) << threads;
    ASSERT_EQ(again.best()->allocation.stageOrders.size(), 3u);
    for (size_t s = 0; s < 3; ++s)
      EXPECT_EQ(toString(again.best()->allocation.stageOrders[s]),
                toString(report.best()->allocation.stageOrders[s]))
          << threads;
  }
  PlanOptions options;
  options.improveByKPeriodicOrders = false;
  for (const PlanResult &result : planOrThrow(problem, options).results)
    EXPECT_NE(result.algorithm, "k-periodic");
}

TEST(KPeriodic, StageOrdersParseStrictly) {
  EXPECT_EQ(toString(orThrow(parseStageOrder("3:BFBBFF"))), "3:BFBBFF");
  for (const char *bad : {"", "BF", "0:BF", "2:FB", "2:BFB", "1:BBFF", "x:BF", "2:BFBFBFBFBF",
                          "2:BXFF", "99999:BF"})
    EXPECT_FALSE(parseStageOrder(bad).ok()) << bad;
  // An allocation's orders must match its stages, one stage per GPU.
  Problem problem;
  for (int l = 0; l < 2; ++l) {
    Layer layer;
    layer.name = "l" + std::to_string(l);
    layer.forwardMs = layer.backwardMs = 1;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 2;
  orThrow(problem.finalize());
  Allocation allocation = evenSplit(2, 2);
  allocation.stageOrders = {StageOrder{2, "BF"}};
  EXPECT_FALSE(evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB, LowerBounds{}).ok());
  allocation.stageOrders.push_back(StageOrder{1, "BF"});
  EXPECT_TRUE(evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB, LowerBounds{}).ok());
  auto periodic = evaluateAllocation(problem, allocation, ScheduleKind::Periodic, LowerBounds{});
  EXPECT_FALSE(periodic.ok() && periodic->valid);
  // wordSchedule names what it cannot schedule.
  auto message = [&](const Allocation &a, const std::vector<StageOrder> &orders) {
    try {
      wordSchedule(problem, a, orders, 4);
    } catch (const Error &error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(allocation, {StageOrder{1, "BF"}}),
            "k-periodic orders: 1 orders for 2 stages (one per stage)");
  Allocation shared = allocation;
  shared.gpuOfStage = {1, 1};
  EXPECT_EQ(message(shared, allocation.stageOrders),
            "k-periodic orders need one stage per GPU: GPU 1 holds stages 0 and 1");
}

} // namespace
} // namespace partitioner
