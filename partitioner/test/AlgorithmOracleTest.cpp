// Every exact algorithm equals brute force on thousands of random small instances:
// all contiguous splits of chains, all DAG-convex (monotone) allocations of tiny DAGs.
// The brute force prices stages with its own code, independent of StageModel.
#include "TestUtil.h"

#include "partitioner/Algorithm.h"
#include "partitioner/Bounds.h"
#include "partitioner/CutLattice.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"
#include "partitioner/Planner.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

namespace partitioner {
std::vector<int> minMaxSplitSizes(const std::vector<double> &weights, int stages);
}

namespace partitioner::testing {
namespace {

enum class Rule { None, OneFOneB, GPipe, PipeDream };

/// Independent pricing of a partition given as a list of layer sets (in stage order).
struct BruteStage {
  double period = 0, memory = 0, forward = 0, backward = 0;
  bool fits = true;
};

double cutOf(const Problem &problem, const std::vector<bool> &inside) {
  double bytes = 0;
  for (const Tensor &t : problem.tensors) {
    if (!inside[static_cast<size_t>(t.producer)])
      continue;
    for (int c : t.consumers)
      if (!inside[static_cast<size_t>(c)]) {
        bytes += t.bytes;
        break;
      }
  }
  return bytes;
}

std::vector<BruteStage> priceStages(const Problem &problem, const std::vector<std::vector<int>> &stages,
                                    Rule rule) {
  const int k = static_cast<int>(stages.size());
  const int gpus = problem.platform.gpus;
  const int m = problem.training.microbatches;
  std::vector<bool> inside(problem.layers.size(), false);
  std::vector<double> cutBefore, cutAfter;
  for (const auto &stage : stages) {
    cutBefore.push_back(cutOf(problem, inside));
    for (int l : stage)
      inside[static_cast<size_t>(l)] = true;
    cutAfter.push_back(cutOf(problem, inside));
  }
  std::vector<BruteStage> result;
  const std::vector<StageParameters> parameters = stageParameters(problem, stages);
  for (int s = 0; s < k; ++s) {
    const int gpu = gpus - k + s;
    BruteStage stage;
    double work = 0, saved = 0;
    const StageParameters &params = parameters[static_cast<size_t>(s)];
    const double speed = problem.platform.speed.empty() ? 1.0 : problem.platform.speed[static_cast<size_t>(gpu)];
    for (int l : stages[static_cast<size_t>(s)]) {
      const Layer &layer = problem.layers[static_cast<size_t>(l)];
      work += (layer.forwardMs + layer.backwardMs) / speed;
      stage.forward += layer.forwardMs / speed;
      stage.backward += layer.backwardMs / speed;
    }
    saved = stageSavedBytes(problem, stages[static_cast<size_t>(s)]);
    double comm = 0;
    if (s > 0)
      comm += problem.platform.linkBetween(gpu - 1, gpu).transferMs(cutBefore[static_cast<size_t>(s)]);
    if (s < k - 1)
      comm += problem.platform.linkBetween(gpu, gpu + 1).transferMs(cutAfter[static_cast<size_t>(s)]);
    stage.period = std::max(work, comm);
    // Two buffers per cut tensor on each side: the activation and its gradient.
    const double buffers = problem.training.communicationBuffers
                               ? 2 * ((s > 0 ? cutBefore[static_cast<size_t>(s)] : 0.0) +
                                      (s < k - 1 ? cutAfter[static_cast<size_t>(s)] : 0.0))
                               : 0.0;
    int copies = 0;
    if (rule == Rule::OneFOneB)
      copies = std::min(k - s, m);
    else if (rule == Rule::GPipe)
      copies = m;
    stage.memory = problem.training.stateMultiplier * params.owned +
                   readerStateMultiplier(problem.training) * params.read + buffers +
                   copies * saved + largestWorkspace(problem, stages[static_cast<size_t>(s)]);
    if (rule == Rule::PipeDream)
      stage.fits = (k - s - 1) * (saved + params.owned + params.read) <=
                   problem.platform.memoryBytesPerGpu;
    else if (rule != Rule::None)
      stage.fits = stage.memory <= problem.platform.memoryBytesPerGpu * (1 + 1e-12);
    result.push_back(stage);
  }
  return result;
}

std::vector<std::vector<int>> stagesFromSizes(const std::vector<int> &sizes) {
  std::vector<std::vector<int>> stages;
  int next = 0;
  for (int size : sizes) {
    std::vector<int> stage;
    for (int i = 0; i < size; ++i)
      stage.push_back(next++);
    stages.push_back(stage);
  }
  return stages;
}

std::vector<std::vector<int>> stagesFromPartition(const CutLattice &lattice, const CutPartition &p) {
  std::vector<std::vector<int>> stages;
  for (size_t s = 0; s + 1 < p.cuts.size(); ++s)
    stages.push_back(lattice.layersBetween(p.cuts[s], p.cuts[s + 1]));
  return stages;
}

struct BruteBest {
  double period = kInfinity;
  double bytesAtBest = kInfinity;
};

/// Best bottleneck (and, among optimal partitions, fewest crossing bytes) over a list
/// of candidate partitions.
BruteBest bruteBest(const Problem &problem, const std::vector<std::vector<std::vector<int>>> &candidates,
                    Rule rule) {
  BruteBest best;
  std::vector<std::pair<double, double>> values;
  for (const auto &stages : candidates) {
    auto priced = priceStages(problem, stages, rule);
    double bottleneck = 0;
    bool fits = true;
    for (const auto &s : priced) {
      bottleneck = std::max(bottleneck, s.period);
      fits = fits && s.fits;
    }
    if (!fits)
      continue;
    std::vector<bool> inside(problem.layers.size(), false);
    double bytes = 0;
    for (size_t s = 0; s + 1 < stages.size(); ++s) {
      for (int l : stages[s])
        inside[static_cast<size_t>(l)] = true;
      bytes += cutOf(problem, inside);
    }
    values.emplace_back(bottleneck, bytes);
    best.period = std::min(best.period, bottleneck);
  }
  for (const auto &[period, bytes] : values)
    if (period <= best.period * (1 + 1e-9))
      best.bytesAtBest = std::min(best.bytesAtBest, bytes);
  return best;
}

double bottleneckOf(const Problem &problem, const std::vector<std::vector<int>> &stages, Rule rule,
                    bool *fits, double *bytes) {
  auto priced = priceStages(problem, stages, rule);
  double bottleneck = 0;
  *fits = true;
  for (const auto &s : priced) {
    bottleneck = std::max(bottleneck, s.period);
    *fits = *fits && s.fits;
  }
  std::vector<bool> inside(problem.layers.size(), false);
  *bytes = 0;
  for (size_t s = 0; s + 1 < stages.size(); ++s) {
    for (int l : stages[s])
      inside[static_cast<size_t>(l)] = true;
    *bytes += cutOf(problem, inside);
  }
  return bottleneck;
}

void expectNear(double expected, double actual, const std::string &what) {
  if (expected == kInfinity || actual == kInfinity) {
    EXPECT_EQ(expected, actual) << what;
    return;
  }
  EXPECT_NEAR(expected, actual, 1e-7 * std::max(1.0, std::fabs(expected))) << what;
}

void checkMinMax(const Problem &problem, const CutLattice &lattice,
                 const std::vector<std::vector<std::vector<int>>> &candidates, Rule rule,
                 const std::string &label) {
  const StageModel model(problem, lattice);
  MinMaxOptions options;
  options.maxStages = problem.platform.gpus;
  options.memoryAware = rule != Rule::None;
  options.inFlightRule = rule == Rule::GPipe ? ScheduleKind::GPipe : ScheduleKind::OneFOneB;
  options.pipeDreamFilter = rule == Rule::PipeDream;
  options.exactStageCount = rule == Rule::PipeDream;
  options.tieBreak = rule != Rule::PipeDream;
  auto partition = minMaxPartition(model, options);
  BruteBest brute = bruteBest(problem, candidates, rule);
  if (brute.period == kInfinity) {
    EXPECT_FALSE(partition.has_value()) << label;
    return;
  }
  ASSERT_TRUE(partition.has_value()) << label << ": brute force found " << brute.period;
  bool fits = false;
  double bytes = 0;
  double value = bottleneckOf(problem, stagesFromPartition(lattice, *partition), rule, &fits, &bytes);
  EXPECT_TRUE(fits) << label;
  expectNear(brute.period, value, label + " bottleneck");
  expectNear(brute.period, partition->periodMs, label + " reported period");
  if (options.tieBreak)
    expectNear(brute.bytesAtBest, bytes, label + " crossing bytes at the optimum");
}

/// Every labeling layer -> stage that is monotone along the tensors and uses
/// stages 0..k-1 (k <= gpus), as lists of the layers of each stage: the brute
/// force the exact DAG algorithms are compared with.
std::vector<std::vector<std::vector<int>>> monotoneStagings(const Problem &problem, int gpus) {
  const int layers = static_cast<int>(problem.layers.size());
  std::vector<std::vector<std::vector<int>>> candidates;
  std::vector<int> label(static_cast<size_t>(layers), 0);
  std::function<void(int)> enumerate = [&](int layer) {
    if (layer == layers) {
      int k = *std::max_element(label.begin(), label.end()) + 1;
      std::vector<std::vector<int>> stages(static_cast<size_t>(k));
      for (int l = 0; l < layers; ++l)
        stages[static_cast<size_t>(label[static_cast<size_t>(l)])].push_back(l);
      for (const auto &s : stages)
        if (s.empty())
          return;
      for (const Tensor &t : problem.tensors)
        for (int c : t.consumers)
          if (label[static_cast<size_t>(c)] < label[static_cast<size_t>(t.producer)])
            return;
      candidates.push_back(stages);
      return;
    }
    for (int s = 0; s < gpus; ++s) {
      label[static_cast<size_t>(layer)] = s;
      enumerate(layer + 1);
    }
  };
  enumerate(0);
  return candidates;
}

TEST(AlgorithmOracle, ChainDynamicProgramsEqualBruteForce) {
  std::mt19937 rng(20260101);
  int cases = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 9);
    const int gpus = 1 + static_cast<int>(rng() % 4);
    Problem problem = randomChain(rng, layers, gpus);
    if (trial % 2)
      addRandomWorkspace(rng, problem);
    if (trial % 3 == 0)
      addRandomSharedSaved(rng, problem);
    if (trial % 5 == 1)
      addRandomSharedParameters(rng, problem);
    if (trial % 4 == 3) {
      // Every GPU in one node, a slower link beyond the last; links slow enough
      // that transfers often bound the stages.
      problem.platform.gpusPerNode = gpus;
      problem.platform.intraNode.bandwidthBytesPerSecond /= 20;
      orThrow(problem.finalize());
    }
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    std::vector<std::vector<std::vector<int>>> candidates, exact;
    for (const auto &sizes : allCompositions(layers, gpus)) {
      candidates.push_back(stagesFromSizes(sizes));
      if (static_cast<int>(sizes.size()) == std::min(gpus, layers))
        exact.push_back(stagesFromSizes(sizes));
    }
    const std::string label = "trial " + std::to_string(trial);
    checkMinMax(problem, lattice, candidates, Rule::None, label + " balanced");
    checkMinMax(problem, lattice, candidates, Rule::OneFOneB, label + " madpipe/1f1b");
    checkMinMax(problem, lattice, candidates, Rule::GPipe, label + " madpipe/gpipe");
    checkMinMax(problem, lattice, exact, Rule::PipeDream, label + " pipedream");
    ++cases;
  }
  EXPECT_EQ(cases, 1500);
}

