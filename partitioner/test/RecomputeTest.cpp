// Recomputation (RecomputePolicy): the dynamic programs against brute force over
// every contiguous split and every set of recomputing stages, priced here with
// their own code; the simulator's memory and times of a recomputing stage against
// hand-computed figures; plans that recompute replay exactly.
#include "TestUtil.h"

#include "partitioner/CutLattice.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/StageModel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

namespace partitioner::testing {
namespace {

/// A random chain with free links, no communication buffers and equal GPUs, whose
/// saved activations dominate its outputs, under a memory limit tight enough that
/// some stages must recompute.
Problem tightChain(std::mt19937 &rng, int layers, int gpus, RecomputePolicy policy) {
  Problem problem = randomChain(rng, layers, gpus);
  problem.platform.speed.clear();
  problem.platform.intraNode = problem.platform.interNode = LinkSpec{};
  problem.training.communicationBuffers = false;
  problem.training.schedule = ScheduleKind::OneFOneB;
  problem.training.recompute = policy;
  double total = 0;
  for (Layer &layer : problem.layers) {
    layer.savedBytes *= 4;
    layer.outputBytes *= 0.25;
    // Some layers read model inputs (data, labels), which a recomputing stage keeps.
    if (rng() % 3 == 0)
      layer.inputBytes = std::uniform_real_distribution<double>(0, 5e5)(rng);
    total += problem.training.stateMultiplier * layer.parameterBytes + layer.savedBytes;
  }
  problem.tensors.clear();
  problem.platform.memoryBytesPerGpu =
      total * std::uniform_real_distribution<double>(0.2, 1.0)(rng);
  orThrow(problem.finalize());
  return problem;
}

struct BruteForce {
  double periodMs = kInfinity;
};

/// The smallest bottleneck over every split of the chain into at most `gpus`
/// stages and every subset of recomputing stages (1F1B's position rule: the stage
/// k-th from the end keeps min(k, m) micro-batches). A recomputing stage keeps the
/// previous layer's output and the model inputs its layers read per micro-batch,
/// and one copy of its saved bytes, and its backward runs its forward again.
BruteForce bruteForce(const Problem &problem) {
  const int layers = static_cast<int>(problem.layers.size());
  const int m = problem.training.microbatches;
  const double limit = problem.platform.memoryBytesPerGpu;
  const RecomputePolicy policy = problem.training.recompute;
  BruteForce best;
  for (const std::vector<int> &sizes : allCompositions(layers, problem.platform.gpus)) {
    const int stages = static_cast<int>(sizes.size());
    for (unsigned mask = 0; mask < (1u << stages); ++mask) {
      if (policy == RecomputePolicy::None && mask != 0)
        continue;
      if (policy == RecomputePolicy::All && mask != (1u << stages) - 1)
        continue;
      double bottleneck = 0;
      bool fits = true;
      int first = 0;
      for (int s = 0; s < stages; ++s) {
        const bool recompute = (mask >> s) & 1u;
        double forward = 0, backward = 0, params = 0, saved = 0, modelInputs = 0;
        for (int l = first; l < first + sizes[static_cast<size_t>(s)]; ++l) {
          const Layer &layer = problem.layers[static_cast<size_t>(l)];
          forward += layer.forwardMs;
          backward += layer.backwardMs;
          params += layer.parameterBytes;
          saved += layer.savedBytes;
          modelInputs += layer.inputBytes;
        }
        const double input =
            modelInputs +
            (first == 0 ? 0.0 : problem.layers[static_cast<size_t>(first - 1)].outputBytes);
        const int inFlight = std::min(stages - s, m);
        const double memory = problem.training.stateMultiplier * params +
                              (recompute ? inFlight * input + saved : inFlight * saved);
        fits = fits && memory <= limit * (1 + 1e-12);
        bottleneck = std::max(bottleneck, forward + backward + (recompute ? forward : 0.0));
        first += sizes[static_cast<size_t>(s)];
      }
      if (fits)
        best.periodMs = std::min(best.periodMs, bottleneck);
    }
  }
  return best;
}

TEST(Recompute, MinMaxDynamicProgramEqualsBruteForceOverSplitsAndRecomputeSets) {
  std::mt19937 rng(4242);
  int recomputing = 0, onlyWithRecompute = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 8);
    const int gpus = 1 + static_cast<int>(rng() % 4);
    const RecomputePolicy policy =
        trial % 3 == 0 ? RecomputePolicy::All : RecomputePolicy::Auto;
    const Problem problem = tightChain(rng, layers, gpus, policy);
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    const StageModel model(problem, lattice);
    MinMaxOptions options;
    options.maxStages = gpus;
    options.memoryAware = true;
    options.inFlightRule = ScheduleKind::OneFOneB;
    const std::string label = "trial " + std::to_string(trial) + " (" + toString(policy) + ")";
    const BruteForce expected = bruteForce(problem);
    const std::optional<CutPartition> partition = minMaxPartition(model, options);
    if (expected.periodMs == kInfinity) {
      EXPECT_FALSE(partition) << label;
      continue;
    }
    ASSERT_TRUE(partition) << label;
    EXPECT_NEAR(partition->periodMs, expected.periodMs, 1e-9 * expected.periodMs) << label;
    // The flags it returns are the ones that price its stages.
    ASSERT_EQ(partition->recompute.size(), partition->gpus.size()) << label;
    const bool any = std::find(partition->recompute.begin(), partition->recompute.end(),
                               true) != partition->recompute.end();
    if (policy == RecomputePolicy::Auto && any) {
      ++recomputing;
      Problem plain = problem;
      plain.training.recompute = RecomputePolicy::None;
      if (bruteForce(plain).periodMs == kInfinity)
        ++onlyWithRecompute;
    }
  }
  // The instances exercise the choice: stages that must recompute, and problems
  // with no plan at all unless some stage does.
  EXPECT_GT(recomputing, 30);
  EXPECT_GT(onlyWithRecompute, 10);
}

