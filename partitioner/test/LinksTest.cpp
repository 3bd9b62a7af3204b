// Planning with links that take time: for 1F1B with flush, `madpipe` plans the
// period the generated schedule runs at (the periodic pattern with each stage's
// span, its transfers included, within the stages to the end), and no contiguous
// plan on the same GPUs simulates faster.
#include "TestUtil.h"

#include "partitioner/Planner.h"
#include "partitioner/Error.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Linearize.h"
#include "partitioner/Schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>

namespace partitioner::testing {
namespace {

/// The contiguous allocation of `sizes` (layers per stage) on the last GPUs, as the
/// DPs built from the end place them: stage s of k on GPU gpus - k + s.
Allocation fromSizes(const std::vector<int> &sizes, int gpus) {
  Allocation allocation;
  const int k = static_cast<int>(sizes.size());
  for (int s = 0; s < k; ++s) {
    allocation.gpuOfStage.push_back(gpus - k + s);
    for (int i = 0; i < sizes[static_cast<size_t>(s)]; ++i)
      allocation.stageOfLayer.push_back(s);
  }
  return allocation;
}

/// Per trial: madpipe's simulated period over its planned one, and over the best
/// simulated period of every contiguous plan placed as the DP places them.
struct LinkTrial {
  double planRatio = 1, bestRatio = 1;
};

std::vector<LinkTrial> runTrials(unsigned seed, bool latencyOnly) {
  std::mt19937 rng(seed);
  std::vector<LinkTrial> out;
  for (int trial = 0, trials = scaledTrials(200); trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 4 * gpus;
    problem.platform.memoryBytesPerGpu = kInfinity; // the DP's memory has its own oracle
    if (latencyOnly) {
      // Ports never contend: the pattern's transfers are exact.
      for (LinkSpec *link : {&problem.platform.intraNode, &problem.platform.interNode}) {
        link->bandwidthBytesPerSecond = kInfinity;
        link->latencyMs = std::uniform_real_distribution<double>(0.5, 8)(rng);
      }
    } else {
      for (Layer &layer : problem.layers) // transfers about as long as the layers
        layer.outputBytes *= 4;
    }
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"madpipe"};
    options.improveByBoundaryMoves = false;
    options.improveByBlockMoves = false;
    PlanningReport report = planOrThrow(problem, options);
    const PlanResult &madpipe = report.results.at(0);
    EXPECT_TRUE(madpipe.valid) << "trial " << trial << ": " << madpipe.reason;
    if (!madpipe.valid)
      continue;
    double best = kInfinity;
    for (const auto &sizes : allCompositions(layers, gpus)) {
      auto result =
          evaluateAllocation(problem, fromSizes(sizes, gpus), ScheduleKind::OneFOneB, report.bounds);
      EXPECT_TRUE(result.ok());
      if (result.ok() && (*result).valid)
        best = std::min(best, (*result).periodMs);
    }
    out.push_back({madpipe.periodMs / madpipe.predictedPeriodMs, madpipe.periodMs / best});
  }
  return out;
}

/// Prints and returns (median |ratio - 1|, share of trials within `tolerance`).
std::pair<double, double> summarize(const char *what, std::vector<double> ratios,
                                    double tolerance) {
  std::vector<double> errors;
  int within = 0;
  for (double r : ratios) {
    errors.push_back(std::abs(r - 1));
    within += std::abs(r - 1) <= tolerance;
  }
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  const double share = static_cast<double>(within) / static_cast<double>(ratios.size());
  std::cout << what << ": median |ratio - 1| " << median << ", within " << tolerance << ": "
            << within << " of " << ratios.size() << ", worst "
            << *std::max_element(ratios.begin(), ratios.end()) << "\n";
  return {median, share};
}

TEST(Links, MadPipePlansAboutTheSimulatedPeriodAndRarelyLosesToAnotherContiguousPlan) {
  for (bool latencyOnly : {true, false}) {
    const std::vector<LinkTrial> trials = runTrials(latencyOnly ? 77 : 78, latencyOnly);
    ASSERT_GT(trials.size(), 10u);
    std::vector<double> plan, best;
    for (const LinkTrial &t : trials) {
      plan.push_back(t.planRatio);
      best.push_back(t.bestRatio);
    }
    const char *links = latencyOnly ? "latency-only links" : "slow links";
    std::cout << links << ":\n";
    auto [planMedian, planShare] = summarize("  simulated / planned", plan, 0.02);
    auto [bestMedian, bestShare] = summarize("  madpipe / best contiguous", best, 1e-4);
    EXPECT_LT(planMedian, 0.02) << links;
    EXPECT_GT(planShare, 0.6) << links;
    EXPECT_LT(bestMedian, 1e-4) << links;
    EXPECT_GT(bestShare, 0.8) << links;
  }
}

TEST(Links, MadPipeCapsHoldInTheGeneratedScheduleUnderTightMemory) {
  // The span DP prices each stage's memory with the copies its span needs,
  // ceil(span / T) <= stages to the end, and hands them to the generator as caps:
  // the generated 1F1B order must keep no more, and the plan must fit. Against
  // every contiguous plan under 1F1B's own counts min(S - s, m) (no caps), it may
  // fit where they cannot, or be faster.
  std::mt19937 rng(91);
  int trials = 0, capped = 0, madpipeValid = 0, othersValid = 0, fasterThanAll = 0;
  for (int trial = 0, count = scaledTrials(160); trial < count; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 4 * gpus;
    for (Layer &layer : problem.layers) // transfers about as long as the layers
      layer.outputBytes *= 4;
    problem.platform.memoryBytesPerGpu = kInfinity;
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"madpipe"};
    options.improveByBoundaryMoves = false;
    options.improveByBlockMoves = false;
    // Memory between 60 % and 100 % of what the unbounded plan peaks at.
    const PlanningReport unbounded = planOrThrow(problem, options);
    double peak = 0;
    for (const GpuMemory &gpu : unbounded.results.at(0).simulation.memory)
      peak = std::max(peak, gpu.peakBytes);
    problem.platform.memoryBytesPerGpu = peak * std::uniform_real_distribution<double>(0.6, 1)(rng);
    orThrow(problem.finalize());
    const PlanningReport report = planOrThrow(problem, options);
    const PlanResult &madpipe = report.results.at(0);
    double best = kInfinity;
    for (const auto &sizes : allCompositions(layers, gpus)) {
      auto result =
          evaluateAllocation(problem, fromSizes(sizes, gpus), ScheduleKind::OneFOneB, report.bounds);
      ASSERT_TRUE(result.ok());
      if ((*result).valid)
        best = std::min(best, (*result).periodMs);
    }
    ++trials;
    othersValid += best < kInfinity;
    if (!madpipe.valid) {
      EXPECT_EQ(best, kInfinity) << "trial " << trial << ": madpipe found nothing: "
                                 << madpipe.reason;
      continue;
    }
    ++madpipeValid;
    const std::vector<int> &caps = madpipe.allocation.inFlightLimit;
    if (!caps.empty()) {
      ++capped;
      ASSERT_EQ(caps.size(), madpipe.simulation.stageInFlight.size()) << "trial " << trial;
      for (size_t s = 0; s < caps.size(); ++s)
        EXPECT_LE(madpipe.simulation.stageInFlight[s], caps[s])
            << "trial " << trial << " stage " << s;
    }
    fasterThanAll += madpipe.periodMs < best * (1 - 1e-9);
  }
  std::cout << trials << " chains under tight memory: madpipe fits on " << madpipeValid
            << " (a plan without caps on " << othersValid << "), with caps on " << capped
            << ", faster than every plan without caps on " << fasterThanAll << "\n";
  EXPECT_GT(capped, madpipeValid / 2); // the min-max plan, without caps, may win
  EXPECT_GE(madpipeValid, othersValid);
  EXPECT_GT(fasterThanAll, 0); // the caps matter: they fail without them
}