TEST(AlgorithmOracle, DagAwareCutsEqualBruteForceOverMonotoneAllocations) {
  std::mt19937 rng(777);
  for (int trial = 0; trial < 300; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 6);
    const int gpus = 1 + static_cast<int>(rng() % 3);
    Problem problem = randomDag(rng, layers, gpus);
    if (trial % 2)
      addRandomWorkspace(rng, problem);
    if (trial % 3 == 0)
      addRandomSharedSaved(rng, problem);
    if (trial % 5 == 1)
      addRandomSharedParameters(rng, problem);
    auto lattice = idealLattice(problem, 100000);
    ASSERT_TRUE(lattice.has_value());
    // All labelings layer -> stage that are monotone along tensors and use 0..k-1.
    std::vector<std::vector<std::vector<int>>> candidates = monotoneStagings(problem, gpus);
    const std::string name = "dag trial " + std::to_string(trial);
    checkMinMax(problem, *lattice, candidates, Rule::None, name + " balanced");
    checkMinMax(problem, *lattice, candidates, Rule::OneFOneB, name + " madpipe/1f1b");
  }
}

TEST(AlgorithmOracle, LatticeStagesAreTheNestedPairsUnderTheBound) {
  std::mt19937 rng(4242);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 9);
    Problem problem = randomDag(rng, layers, 1 + static_cast<int>(rng() % 3));
    auto lattice = idealLattice(problem, 100000);
    ASSERT_TRUE(lattice.has_value());
    // Brute force over every pair of cuts: A strictly inside B, and B \ A no
    // slower than the bound on the fastest GPU.
    const double bound = trial % 2 ? kInfinity : std::uniform_real_distribution<double>(0, 20)(rng);
    const std::vector<double> &speed = problem.platform.speed;
    const double fastest = speed.empty() ? 1 : *std::max_element(speed.begin(), speed.end());
    size_t expected = 0;
    const size_t cuts = lattice->numCuts();
    for (size_t a = 0; a < cuts; ++a)
      for (size_t b = 0; b < cuts; ++b) {
        bool nested = a != b;
        for (int l = 0; l < layers && nested; ++l)
          nested = !lattice->contains(static_cast<int>(a), l) ||
                   lattice->contains(static_cast<int>(b), l);
        if (nested && lattice->work[b] - lattice->work[a] <= bound * (1 + 1e-9) * fastest)
          ++expected;
      }
    const std::string name = "trial " + std::to_string(trial);
    EXPECT_EQ(countLatticeStages(problem, *lattice, bound, 1u << 30), expected) << name;
    if (expected > 0)
      EXPECT_EQ(countLatticeStages(problem, *lattice, bound, expected - 1), expected) << name << " budget";
  }
}

