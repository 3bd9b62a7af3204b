// Planning with links that take time: for 1F1B with flush, `madpipe` plans the
// period the generated schedule runs at (the periodic pattern with each stage's
// span, its transfers included, within the stages to the end), and no contiguous
// plan on the same GPUs simulates faster.
#include "TestUtil.h"

#include "partitioner/Planner.h"
#include "partitioner/Algorithm.h"
#include "partitioner/BoundaryMoves.h"
#include "partitioner/Bounds.h"
#include "partitioner/CutLattice.h"
#include "partitioner/Error.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Linearize.h"
#include "partitioner/Schedule.h"
#include "partitioner/Simulator.h"
#include "partitioner/StageModel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
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

/// Every contiguous split of `layers` layers on every increasing sequence of GPUs.
std::vector<Allocation> everySplitOnIncreasingGpus(int layers, int gpus) {
  std::vector<Allocation> splits;
  for (const auto &sizes : allCompositions(layers, gpus)) {
    const int k = static_cast<int>(sizes.size());
    for (unsigned mask = 0; mask < (1u << gpus); ++mask) {
      if (__builtin_popcount(mask) != k)
        continue;
      Allocation allocation = fromSizes(sizes, gpus);
      for (int g = 0, s = 0; g < gpus; ++g)
        if (mask & (1u << g))
          allocation.gpuOfStage[static_cast<size_t>(s++)] = g;
      splits.push_back(std::move(allocation));
    }
  }
  return splits;
}

/// Multiplies the bytes of every transfer by `factor`: the tensors (finalize() built
/// them from the layers' output bytes, which are scaled too, for what reads them).
void scaleTransfers(Problem &problem, double factor) {
  for (Tensor &tensor : problem.tensors)
    tensor.bytes *= factor;
  for (Layer &layer : problem.layers)
    layer.outputBytes *= factor;
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
      scaleTransfers(problem, 4); // transfers about as long as the layers
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
    // Within 2 %: 200 of 200 on both kinds of links (slow links: 191 before the
    // schedule ordered its ports).
    EXPECT_LT(planMedian, 0.02) << links;
    EXPECT_GT(planShare, 0.95) << links;
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
    scaleTransfers(problem, 4); // transfers about as long as the layers
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
  // holds its two ports for a slot modulo T, and each port carries its transfers in
  // the order of their slots (Schedule::sendOrder / receiveOrder). Simulated, the
  // order runs at the pattern's period. Without the slots (transfers as pure delays)
  // the pattern promises periods the ports cannot keep.
  std::mt19937 rng(313);
  std::vector<double> ratios;
  int withPattern = 0, lateWithoutOrders = 0;
  for (int trial = 0, count = scaledTrials(300); trial < count; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 8);
    const int gpus = 2 + static_cast<int>(rng() % 4);
    Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 4 * gpus;
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 4);
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
    const StageGraph graph = buildStageGraph(problem, allocation);
    const auto pattern = oneFOneBPattern(problem, allocation, graph);
    if (!pattern)
      continue;
    const double T = pattern->periodMs;
    auto result = evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB,
                                     computeLowerBounds(problem));
    ASSERT_TRUE(result.ok());
    ASSERT_TRUE((*result).valid) << "trial " << trial << ": " << (*result).reason;
    ratios.push_back((*result).periodMs / T);
    // The pattern is a feasible timing of the generated orders (compute and ports),
    // so the simulation, which starts each action and transfer as soon as its order
    // lets it, starts none later than the pattern does.
    const int m = problem.training.microbatches;
    Schedule schedule = generateSchedule(ScheduleKind::OneFOneB, problem, allocation, graph, m);
    ASSERT_TRUE(schedule.hasPortOrders() || pattern->transfers.empty()) << "trial " << trial;
    const double eps = 1e-9 * T * m;
    auto late = [&](const SimulationResult &run) {
      for (const TimedAction &t : run.timeline) {
        const size_t s = static_cast<size_t>(t.action.stage);
        const double nominal = (t.action.kind == ActionKind::Forward ? pattern->forwardOffset[s]
                                                                     : pattern->backwardOffset[s]) +
                               t.action.microbatch * T;
        if (t.startMs > nominal + eps)
          return true;
      }
      for (const TimedTransfer &t : run.transfers)
        for (const auto &slotted : pattern->transfers)
          if (slotted.fromStage == t.fromStage && slotted.toStage == t.toStage &&
              slotted.gradient == t.gradient &&
              t.startMs > slotted.startMs + t.microbatch * T + eps)
            return true;
      return false;
    };
    const SimulationResult ordered = simulate(problem, allocation, schedule, graph);
    ASSERT_TRUE(ordered.completed) << "trial " << trial << ": " << ordered.error;
    EXPECT_FALSE(late(ordered)) << "trial " << trial;
    ++withPattern;
    schedule.sendOrder.clear();
    schedule.receiveOrder.clear();
    const SimulationResult unordered = simulate(problem, allocation, schedule, graph);
    lateWithoutOrders += unordered.completed && late(unordered);
  }
  ASSERT_GT(ratios.size(), static_cast<size_t>(scaledTrials(300) / 2));
  auto [median, share] = summarize("simulated / pattern period", ratios, 0.02);
  std::sort(ratios.begin(), ratios.end());
  std::cout << "  90th percentile " << ratios[ratios.size() * 9 / 10] << "\n";
  std::cout << "  without the port orders, some action or transfer starts after the pattern "
               "on "
            << lateWithoutOrders << " of " << withPattern << "\n";
  // Ratios below 0.98 are orders that run faster than their pattern. Without the
  // slots: 240 of 300 within 2 %, 90th percentile 1.12, worst 2.12; with the slots
  // and no port orders (each transfer in the first free interval once its producer
  // ended): 261, 1.014 and 1.25; with the port orders 288, 1.000 and 1.005 (the
  // period is measured as the cost of m more micro-batches, flush included).
  EXPECT_LT(median, 1e-6);
  EXPECT_GT(share, 0.84);
  EXPECT_LT(ratios[ratios.size() * 9 / 10], 1.01);
  EXPECT_LT(ratios.back(), 1.02);
  if (scaledTrials(300) == 300)
    EXPECT_GT(lateWithoutOrders, 0);
}