TEST(Links, GeneratedOrdersRunAtTheirPatternPeriodWhenPortsAreBusy) {
  // Transfers as long as the layers, on DAGs (a tensor sent to several stages) and
  // chains: the 1F1B order comes from a periodic pattern in which each transfer
  // holds its two ports for a slot modulo T. Simulated, with ports that carry one
  // transfer at a time, the order runs at the pattern's period. Without the slots
  // (transfers as pure delays) the pattern promises periods the ports cannot keep.
  std::mt19937 rng(313);
  std::vector<double> ratios;
  for (int trial = 0, count = scaledTrials(300); trial < count; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 8);
    const int gpus = 2 + static_cast<int>(rng() % 4);
    Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 4 * gpus;
    problem.platform.memoryBytesPerGpu = kInfinity;
    for (Tensor &tensor : problem.tensors)
      tensor.bytes *= 4;
    for (Layer &layer : problem.layers)
      layer.outputBytes *= 4;
    orThrow(problem.finalize());
    // A random split into contiguous stages, one per GPU.
    std::vector<std::vector<int>> splits = allCompositions(layers, gpus);
    const std::vector<int> &sizes = splits[rng() % splits.size()];
    Allocation allocation;
    const std::vector<int> order = topologicalOrder(problem);
    allocation.stageOfLayer.assign(problem.layers.size(), 0);
    for (int s = 0, at = 0; s < static_cast<int>(sizes.size()); ++s) {
      allocation.gpuOfStage.push_back(s);
      for (int i = 0; i < sizes[static_cast<size_t>(s)]; ++i)
        allocation.stageOfLayer[static_cast<size_t>(order[static_cast<size_t>(at++)])] = s;
    }
    const auto pattern = oneFOneBPattern(problem, allocation, buildStageGraph(problem, allocation));
    if (!pattern)
      continue;
    const double T = pattern->periodMs;
    auto result = evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB,
                                     computeLowerBounds(problem));
    ASSERT_TRUE(result.ok());
    ASSERT_TRUE((*result).valid) << "trial " << trial << ": " << (*result).reason;
    ratios.push_back((*result).periodMs / T);
  }
  ASSERT_GT(ratios.size(), static_cast<size_t>(scaledTrials(300) / 2));
  auto [median, share] = summarize("simulated / pattern period", ratios, 0.02);
  std::sort(ratios.begin(), ratios.end());
  std::cout << "  90th percentile " << ratios[ratios.size() * 9 / 10] << "\n";
  // Without the slots: 240 of 300 within 2 %, 90th percentile 1.12, worst 2.12.
  EXPECT_LT(median, 1e-6);
  EXPECT_GT(share, 0.84);
  EXPECT_LT(ratios[ratios.size() * 9 / 10], 1.05);
  EXPECT_LT(ratios.back(), 1.5);
}

TEST(Links, LayersThatTakeNoTimePlanAtOnce) {
  // The span search starts from the min-max bottleneck; at 0 there is nothing to
  // search (a doubling from 0 never ended: the main job hung on one-node models).
  std::mt19937 rng(5);
  for (int gpus : {1, 3}) {
    Problem problem = randomChain(rng, 4, gpus);
    for (Layer &layer : problem.layers)
      layer.forwardMs = layer.backwardMs = 0;
    problem.platform.memoryBytesPerGpu = kInfinity;
    problem.training.schedule = ScheduleKind::OneFOneB;
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"madpipe"};
    PlanningReport report = planOrThrow(problem, options);
    ASSERT_TRUE(report.best()) << gpus << " GPUs";
  }
}

} // namespace
} // namespace partitioner::testing