TEST(AlgorithmOracle, ManyBlocksInSeriesPlanOnOrdersInsteadOfDownsets) {
  // 550 diamonds in series (fork, two parallel layers, join): 2,202 downsets, four
  // per block, but millions of nested pairs. The DPs then plan on topological
  // orders, and the result is no worse than on the first order alone.
  Problem problem;
  auto add = [&](double ms) {
    Layer layer;
    layer.name = "l" + std::to_string(problem.layers.size());
    layer.forwardMs = ms;
    layer.backwardMs = 2 * ms;
    problem.layers.push_back(layer);
    return static_cast<int>(problem.layers.size()) - 1;
  };
  int join = add(1);
  for (int block = 0; block < 550; ++block) {
    const int left = add(1 + block % 3), right = add(2), next = add(1);
    problem.tensors.push_back({join, {left, right}, 1e3});
    problem.tensors.push_back({left, {next}, 1e3});
    problem.tensors.push_back({right, {next}, 1e3});
    join = next;
  }
  problem.platform.gpus = 2;
  problem.training.microbatches = 4;
  orThrow(problem.finalize());
  auto lattice = idealLattice(problem, 20000);
  ASSERT_TRUE(lattice.has_value());
  EXPECT_EQ(lattice->numCuts(), 2202u);
  PlanOptions options;
  LowerBounds bounds = computeLowerBounds(problem);
  AlgorithmContext context{options, bounds};
  AlgorithmOutput output = findAlgorithm("balanced")->run(problem, context);
  ASSERT_TRUE(output.allocation.has_value()) << output.reason;
  EXPECT_NE(output.notes.find("2202 downsets, more than 1000000 stages between them"),
            std::string::npos)
      << output.notes;
  options.dagAware = false;
  AlgorithmContext oneOrder{options, bounds};
  AlgorithmOutput first = findAlgorithm("balanced")->run(problem, oneOrder);
  ASSERT_TRUE(first.allocation.has_value());
  EXPECT_LE(output.predictedPeriodMs, first.predictedPeriodMs * (1 + 1e-12));
}