/// A contiguous split of a chain at period T as the pattern behind the generated
/// orders (Schedule.cpp) times it, every stage's terms computed here from the layers:
/// whether it fits as the span DP requires (compute and port time within T, every
/// gradient in a free slot, under `rule` no more copies than the stages to the end),
/// its copies per stage (at most m) and its first stage's span.
struct PatternSplit {
  bool fits = false;
  std::vector<int> copies;
  double firstSpan = kInfinity;
};

PatternSplit patternSplit(const Problem &problem, const std::vector<int> &sizes, double T,
                          CopyRule rule) {
  const int gpus = problem.platform.gpus, k = static_cast<int>(sizes.size());
  const int m = problem.training.microbatches;
  const Allocation allocation = fromSizes(sizes, gpus);
  PatternSplit split;
  split.fits = true;
  std::vector<double> backward;
  for (int s = 0, first = 0; s < k; ++s) {
    const int last = first + sizes[static_cast<size_t>(s)] - 1;
    const int gpu = gpus - k + s;
    double f = 0, b = 0;
    for (int l = first; l <= last; ++l) {
      f += problem.layers[static_cast<size_t>(l)].forwardMs;
      b += problem.layers[static_cast<size_t>(l)].backwardMs;
    }
    f /= problem.platform.speedOf(gpu);
    b /= problem.platform.speedOf(gpu);
    backward.push_back(b);
    double ports = 0;
    if (s > 0)
      ports += problem.platform.linkBetween(gpu - 1, gpu)
                   .transferMs(problem.layers[static_cast<size_t>(first - 1)].outputBytes);
    if (s + 1 < k)
      ports += problem.platform.linkBetween(gpu, gpu + 1)
                   .transferMs(problem.layers[static_cast<size_t>(last)].outputBytes);
    split.fits &= f + b <= T * (1 + 1e-9) && ports <= T * (1 + 1e-9);
    first = last + 1;
  }
  const PeriodicPattern pattern = periodicPattern(problem, allocation, T);
  split.fits &= pattern.portsFit;
  for (int s = 0; s < k; ++s) {
    const int n = std::min(pattern.inFlight[static_cast<size_t>(s)], m);
    split.copies.push_back(n);
    if (rule == CopyRule::OneFOneB)
      split.fits &= n <= k - s;
  }
  split.firstSpan = pattern.backwardOffset[0] + backward[0] - pattern.forwardOffset[0];
  return split;
}