TEST(Recompute, SimulatorKeepsInputsAndOneRecomputedCopy) {
  // Three layers, stages {l0} and {l1, l2}; GPipe keeps every micro-batch in flight.
  Problem problem;
  problem.name = "recompute";
  for (int i = 0; i < 3; ++i) {
    Layer layer;
    layer.name = "l" + std::to_string(i);
    layer.forwardMs = 1 + i;
    layer.backwardMs = 2 + i;
    layer.savedBytes = 1000 * (i + 1);
    layer.outputBytes = 100;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 2;
  problem.platform.intraNode = problem.platform.interNode = LinkSpec{};
  problem.training.microbatches = 4;
  problem.training.schedule = ScheduleKind::GPipe;
  problem.training.communicationBuffers = false;
  orThrow(problem.finalize());
  Allocation allocation;
  allocation.stageOfLayer = {0, 1, 1};
  allocation.gpuOfStage = {0, 1};
  const LowerBounds bounds = computeLowerBounds(problem);

  const PlanResult plain = evaluateOrThrow(problem, allocation, ScheduleKind::GPipe, bounds);
  ASSERT_TRUE(plain.valid) << plain.reason;
  EXPECT_DOUBLE_EQ(plain.gpus[1].breakdown.activationPeakBytes, 4 * 5000.0);

  allocation.recompute = {false, true};
  problem.layers[2].inputBytes = 10; // l2 also reads a model input (labels)
  const PlanResult recomputed = evaluateOrThrow(problem, allocation, ScheduleKind::GPipe, bounds);
  ASSERT_TRUE(recomputed.valid) << recomputed.reason;
  // Four received inputs of 100 bytes and model inputs of 10, and one
  // micro-batch's 5000 saved bytes.
  EXPECT_DOUBLE_EQ(recomputed.gpus[1].breakdown.activationPeakBytes, 4 * 110.0 + 5000.0);
  EXPECT_DOUBLE_EQ(recomputed.gpus[1].breakdown.keptPeakBytes, 4 * 110.0);
  EXPECT_DOUBLE_EQ(plain.gpus[1].breakdown.keptPeakBytes, 4 * 5000.0);
  EXPECT_DOUBLE_EQ(recomputed.gpus[0].breakdown.activationPeakBytes, 4 * 1000.0);
  EXPECT_TRUE(recomputed.stages[1].recompute);
  EXPECT_FALSE(recomputed.stages[0].recompute);
  // The backward of stage 1 runs its forward (2 + 3 ms) again.
  EXPECT_DOUBLE_EQ(recomputed.stages[1].backwardMs, (3 + 4) + (2 + 3));
  for (const TimedAction &t : recomputed.simulation.timeline)
    if (t.action.stage == 1 && t.action.kind == ActionKind::Backward)
      EXPECT_DOUBLE_EQ(t.endMs - t.startMs, 12.0);
  // GPipe on stage 1: 4 forwards, then 4 backwards of 12 ms each.
  EXPECT_GT(recomputed.iterationMs, plain.iterationMs + 4 * 5.0 - 1e-9);
}

TEST(Recompute, AutoRecomputesOnlyWhereAStageWouldNotFitAndReplaysExactly) {
  std::mt19937 rng(99);
  int plansWithRecompute = 0;
  const int trials = scaledTrials(40);
  for (int trial = 0; trial < trials; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 10);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
    double total = 0;
    for (Layer &layer : problem.layers) {
      layer.savedBytes *= 4;
      total += problem.training.stateMultiplier * layer.parameterBytes + layer.savedBytes;
    }
    problem.platform.memoryBytesPerGpu =
        total * std::uniform_real_distribution<double>(0.2, 0.8)(rng);
    problem.training.recompute = RecomputePolicy::Auto;
    problem.training.microbatches = 4;
    const std::string label = "trial " + std::to_string(trial);
    PlanOptions options;
    options.algorithms = {"best"};
    const PlanningReport report = planOrThrow(problem, options);
    Problem none = problem;
    none.training.recompute = RecomputePolicy::None;
    const PlanningReport without = planOrThrow(none, options);
    if (without.best())
      ASSERT_TRUE(report.best()) << label << ": a plan exists without recomputation";
    if (!report.best())
      continue;
    const PlanResult &best = *report.best();
    const double limit = problem.platform.memoryBytesPerGpu;
    for (const GpuMetrics &gpu : best.gpus)
      EXPECT_LE(gpu.memoryBytes, limit * (1 + 1e-12)) << label;
    // Each recomputing stage is needed: without its flag the plan overflows or is slower.
    for (int s = 0; s < best.allocation.numStages(); ++s) {
      if (!best.allocation.recomputes(s))
        continue;
      Allocation trial = best.allocation;
      trial.recompute[static_cast<size_t>(s)] = false;
      const PlanResult cleared = evaluateOrThrow(problem, trial, best.scheduleKind, report.bounds);
      EXPECT_TRUE(!cleared.valid || cleared.periodMs > best.periodMs * (1 + 1e-9))
          << label << ": stage " << s << " recomputes for nothing";
    }
    if (std::find(best.allocation.recompute.begin(), best.allocation.recompute.end(), true) !=
        best.allocation.recompute.end())
      ++plansWithRecompute;
    std::ostringstream json;
    writePlanJson(problem, report, json, false);
    const Expected<ReplayCheck> replay = replayPlan(problem, json.str());
    ASSERT_TRUE(replay.ok()) << label << ": " << replay.error();
    EXPECT_TRUE(replay->mismatches.empty()) << label << ": " << replay->mismatches.front();
    EXPECT_EQ(replay->replayed.allocation.recompute, best.allocation.recompute) << label;
  }
  EXPECT_GT(plansWithRecompute, trials / 5) << plansWithRecompute;
}