/// Independent span recursion of the periodic schedule (LatticeDp.h).
double bruteSpan(const Problem &problem, const std::vector<std::vector<int>> &stages, double T,
                 bool *feasible, CopyRule rule = CopyRule::Span) {
  const int k = static_cast<int>(stages.size());
  const int gpus = problem.platform.gpus;
  const int m = problem.training.microbatches;
  auto priced = priceStages(problem, stages, Rule::None);
  const std::vector<StageParameters> parameters = stageParameters(problem, stages);
  std::vector<bool> inside(problem.layers.size(), false);
  std::vector<double> cutAfter;
  for (const auto &stage : stages) {
    for (int l : stage)
      inside[static_cast<size_t>(l)] = true;
    cutAfter.push_back(cutOf(problem, inside));
  }
  *feasible = true;
  double downstream = 0;
  // The recomputing variant (backward + forward; keeps the received bytes per copy
  // and one copy of the saved bytes) is tried only when the stage does not fit as
  // it is (RecomputePolicy::Auto), or always (All).
  std::vector<bool> variants{false};
  if (problem.training.recompute == RecomputePolicy::Auto)
    variants = {false, true};
  if (problem.training.recompute == RecomputePolicy::All)
    variants = {true};
  for (int s = k - 1; s >= 0; --s) {
    const int gpu = gpus - k + s;
    const BruteStage &stage = priced[static_cast<size_t>(s)];
    double saved = 0, modelInputs = 0;
    for (int l : stages[static_cast<size_t>(s)])
      modelInputs += problem.layers[static_cast<size_t>(l)].inputBytes;
    const StageParameters &params = parameters[static_cast<size_t>(s)];
    saved = stageSavedBytes(problem, stages[static_cast<size_t>(s)]);
    double buffers = 0;
    if (problem.training.communicationBuffers) {
      // Two buffers per cut tensor on each side: the activation and its gradient.
      if (s > 0)
        buffers += 2 * cutAfter[static_cast<size_t>(s - 1)];
      if (s < k - 1)
        buffers += 2 * cutAfter[static_cast<size_t>(s)];
    }
    const double received = modelInputs + (s > 0 ? cutAfter[static_cast<size_t>(s - 1)] : 0.0);
    bool placed = false;
    for (bool recompute : variants) {
      const double f = stage.forward;
      const double b = stage.backward + (recompute ? f : 0.0);
      if (f + b > T * (1 + 1e-9) || std::max(stage.period, f + b) > T * (1 + 1e-9))
        break;
      double earliest = f;
      if (s < k - 1)
        earliest += downstream + 2 * problem.platform.linkBetween(gpu, gpu + 1)
                                         .transferMs(cutAfter[static_cast<size_t>(s)]);
      // Smallest x >= earliest with x mod T in [f, T - b].
      double x = earliest;
      for (int guard = 0; guard < 4; ++guard) {
        double r = std::fmod(x, T);
        if (r + 1e-9 * T >= f && r <= T - b + 1e-9 * T)
          break;
        x = r < f ? x + (f - r) : x + (T - r) + f;
      }
      const double span = x + b;
      int copies = std::max(1, std::min(m, static_cast<int>(std::ceil(span / T - 1e-9))));
      // 1F1B keeps at most one copy per stage from here to the end alive.
      if (rule == CopyRule::OneFOneB && copies > k - s)
        break;
      const double activations = recompute ? copies * received + saved : copies * saved;
      if (problem.training.stateMultiplier * params.owned +
              readerStateMultiplier(problem.training) * params.read + buffers + activations +
              largestWorkspace(problem, stages[static_cast<size_t>(s)]) >
          problem.platform.memoryBytesPerGpu * (1 + 1e-12))
        continue;
      downstream = span;
      placed = true;
      break;
    }
    if (!placed) {
      *feasible = false;
      return kInfinity;
    }
  }
  return downstream;
}