TEST(Links, PortSlotDynamicProgramTimesGradientsAsThePatternDoes) {
  // Transfers longer than most layers, so that a gradient may wait for its slot.
  // The DP with port slots must agree with the pattern on the partition it returns
  // (it fits, and every stage keeps the copies planned), and be close to the best
  // split by the pattern's spans (it keeps one span per state, so it is not exact);
  // with transfers as delays, some of its partitions keep more copies in the
  // pattern than it planned, or find no slot.
  std::mt19937 rng(2026);
  int found = 0, optimal = 0, missed = 0, delaysWrong = 0, delaysFound = 0;
  for (int trial = 0, trials = scaledTrials(600); trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.microbatches = 64;
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 8);
    orThrow(problem.finalize());
    double total = 0, largest = 0;
    for (const Layer &l : problem.layers) {
      total += l.workMs();
      largest = std::max(largest, l.workMs());
    }
    const double T = std::uniform_real_distribution<double>(largest, total + 1)(rng);
    const CopyRule rule = trial % 2 ? CopyRule::OneFOneB : CopyRule::Span;
    const std::string label = "trial " + std::to_string(trial) + " T=" + std::to_string(T);
    double best = kInfinity;
    for (const auto &sizes : allCompositions(layers, gpus)) {
      const PatternSplit split = patternSplit(problem, sizes, T, rule);
      if (split.fits)
        best = std::min(best, split.firstSpan);
    }
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    const StageModel model(problem, lattice);
    auto sizesOf = [&](const CutPartition &partition) {
      std::vector<int> sizes;
      for (size_t s = 0; s + 1 < partition.cuts.size(); ++s)
        sizes.push_back(partition.cuts[s + 1] - partition.cuts[s]);
      return sizes;
    };
    if (auto partition = periodicPartition(model, gpus, T, rule, TransferModel::PortSlots)) {
      ++found;
      const PatternSplit split = patternSplit(problem, sizesOf(*partition), T, rule);
      EXPECT_TRUE(split.fits) << label;
      EXPECT_EQ(split.copies, partition->inFlight) << label;
      ASSERT_LT(best, kInfinity) << label;
      optimal += split.firstSpan <= best * (1 + 1e-9);
    } else {
      missed += best < kInfinity;
    }
    if (auto partition = periodicPartition(model, gpus, T, rule, TransferModel::Delays)) {
      ++delaysFound;
      const PatternSplit split = patternSplit(problem, sizesOf(*partition), T, rule);
      delaysWrong += !split.fits || split.copies != partition->inFlight;
    }
  }
  std::cout << "port slots: a partition at " << found << " periods, the best split by the "
            << "pattern's spans on " << optimal << ", none where a split fits on " << missed
            << "; delays: a partition at " << delaysFound << ", of which " << delaysWrong
            << " the pattern times otherwise\n";
  // 402 partitions, all of them the best split, none missed; with delays 12 of 404
  // partitions keep other copies in the pattern than planned, or do not fit.
  EXPECT_GT(found, scaledTrials(600) / 2);
  EXPECT_GE(optimal, found * 99 / 100);
  EXPECT_LE(missed, found / 100);
  if (scaledTrials(600) == 600)
    EXPECT_GT(delaysWrong, 0); // the instances make gradients wait
}