TEST(Recompute, PolicyParsesAndRoundTripsThroughProblemJson) {
  EXPECT_EQ(*parseRecomputePolicy("auto"), RecomputePolicy::Auto);
  EXPECT_EQ(*parseRecomputePolicy("none"), RecomputePolicy::None);
  EXPECT_EQ(*parseRecomputePolicy("all"), RecomputePolicy::All);
  const Expected<RecomputePolicy> bad = parseRecomputePolicy("some");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("none, auto or all"), std::string::npos) << bad.error();
  std::mt19937 rng(1);
  Problem problem = randomChain(rng, 4, 2);
  problem.training.recompute = RecomputePolicy::Auto;
  std::stringstream json;
  writeProblemJson(problem, json);
  const Expected<Problem> read = readProblemJson(json, "round trip");
  ASSERT_TRUE(read.ok()) << read.error();
  EXPECT_EQ(read->training.recompute, RecomputePolicy::Auto);
}

/// PricedStage (a stage priced at many positions, as the DPs do) chooses exactly as
/// StageModel::choose at every GPU and in-flight count: random chains with several
/// nodes, speeds, buffers, weight policies and every recompute policy, tight memory.
TEST(Recompute, PricedStageChoosesAsTheStageModel) {
  std::mt19937 rng(77);
  const RecomputePolicy policies[] = {RecomputePolicy::None, RecomputePolicy::Auto,
                                      RecomputePolicy::All};
  const WeightPolicy weights[] = {WeightPolicy::Default, WeightPolicy::Stashed,
                                  WeightPolicy::DoubleBuffered};
  int feasible = 0, infeasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int gpus = 1 + static_cast<int>(rng() % 5);
    Problem problem = randomChain(rng, 2 + static_cast<int>(rng() % 7), gpus);
    problem.training.recompute = policies[rng() % 3];
    problem.training.weights = weights[rng() % 3];
    problem.training.microbatches = 1 + static_cast<int>(rng() % 6);
    problem.platform.gpusPerNode = 1 + static_cast<int>(rng() % 3);
    orThrow(problem.finalize());
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    const StageModel model(problem, lattice);
    for (int from = 0; from < lattice.fullCut(); ++from)
      for (int to = from + 1; to <= lattice.fullCut(); ++to) {
        PricedStage priced(model, from, to);
        for (int gpu = 0; gpu < gpus; ++gpu)
          for (int inFlight = 0; inFlight <= problem.training.microbatches + 1; ++inFlight)
            for (bool checkMemory : {true, false}) {
              const StageChoice expected = model.choose(from, to, inFlight, gpu, checkMemory);
              const StageChoice actual = priced.choose(inFlight, gpu, checkMemory);
              ASSERT_EQ(actual.feasible, expected.feasible) << "trial " << trial;
              ASSERT_EQ(actual.recompute, expected.recompute) << "trial " << trial;
              ASSERT_EQ(actual.periodMs, expected.periodMs) << "trial " << trial;
              ++(expected.feasible ? feasible : infeasible);
            }
      }
  }
  EXPECT_GT(feasible, 1000);
  EXPECT_GT(infeasible, 1000);
}

} // namespace
} // namespace partitioner::testing