TEST(AlgorithmOracle, PeriodicDynamicProgramEqualsBruteForceAtFixedPeriod) {
  std::mt19937 rng(4242);
  int autoRecomputes = 0;
  for (int trial = 0; trial < 1200; ++trial) {
    const int layers = 1 + static_cast<int>(rng() % 8);
    const int gpus = 1 + static_cast<int>(rng() % 4);
    Problem problem = randomChain(rng, layers, gpus);
    // A third each: no recomputation, where needed, everywhere.
    problem.training.recompute = trial % 3 == 0   ? RecomputePolicy::None
                                 : trial % 3 == 1 ? RecomputePolicy::Auto
                                                  : RecomputePolicy::All;
    if (problem.training.recompute != RecomputePolicy::None)
      for (Layer &layer : problem.layers) {
        layer.savedBytes *= 4; // tighter memory, so that stages must recompute
        if (rng() % 3 == 0)    // model inputs, which a recomputing stage keeps
          layer.inputBytes = std::uniform_real_distribution<double>(0, 5e5)(rng);
      }
    if (trial % 4 == 3)
      addRandomWorkspace(rng, problem);
    if (trial % 5 == 4)
      addRandomSharedSaved(rng, problem);
    if (trial % 7 == 2)
      addRandomSharedParameters(rng, problem);
    double total = 0, largest = 0;
    for (const Layer &l : problem.layers) {
      total += l.workMs();
      largest = std::max(largest, l.workMs());
    }
    const double T = std::uniform_real_distribution<double>(largest, total * 1.2 + 1)(rng);
    const CutLattice lattice = chainLattice(problem, topologicalOrder(problem));
    const StageModel model(problem, lattice);
    // Half the trials count copies as 1F1B does (at most the stages to the end).
    const CopyRule rule = trial % 2 ? CopyRule::OneFOneB : CopyRule::Span;
    double bestSpan = kInfinity;
    for (const auto &sizes : allCompositions(layers, gpus)) {
      bool feasible = false;
      double span = bruteSpan(problem, stagesFromSizes(sizes), T, &feasible, rule);
      if (feasible)
        bestSpan = std::min(bestSpan, span);
    }
    auto partition = periodicPartition(model, gpus, T, rule);
    const std::string label = "trial " + std::to_string(trial) + " T=" + std::to_string(T) +
                              " recompute " + toString(problem.training.recompute) +
                              (rule == CopyRule::OneFOneB ? " 1f1b" : " periodic");
    if (bestSpan == kInfinity) {
      EXPECT_FALSE(partition.has_value()) << label;
      continue;
    }
    ASSERT_TRUE(partition.has_value()) << label;
    bool feasible = false;
    double span =
        bruteSpan(problem, stagesFromPartition(lattice, *partition), T, &feasible, rule);
    EXPECT_TRUE(feasible) << label;
    expectNear(bestSpan, span, label + " first-stage span");
    if (problem.training.recompute == RecomputePolicy::Auto &&
        std::count(partition->recompute.begin(), partition->recompute.end(), true) > 0)
      ++autoRecomputes;
  }
  EXPECT_GT(autoRecomputes, 10); // Auto's choice is exercised
}