/// The period at which one-layer boundary moves from `allocation` end.
double movedPeriod(const Problem &problem, const Allocation &allocation, const LowerBounds &bounds) {
  const PlanResult start =
      evaluateUnderPolicyOrThrow(problem, allocation, problem.training.schedule, bounds);
  return improveByBoundaryMovesOrThrow(problem, start, bounds, Objective::Period).periodMs;
}

/// madpipe's plan and the other plans it offers, each moved: the best end.
struct MovedPlans {
  double own = kInfinity, best = kInfinity;
  size_t offered = 0;
};

MovedPlans movedMadPipePlans(const Problem &problem, const PlanOptions &options) {
  const LowerBounds bounds = computeLowerBounds(problem);
  const AlgorithmContext context{options, bounds, nullptr};
  const AlgorithmOutput output = findAlgorithm("madpipe")->run(problem, context);
  MovedPlans moved;
  if (!output.allocation)
    return moved;
  moved.own = moved.best = movedPeriod(problem, *output.allocation, bounds);
  for (const AlternativePlan &alternative : output.alternatives)
    moved.best = std::min(moved.best, movedPeriod(problem, alternative.allocation, bounds));
  moved.offered = output.alternatives.size();
  return moved;
}

TEST(Links, BoundaryMovesStartFromMadPipesOtherPlansWhereItsPlanMissesItsPeriod) {
  // On DAGs with slow links (a tensor sent to each consumer stage, which the lattice
  // relays once per cut), madpipe's plan may miss its planned period; it then offers
  // its other models' plans, and the planner's boundary moves start from each: the
  // plan it returns is the best end of them all.
  std::mt19937 rng(1207);
  int offered = 0, gained = 0;
  for (int trial = 0, trials = scaledTrials(400); trial < trials; ++trial) {
    const int layers = 4 + static_cast<int>(rng() % 7);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomDag(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 4 * gpus;
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 4);
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"madpipe"};
    options.improveByBlockMoves = false;
    const MovedPlans moved = movedMadPipePlans(problem, options);
    ASSERT_LT(moved.own, kInfinity) << "trial " << trial;
    offered += moved.offered > 0;
    gained += moved.best < moved.own * (1 - 1e-9);
    const PlanningReport report = planOrThrow(problem, options);
    ASSERT_TRUE(report.best()) << "trial " << trial;
    EXPECT_NEAR(report.best()->periodMs, moved.best, 1e-9 * moved.best) << "trial " << trial;
  }
  // 3 of 400 DAGs offer other plans (6 before the port orders); the moves from them
  // end no faster on these.
  std::cout << "madpipe offered other plans on " << offered << " DAGs; the moves from one of "
            << "them ended faster on " << gained << "\n";
  if (scaledTrials(400) == 400)
    EXPECT_GT(offered, 0);
}

TEST(Links, ResNet50On16GpusRunsAtMadPipesPlannedPeriod) {
  // 16 GB, m = 32, the default links. madpipe's span plan is planned at 67.39 ms.
  // Before the schedule ordered its ports, each transfer took the first port
  // interval free when its producer ended: activations and gradients met on the
  // ports of GPUs 7 and 8, stage 0's cap bound, and the plan simulated at 78.69 ms
  // (the min-max plan's moves then won at 70.07). With the pattern's port orders it
  // simulates at its planned period.
  const std::string path = profilesDirectory() + "/pipedream/resnet50.txt";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "profile " << path << " not found (set PIPE_PARTITIONER_PROFILES_DIR)";
  Problem problem = orThrow(readProblemFile(path));
  problem.platform.gpus = 16;
  problem.platform.memoryBytesPerGpu = 16e9;
  problem.training.microbatches = 32;
  orThrow(problem.finalize());
  PlanOptions options;
  options.algorithms = {"madpipe"};
  options.improveByBlockMoves = false;
  options.improveByBoundaryMoves = false;
  const PlanningReport report = planOrThrow(problem, options);
  ASSERT_TRUE(report.best());
  const PlanResult &plan = *report.best();
  ASSERT_LT(plan.predictedPeriodMs, kInfinity);
  EXPECT_NEAR(plan.periodMs, plan.predictedPeriodMs, 0.02 * plan.predictedPeriodMs);
  EXPECT_LT(plan.periodMs, 70.0);
  Schedule schedule;
  simulatePlan(problem, plan.allocation, problem.training.schedule, &schedule);
  EXPECT_TRUE(schedule.hasPortOrders());
  std::cout << "ResNet-50, 16 GPUs: madpipe planned " << plan.predictedPeriodMs
            << " ms, simulated " << plan.periodMs << "\n";
}

// `ilp` on links that take time (1F1B, with flush or stashing): its span rows (each
// stage's work and every later stage's, each boundary's transfer both ways, within
// min(j + 1, m) periods) bound a chain's simulated period from below, so the loop
// that simulates each optimum and cuts off those slower than their T ends at the
// fastest split in simulation. Checked against every contiguous split on every
// increasing sequence of GPUs (the MIP's placements, empty positions included).
TEST(Links, IlpEndsAtTheFastestSimulatedSplitOfAChain) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(91);
  int checked = 0, fastest = 0, severalSolves = 0, aboveMinMax = 0, asPlanned = 0;
  int singleValid = 0, singleAsPlanned = 0;
  for (int trial = 0, trials = scaledTrials(150); trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.schedule = trial % 4 == 3 ? ScheduleKind::OneFOneBStash : ScheduleKind::OneFOneB;
    problem.training.microbatches = 1 + static_cast<int>(rng() % (2 * gpus));
    problem.platform.memoryBytesPerGpu = kInfinity; // the MIP's memory has its own oracle
    if (trial % 2 == 0)
      scaleTransfers(problem, 4); // transfers about as long as the layers
    orThrow(problem.finalize());
    const std::string name = "trial " + std::to_string(trial);
    const LowerBounds bounds = computeLowerBounds(problem);
    double best = kInfinity;
    for (const Allocation &allocation : everySplitOnIncreasingGpus(layers, gpus)) {
      auto result = evaluateAllocation(problem, allocation, problem.training.schedule, bounds);
      ASSERT_TRUE(result.ok()) << name;
      if ((*result).valid)
        best = std::min(best, (*result).periodMs);
    }
    PlanOptions options;
    options.algorithms = {"ilp"};
    options.ilpTimeLimitSeconds = 60;
    const AlgorithmContext context{options, bounds};
    const AlgorithmOutput output = runIlp(problem, context, /*minMaxBound=*/true);
    ASSERT_TRUE(output.allocation.has_value()) << name << ": " << output.reason;
    auto result = evaluateAllocation(problem, *output.allocation, problem.training.schedule, bounds);
    ASSERT_TRUE(result.ok() && (*result).valid) << name << ": " << output.notes;
    ASSERT_TRUE(output.notes.find("no split left below") != std::string::npos ||
                output.notes.find("nothing below the bound") != std::string::npos)
        << name << ": " << output.notes;
    EXPECT_NEAR((*result).periodMs, best, 1e-6 * best) << name << ": " << output.notes;
    fastest += std::abs((*result).periodMs - best) <= 1e-6 * best;
    // The first solve's bound holds for every split (the rows are not too strong).
    EXPECT_LE(output.provenLowerBoundMs, best * (1 + 1e-6)) << name << ": " << output.notes;
    ++checked;
    severalSolves += output.notes.find("after 1 MIP solve:") == std::string::npos &&
                     output.notes.find("after 0 MIP solves") == std::string::npos;
    // Without the span rows the first solve's bound is at most the min-max model's
    // optimum (the same MIP, T capped below the warm start's simulated period).
    const AlgorithmOutput minMax = runIlp(problem, context, /*minMaxBound=*/true, IlpLinks::MinMax);
    ASSERT_TRUE(minMax.allocation.has_value()) << name << ": " << minMax.reason;
    const size_t at = output.notes.find("the first solve's ");
    ASSERT_NE(at, std::string::npos) << name << ": " << output.notes;
    const double firstBound = std::stod(output.notes.substr(at + 18));
    EXPECT_LE(firstBound, best + 5e-4) << name << ": " << output.notes; // printed to 1 us
    aboveMinMax += firstBound > minMax.predictedPeriodMs + 5e-4;
    asPlanned += std::abs((*result).periodMs / output.predictedPeriodMs - 1) <= 0.02;
    // Inside best (not named): the min-max model's solve, planned by the span model.
    PlanOptions inBest;
    const AlgorithmContext bestContext{inBest, bounds};
    const AlgorithmOutput single = runIlp(problem, bestContext, /*minMaxBound=*/true);
    ASSERT_TRUE(single.allocation.has_value()) << name << ": " << single.reason;
    EXPECT_EQ(single.notes.find("MIP solve"), std::string::npos) << name << ": " << single.notes;
    auto singleResult = evaluateAllocation(problem, *single.allocation, problem.training.schedule, bounds);
    ASSERT_TRUE(singleResult.ok()) << name;
    if ((*singleResult).valid) {
      EXPECT_GE((*singleResult).periodMs, best * (1 - 1e-6)) << name;
      singleAsPlanned += std::abs((*singleResult).periodMs / single.predictedPeriodMs - 1) <= 0.02;
      ++singleValid;
    }
  }
  std::cout << "ilp on " << checked << " chains: the fastest split in simulation on " << fastest
            << "; "
            << severalSolves << " needed more than one solve; on " << aboveMinMax
            << " the span rows raised the first solve's bound above the min-max model's optimum; planned within 2 % on "
            << asPlanned << "; inside best, planned within 2 % on " << singleAsPlanned << " of "
            << singleValid << "\n";
  // The rates are claims about all 150 chains; a scaled run (the sanitizers) checks
  // only that every split is the fastest.
  if (scaledTrials(150) == 150) {
    EXPECT_GT(aboveMinMax, checked / 10);
    EXPECT_GT(severalSolves, checked / 10); // the loop, not the first solve, ends most
    EXPECT_GT(asPlanned, checked * 6 / 10);
    EXPECT_GT(singleAsPlanned, singleValid * 6 / 10);
  }
}