TEST(AlgorithmOracle, ParamsSplitEqualsBruteForce) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 1000; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 9);
    const int parts = 1 + static_cast<int>(rng() % 5);
    std::vector<double> weights;
    for (int i = 0; i < n; ++i)
      weights.push_back(static_cast<double>(rng() % 100));
    double best = kInfinity;
    for (const auto &sizes : allCompositions(n, std::min(parts, n))) {
      if (static_cast<int>(sizes.size()) != std::min(parts, n))
        continue;
      double worst = 0;
      int at = 0;
      for (int size : sizes) {
        double sum = 0;
        for (int i = 0; i < size; ++i)
          sum += weights[static_cast<size_t>(at++)];
        worst = std::max(worst, sum);
      }
      best = std::min(best, worst);
    }
    auto sizes = minMaxSplitSizes(weights, parts);
    ASSERT_EQ(static_cast<int>(sizes.size()), std::min(parts, n));
    double worst = 0;
    int at = 0;
    for (int size : sizes) {
      EXPECT_GT(size, 0);
      double sum = 0;
      for (int i = 0; i < size; ++i)
        sum += weights[static_cast<size_t>(at++)];
      worst = std::max(worst, sum);
    }
    EXPECT_EQ(at, n);
    EXPECT_DOUBLE_EQ(best, worst) << "trial " << trial;
  }
}

// The split's cells are found by binary search; the plain scan over every earlier
// cut, taking the earliest of the best, is the oracle (zero weights make ties).
TEST(AlgorithmOracle, ParamsSplitIsTheScanWithItsEarliestCuts) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 120);
    const int parts = 1 + static_cast<int>(rng() % 12);
    std::vector<double> weights;
    for (int i = 0; i < n; ++i)
      weights.push_back(rng() % 3 == 0 ? 0.0 : static_cast<double>(rng() % 50) * 0.1);
    const int k = std::min(parts, n);
    std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
    for (int i = 0; i < n; ++i)
      prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + weights[static_cast<size_t>(i)];
    // best[q][j], from[q][j]: the first j items in q parts.
    std::vector<std::vector<double>> best(static_cast<size_t>(k) + 1,
                                          std::vector<double>(static_cast<size_t>(n) + 1, kInfinity));
    std::vector<std::vector<int>> from(best.size(), std::vector<int>(best[0].size(), -1));
    best[0][0] = 0;
    for (int q = 1; q <= k; ++q)
      for (int j = q; j <= n - (k - q); ++j)
        for (int i = q - 1; i < j; ++i) {
          const double v = std::max(best[static_cast<size_t>(q - 1)][static_cast<size_t>(i)],
                                    prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)]);
          if (v < best[static_cast<size_t>(q)][static_cast<size_t>(j)]) {
            best[static_cast<size_t>(q)][static_cast<size_t>(j)] = v;
            from[static_cast<size_t>(q)][static_cast<size_t>(j)] = i;
          }
        }
    std::vector<int> expected(static_cast<size_t>(k));
    for (int q = k, j = n; q >= 1; --q) {
      const int i = from[static_cast<size_t>(q)][static_cast<size_t>(j)];
      expected[static_cast<size_t>(q - 1)] = j - i;
      j = i;
    }
    EXPECT_EQ(minMaxSplitSizes(weights, parts), expected) << "trial " << trial;
  }
}