// Under a memory limit the span MIP lets each stage keep the copies its span needs
// (madpipe's caps) rather than 1F1B's min(S - s, m): on random chains whose memory
// binds, it ends at the fastest split in simulation over every split on every
// increasing sequence of GPUs, with every cap of each stage's copies and with none,
// and its bound holds for all of them. (Without the caps in its rows, it misses the
// fastest split on 7 of these chains and finds no plan on one that has some.)
TEST(Links, IlpOnTheSpansKeepsTheCopiesItsSpansNeed) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(93);
  int checked = 0, capsWin = 0, infeasible = 0;
  for (int trial = 0, trials = scaledTrials(120); trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 4);
    const int gpus = 2 + static_cast<int>(rng() % 2);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 2 + static_cast<int>(rng() % (2 * gpus));
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 4);
    orThrow(problem.finalize());
    const std::string name = "trial " + std::to_string(trial);
    // Memory between 70 % and 130 % of the least any split needs with 1F1B's copies.
    {
      double least = kInfinity;
      for (const auto &sizes : allCompositions(layers, gpus)) {
        auto result = evaluateAllocation(problem, fromSizes(sizes, gpus), ScheduleKind::OneFOneB, {});
        ASSERT_TRUE(result.ok()) << name;
        double peak = 0;
        for (const GpuMemory &gpu : (*result).simulation.memory)
          peak = std::max(peak, gpu.peakBytes);
        least = std::min(least, peak);
      }
      problem.platform.memoryBytesPerGpu = least * std::uniform_real_distribution<double>(0.7, 1.3)(rng);
      orThrow(problem.finalize());
    }
    const LowerBounds bounds = computeLowerBounds(problem);
    double best = kInfinity, uncapped = kInfinity;
    for (Allocation allocation : everySplitOnIncreasingGpus(layers, gpus)) {
      // Every cap vector, 1..min(S - s, m) copies per stage (the last: 1F1B's own).
      const int k = allocation.numStages();
      std::vector<int> caps(static_cast<size_t>(k), 1);
      for (;;) {
        allocation.inFlightLimit = caps;
        auto result = evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB, bounds);
        ASSERT_TRUE(result.ok()) << name;
        if ((*result).valid)
          best = std::min(best, (*result).periodMs);
        int s = 0;
        while (s < k && ++caps[static_cast<size_t>(s)] > std::min(k - s, problem.training.microbatches))
          caps[static_cast<size_t>(s++)] = 1;
        if (s == k)
          break;
      }
      // And without caps (the generated order's own, S - s, may exceed m).
      allocation.inFlightLimit.clear();
      auto result = evaluateAllocation(problem, allocation, ScheduleKind::OneFOneB, bounds);
      ASSERT_TRUE(result.ok()) << name;
      if ((*result).valid)
        uncapped = std::min(uncapped, (*result).periodMs);
    }
    const bool capsWon = best < uncapped * (1 - 1e-6);
    best = std::min(best, uncapped);
    PlanOptions options;
    options.algorithms = {"ilp"};
    options.ilpTimeLimitSeconds = 60;
    const AlgorithmOutput output = runIlp(problem, AlgorithmContext{options, bounds}, true);
    if (best == kInfinity) {
      EXPECT_FALSE(output.allocation.has_value()) << name << ": " << output.notes;
      ++infeasible;
      continue;
    }
    ASSERT_TRUE(output.allocation.has_value()) << name << ": " << output.reason;
    auto result = evaluateAllocation(problem, *output.allocation, ScheduleKind::OneFOneB, bounds);
    ASSERT_TRUE(result.ok() && (*result).valid) << name << ": " << output.notes;
    ASSERT_TRUE(output.notes.find("no split left below") != std::string::npos ||
                output.notes.find("nothing below the bound") != std::string::npos)
        << name << ": " << output.notes;
    EXPECT_NEAR((*result).periodMs, best, 1e-6 * best) << name << ": " << output.notes;
    EXPECT_LE(output.provenLowerBoundMs, best * (1 + 1e-6)) << name << ": " << output.notes;
    EXPECT_NE(output.notes.find("with the copies of its spans"), std::string::npos) << name;
    ++checked;
    capsWin += capsWon;
  }
  std::cout << "ilp on " << checked << " chains under tight memory (" << infeasible
            << " with no plan): the fastest split on all; a capped split faster than every uncapped one on "
            << capsWin << "\n";
  EXPECT_GT(checked, scaledTrials(120) / 3);
  if (scaledTrials(120) == 120)
    EXPECT_GT(capsWin, checked / 10);
}