TEST(AlgorithmOracle, BestKeepsTheBestValidPlanOfAllTried) {
  std::mt19937 rng(5);
  for (int trial = 0, trials = scaledTrials(60); trial < trials; ++trial) {
    Problem problem = randomChain(rng, 3 + static_cast<int>(rng() % 8), 1 + static_cast<int>(rng() % 4));
    if (trial % 2)
      addRandomWorkspace(rng, problem);
    PlanningReport report = planOrThrow(problem);
    ASSERT_FALSE(report.results.empty());
    for (const PlanResult &r : report.results) {
      if (!r.valid)
        continue;
      ASSERT_NE(report.best(), nullptr);
      EXPECT_LE(report.best()->periodMs, r.periodMs * (1 + 1e-9)) << r.algorithm;
      EXPECT_GE(r.periodMs, report.bounds.bestMs * (1 - 1e-9)) << "below the lower bound: " << r.algorithm;
    }
    if (!report.best())
      for (const PlanResult &r : report.results)
        EXPECT_FALSE(r.reason.empty()) << r.algorithm;
  }
}

} // namespace
} // namespace partitioner::testing

namespace partitioner::testing {
namespace {

/// The MIP oracles' instance of `trial`: a random chain (even trials) or DAG of
/// 2 to 1 + layerChoices layers on minGpus to minGpus + gpuChoices - 1 GPUs, with
/// a workspace, shared saved values or shared parameters on some trials.
Problem randomMipProblem(std::mt19937 &rng, int trial, int layerChoices, int minGpus, int gpuChoices) {
  const int layers = 2 + static_cast<int>(rng() % static_cast<unsigned>(layerChoices));
  const int gpus = minGpus + static_cast<int>(rng() % static_cast<unsigned>(gpuChoices));
  Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
  if (trial % 4 >= 2)
    addRandomWorkspace(rng, problem);
  if (trial % 3 == 1)
    addRandomSharedSaved(rng, problem);
  if (trial % 5 == 3)
    addRandomSharedParameters(rng, problem);
  return problem;
}

TEST(AlgorithmOracle, IlpEqualsBruteForceOverMonotoneAllocations) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 120; ++trial) {
    Problem problem = randomMipProblem(rng, trial, /*layerChoices=*/5, /*minGpus=*/1, /*gpuChoices=*/3);
    const int gpus = problem.platform.gpus;
    // One link class: the MIP may leave stages empty (it then charges more memory, never
    // less), which only matters when link classes differ between GPU pairs.
    problem.platform.interNode = problem.platform.intraNode;
    problem.platform.speed.clear(); // same reason: every GPU alike
    std::vector<std::vector<std::vector<int>>> candidates = monotoneStagings(problem, gpus);
    BruteBest brute = bruteBest(problem, candidates, Rule::OneFOneB);
    LowerBounds bounds = computeLowerBounds(problem);
    PlanOptions options;
    AlgorithmContext context{options, bounds};
    // The MIP's rows against the min-max model (the span loop has its own oracle,
    // Links.IlpEndsAtTheFastestSimulatedSplitOfAChain).
    AlgorithmOutput output = runIlp(problem, context, /*minMaxBound=*/true, IlpLinks::MinMax);
    const std::string name = "ilp trial " + std::to_string(trial);
    if (brute.period == kInfinity) {
      EXPECT_FALSE(output.allocation.has_value()) << name;
      continue;
    }
    ASSERT_TRUE(output.allocation.has_value()) << name << ": " << output.reason;
    expectNear(brute.period, output.predictedPeriodMs, name + " optimum");
    EXPECT_NE(output.notes.find("optimal"), std::string::npos) << name << ": " << output.notes;
  }
}