// On DAGs the span rows are no bound on the simulated period (a stage need not wait
// for every later one; a tensor goes once to each consumer stage): the loop still
// judges every plan in simulation, returns one that runs, and claims no bound.
TEST(Links, IlpOnTheSpansOfADagClaimsNoBound) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(92);
  int planned = 0;
  for (int trial = 0, trials = scaledTrials(30); trial < trials; ++trial) {
    Problem problem = randomDag(rng, 3 + static_cast<int>(rng() % 5), 2 + static_cast<int>(rng() % 3));
    problem.training.schedule = ScheduleKind::OneFOneB;
    problem.training.microbatches = 8;
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 4);
    orThrow(problem.finalize());
    if (problem.isChain())
      continue;
    const std::string name = "trial " + std::to_string(trial);
    const LowerBounds bounds = computeLowerBounds(problem);
    PlanOptions options;
    options.algorithms = {"ilp"};
    options.ilpTimeLimitSeconds = 60;
    const AlgorithmOutput output = runIlp(problem, AlgorithmContext{options, bounds}, true);
    ASSERT_TRUE(output.allocation.has_value()) << name << ": " << output.reason;
    auto result = evaluateAllocation(problem, *output.allocation, ScheduleKind::OneFOneB, bounds);
    ASSERT_TRUE(result.ok() && (*result).valid) << name << ": " << output.notes;
    EXPECT_EQ(output.provenLowerBoundMs, 0) << name << ": " << output.notes;
    EXPECT_NE(output.notes.find("on a DAG"), std::string::npos) << name << ": " << output.notes;
    ++planned;
  }
  EXPECT_GT(planned, scaledTrials(30) / 2);
}

// The periodic schedule counts a stage's copies as ceil(span / T) at the T its DP
// finds, and the simulator builds the pattern at that T: with transfers as pure
// delays the DP's spans were short where a gradient waits for its port slot, and
// the pattern kept more copies than the memory was checked with (VGG-16 at S = 8,
// 16 GB, default links: no valid periodic plan). With port slots the DP's partition
// runs with the copies it planned.
TEST(Links, PeriodicPlansKeepTheCopiesTheirMemoryWasCheckedWith) {
  std::mt19937 rng(404);
  int found[2] = {0, 0}, valid[2] = {0, 0}, asCounted[2] = {0, 0};
  // All 200 trials even in a scaled run (they take 50 ms; the claim compares two
  // counts that agree on the first few dozen).
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomChain(rng, layers, gpus);
    problem.training.schedule = ScheduleKind::Periodic;
    problem.training.microbatches = 4 * gpus;
    problem.platform.memoryBytesPerGpu = kInfinity;
    scaleTransfers(problem, 4); // transfers about as long as the layers
    orThrow(problem.finalize());
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    {
      // Memory between 50 % and 100 % of what the unbounded slotted plan needs.
      const StageModel model(problem, lattice);
      auto unbounded = periodicMinPeriod(model, gpus, 0, [] { return false; }, CopyRule::Span,
                                         TransferModel::PortSlots);
      ASSERT_TRUE(unbounded.has_value()) << "trial " << trial;
      Allocation allocation = allocationFromCuts(problem, lattice, *unbounded);
      allocation.inFlightLimit = unbounded->inFlight;
      allocation.targetPeriodMs = unbounded->periodMs;
      auto result = evaluateAllocation(problem, allocation, ScheduleKind::Periodic, {});
      ASSERT_TRUE(result.ok());
      double peak = 0;
      for (const GpuMemory &gpu : (*result).simulation.memory)
        peak = std::max(peak, gpu.peakBytes);
      problem.platform.memoryBytesPerGpu = peak * std::uniform_real_distribution<double>(0.5, 1)(rng);
      orThrow(problem.finalize());
    }
    const StageModel model(problem, lattice);
    for (int slots : {0, 1}) {
      auto partition = periodicMinPeriod(
          model, gpus, 0, [] { return false; }, CopyRule::Span,
          slots ? TransferModel::PortSlots : TransferModel::Delays);
      if (!partition)
        continue;
      ++found[slots];
      Allocation allocation = allocationFromCuts(problem, lattice, *partition);
      allocation.inFlightLimit = partition->inFlight;
      allocation.targetPeriodMs = partition->periodMs;
      auto result = evaluateAllocation(problem, allocation, ScheduleKind::Periodic, {});
      ASSERT_TRUE(result.ok());
      valid[slots] += (*result).valid;
      asCounted[slots] += (*result).simulation.stageInFlight == partition->inFlight;
    }
  }
  std::cout << "periodic plans with delays: " << valid[0] << " of " << found[0]
            << " fit in simulation, " << asCounted[0] << " keep the copies counted; with port slots: "
            << valid[1] << " of " << found[1] << ", " << asCounted[1] << "\n";
  // The DP with slots keeps one span per state and is not exact: on this seed the
  // pattern at T of 4 of its 108 partitions keeps more copies than the DP counted
  // and overflows (with delays, 16 of 108).
  EXPECT_GE(valid[1], 0.95 * found[1]);
  EXPECT_GT(valid[1], valid[0]);
  EXPECT_GT(found[1], 100);
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