// ilpMinMaxBoundMs (the min-max DP's optimum with every link the fastest) never
// exceeds the MIP's optimum, which CBC proves unaided, with two link classes
// where the MIP may leave GPUs empty; `ilp` with the bound reaches the same
// optimum, and where its warm start meets the bound it answers without CBC.
TEST(AlgorithmOracle, IlpMinMaxBoundNeverExceedsTheMipOptimum) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(77);
  int withoutCbc = 0, cbcFromTheBound = 0;
  for (int trial = 0; trial < 160; ++trial) {
    Problem problem = randomMipProblem(rng, trial, /*layerChoices=*/7, /*minGpus=*/2, /*gpuChoices=*/4);
    if (trial % 7 == 0)
      problem.training.schedule = ScheduleKind::GPipe;
    if (trial % 3 == 2) // often no memory limit and fast links: the start then meets the bound
      problem.platform.memoryBytesPerGpu = kInfinity;
    if (trial % 3 == 0) // a slow link class: the bound falls below the start
      problem.platform.interNode.bandwidthBytesPerSecond /= 50;
    problem.platform.gpusPerNode = 1 + static_cast<int>(rng() % 2);
    const LowerBounds bounds = computeLowerBounds(problem);
    PlanOptions options;
    const AlgorithmContext context{options, bounds};
    const std::string name = "trial " + std::to_string(trial);
    const double bound = ilpMinMaxBoundMs(problem, context);
    if (!problem.platform.speed.empty())
      EXPECT_EQ(bound, 0) << name << ": GPUs of several speeds";
    const AlgorithmOutput unaided = runIlp(problem, context, /*minMaxBound=*/false, IlpLinks::MinMax);
    const AlgorithmOutput aided = runIlp(problem, context, /*minMaxBound=*/true, IlpLinks::MinMax);
    ASSERT_EQ(unaided.allocation.has_value(), aided.allocation.has_value()) << name;
    if (!unaided.allocation)
      continue;
    ASSERT_NE(unaided.notes.find("CBC: optimal"), std::string::npos) << name << ": " << unaided.notes;
    ASSERT_NE(aided.notes.find("optimal"), std::string::npos) << name << ": " << aided.notes;
    EXPECT_LE(bound, unaided.predictedPeriodMs * (1 + 1e-9)) << name;
    expectNear(unaided.predictedPeriodMs, aided.predictedPeriodMs, name + " optimum");
    EXPECT_GE(aided.provenLowerBoundMs, bound * (1 - 1e-9)) << name;
    if (aided.notes.find("without CBC") != std::string::npos)
      ++withoutCbc;
    else if (bound > 0)
      ++cbcFromTheBound;
  }
  EXPECT_GE(withoutCbc, 20) << cbcFromTheBound;
  EXPECT_GE(cbcFromTheBound, 20) << withoutCbc;
}

// The downsets shared through IdealLatticeCache: the same lattice for every
// caller of the planning run's problem (none for another problem or limit), and
// the same plans as when each algorithm enumerates its own.
TEST(AlgorithmOracle, TheDownsetsOfARunAreEnumeratedOnceWithTheSamePlans) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 40; ++trial) {
    const int layers = 4 + static_cast<int>(rng() % 20);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = randomDag(rng, layers, gpus);
    PlanOptions options;
    options.maxDownsets = trial % 2 ? 8 : 100000; // too many, or the lattice
    const LowerBounds bounds = computeLowerBounds(problem);
    IdealLatticeCache cache(problem);
    const std::optional<CutLattice> *first = cache.find(problem, options.maxDownsets);
    ASSERT_NE(first, nullptr);
    EXPECT_EQ(cache.find(problem, options.maxDownsets), first);
    EXPECT_EQ(cache.find(problem, options.maxDownsets + 1), nullptr);
    const Problem copy = problem;
    EXPECT_EQ(cache.find(copy, options.maxDownsets), nullptr);
    EXPECT_EQ(first->has_value(), idealLattice(problem, options.maxDownsets).has_value());
    const AlgorithmContext shared{options, bounds, &cache}, alone{options, bounds};
    for (const char *name : {"balanced", "pipedream", "madpipe", "interleaved"}) {
      const Algorithm *algorithm = findAlgorithm(name);
      ASSERT_NE(algorithm, nullptr);
      const AlgorithmOutput a = algorithm->run(problem, shared), b = algorithm->run(problem, alone);
      const std::string what = std::string(name) + " trial " + std::to_string(trial);
      ASSERT_EQ(a.allocation.has_value(), b.allocation.has_value()) << what;
      EXPECT_EQ(a.notes, b.notes) << what;
      EXPECT_EQ(a.predictedPeriodMs, b.predictedPeriodMs) << what;
      if (a.allocation)
        EXPECT_EQ(a.allocation->stageOfLayer, b.allocation->stageOfLayer) << what;
    }
  }
}

} // namespace
} // namespace partitioner::testing
