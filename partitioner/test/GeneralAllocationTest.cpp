// General (non-contiguous) allocations: `ilp-general` against enumeration of every map
// layer -> GPU on tiny chains, the schedules of general allocations against the checker
// and the simulator, the paper's contiguity example, and the `general` heuristic.
#include "TestUtil.h"

#include "partitioner/BoundaryMoves.h"
#include "partitioner/Linearize.h"
#include "partitioner/Planner.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace partitioner::testing {
namespace {

/// The model `ilp-general` optimises (docs/partitioner.md), evaluated independently for
/// one map position -> GPU of a chain: stages are maximal runs; stage s keeps
/// min(S - s, m) copies (m for GPipe); period = max over GPUs of compute and port
/// occupancy; memory as the simulator counts it with those copies.
struct ModelValue {
  double period = 0;
  bool fits = true;
};

ModelValue modelValue(const Problem &problem, const std::vector<int> &order, const std::vector<int> &gpuOf,
                      ScheduleKind kind) {
  const int L = static_cast<int>(order.size());
  const int P = problem.platform.gpus;
  const Platform &platform = problem.platform;
  std::vector<int> position(static_cast<size_t>(L));
  for (int i = 0; i < L; ++i)
    position[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
  std::vector<int> stageOf(static_cast<size_t>(L), 0);
  int S = 1;
  for (int i = 1; i < L; ++i) {
    if (gpuOf[static_cast<size_t>(i)] != gpuOf[static_cast<size_t>(i - 1)])
      ++S;
    stageOf[static_cast<size_t>(i)] = S - 1;
  }
  std::vector<double> compute(static_cast<size_t>(P), 0), ports(static_cast<size_t>(P), 0),
      memory(static_cast<size_t>(P), 0), workspace(static_cast<size_t>(P), 0);
  const int m = problem.training.microbatches;
  for (int i = 0; i < L; ++i) {
    const Layer &layer = problem.layers[static_cast<size_t>(order[static_cast<size_t>(i)])];
    const size_t g = static_cast<size_t>(gpuOf[static_cast<size_t>(i)]);
    compute[g] += layer.workMs() / platform.speedOf(static_cast<int>(g));
    const int copies = kind == ScheduleKind::GPipe ? m : std::min(S - stageOf[static_cast<size_t>(i)], m);
    memory[g] += copies * layer.savedBytes;
    workspace[g] = std::max(workspace[g], layer.workspaceBytes); // one layer runs at a time
  }
  // Parameters per stage: its layers', the shared ones it owns or keeps a copy of.
  std::vector<std::vector<int>> stageLayers(static_cast<size_t>(S));
  std::vector<int> gpuOfStage(static_cast<size_t>(S));
  for (int i = 0; i < L; ++i) {
    stageLayers[static_cast<size_t>(stageOf[static_cast<size_t>(i)])].push_back(order[static_cast<size_t>(i)]);
    gpuOfStage[static_cast<size_t>(stageOf[static_cast<size_t>(i)])] = gpuOf[static_cast<size_t>(i)];
  }
  const std::vector<StageParameters> parameters = stageParameters(problem, stageLayers, gpuOfStage);
  for (int s = 0; s < S; ++s) {
    const int copies = kind == ScheduleKind::GPipe ? m : std::min(S - s, m);
    const int extra = weightVersions(problem.training, copies) - 1;
    const StageParameters &params = parameters[static_cast<size_t>(s)];
    memory[static_cast<size_t>(gpuOfStage[static_cast<size_t>(s)])] +=
        (problem.training.stateMultiplier + extra) * params.owned +
        (readerStateMultiplier(problem.training) + extra) * params.read;
  }
  for (int g = 0; g < P; ++g)
    memory[static_cast<size_t>(g)] += workspace[static_cast<size_t>(g)];
  for (int b = 0; b + 1 < L; ++b) {
    const int before = gpuOf[static_cast<size_t>(b)], after = gpuOf[static_cast<size_t>(b + 1)];
    if (before == after)
      continue;
    double bytes = 0; // tensors produced at or before b and consumed after it
    for (const Tensor &t : problem.tensors) {
      bool crosses = false;
      for (int c : t.consumers)
        crosses |= position[static_cast<size_t>(t.producer)] <= b && position[static_cast<size_t>(c)] > b;
      if (crosses)
        bytes += t.bytes;
    }
    double occupancy = platform.intraNode.occupancyMs(bytes);
    if (P > platform.gpusPerNode)
      occupancy = std::max(occupancy, platform.interNode.occupancyMs(bytes));
    for (int g : {before, after}) {
      ports[static_cast<size_t>(g)] += occupancy;
      if (problem.training.communicationBuffers) // the activation and its gradient
        memory[static_cast<size_t>(g)] += 2 * bytes;
    }
  }
  ModelValue value;
  for (size_t g = 0; g < static_cast<size_t>(P); ++g) {
    value.period = std::max({value.period, compute[g], ports[g]});
    value.fits &= memory[g] <= platform.memoryBytesPerGpu * (1 + 1e-9);
  }
  return value;
}

Allocation allocationOfMap(const Problem &problem, const std::vector<int> &order, const std::vector<int> &gpuOf) {
  Allocation allocation;
  allocation.stageOfLayer.assign(problem.layers.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || gpuOf[i] != gpuOf[i - 1])
      allocation.gpuOfStage.push_back(gpuOf[i]);
    allocation.stageOfLayer[static_cast<size_t>(order[i])] = allocation.numStages() - 1;
  }
  return allocation;
}

/// Calls f(map) for every map of `layers` positions to `gpus` GPUs.
template <typename F> void forEachMap(int layers, int gpus, F f) {
  std::vector<int> map(static_cast<size_t>(layers), 0);
  while (true) {
    f(map);
    int i = 0;
    while (i < layers && ++map[static_cast<size_t>(i)] == gpus)
      map[static_cast<size_t>(i++)] = 0;
    if (i == layers)
      return;
  }
}

/// The best simulated period over every map layer -> GPU under `kind` (infinity when
/// none fits). A map with one stage per GPU also runs under 1F1B with every vector of
/// caps on the micro-batches each stage keeps alive (Allocation::inFlightLimit, what a
/// span DP hands the generator): 1 .. S - s on stage s.
double bestOverEveryMap(const Problem &problem, int layers, int gpus, ScheduleKind kind,
                        const LowerBounds &bounds) {
  const std::vector<int> order = topologicalOrder(problem);
  double best = kInfinity;
  auto consider = [&](const Allocation &allocation) {
    PlanResult each = evaluateUnderPolicyOrThrow(problem, allocation, kind, bounds);
    if (each.valid)
      best = std::min(best, each.periodMs);
  };
  forEachMap(layers, gpus, [&](const std::vector<int> &map) {
    Allocation allocation = allocationOfMap(problem, order, map);
    consider(allocation);
    const bool capsApply = (kind == ScheduleKind::OneFOneB || kind == ScheduleKind::OneFOneBStash) &&
                           allocation.oneStagePerGpu();
    if (!capsApply)
      return;
    const int stages = allocation.numStages();
    std::vector<int> caps(static_cast<size_t>(stages), 1);
    while (true) {
      allocation.inFlightLimit = caps;
      consider(allocation);
      int s = 0;
      while (s < stages && ++caps[static_cast<size_t>(s)] > stages - s)
        caps[static_cast<size_t>(s++)] = 1;
      if (s == stages)
        return;
    }
  });
  return best;
}

Problem randomSmallChain(std::mt19937 &rng, int layers, int gpus, int variant) {
  Problem problem = randomChain(rng, layers, gpus);
  if (variant % 2 == 0) // free links, no buffers (the reference model)
    problem.platform.intraNode = problem.platform.interNode = LinkSpec{kInfinity, 0};
  if (variant % 3 == 0)
    problem.platform.memoryBytesPerGpu = kInfinity;
  const ScheduleKind kinds[] = {ScheduleKind::OneFOneB, ScheduleKind::OneFOneBStash, ScheduleKind::GPipe,
                                ScheduleKind::OneFOneB};
  problem.training.schedule = kinds[rng() % 4];
  const WeightPolicy policies[] = {WeightPolicy::Default, WeightPolicy::Single, WeightPolicy::DoubleBuffered,
                                   WeightPolicy::Stashed};
  problem.training.weights = policies[rng() % 4];
  if (variant % 4 == 1)
    addRandomWorkspace(rng, problem);
  if (variant % 5 == 2)
    addRandomSharedParameters(rng, problem);
  orThrow(problem.finalize());
  return problem;
}

/// The simulated period of one map under `kind` (infinity when it does not run).
double simulatedPeriod(const Problem &problem, const Allocation &allocation, ScheduleKind kind,
                       const LowerBounds &bounds) {
  try {
    const PlanResult result = evaluateUnderPolicyOrThrow(problem, allocation, kind, bounds);
    return result.valid ? result.periodMs : kInfinity;
  } catch (const Error &) {
    return kInfinity;
  }
}

// `ilp-general` returns the map that simulates fastest among those its memory rows
// admit: every map layer -> GPU enumerated, the model's value of each computed
// independently (modelValue) and each fitting map simulated. Without transfer time
// the MIP's T bounds the simulated period, so its loop (simulate the optimum, cut
// off a map above its T, solve again) proves the best map; with links it must
// still return a fitting map no better than the best.
TEST(GeneralAllocation, IlpGeneralFindsTheFastestSimulatedMapOfItsModel) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(77);
  const Algorithm *ilp = findAlgorithm("ilp-general");
  ASSERT_NE(ilp, nullptr);
  int feasible = 0, beatsContiguous = 0, freeLinks = 0, firstAtModel = 0, severalRounds = 0,
      linksAtBest = 0;
  // Under the sanitizers a twenty-fifth: each round builds CBC's model afresh,
  // and ASan maps CBC's large blocks anew each time (a tenth took 100 s there).
  const bool scaled = scaledTrials(1000) < 1000;
  const int trials = scaled ? scaledTrials(400) : 1000;
  for (int trial = 0; trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 5); // 2..6
    const int gpus = 1 + static_cast<int>(rng() % 3);  // 1..3
    Problem problem = randomSmallChain(rng, layers, gpus, trial);
    const std::string name = "trial " + std::to_string(trial);
    const std::vector<int> order = topologicalOrder(problem);
    const ScheduleKind kind = problem.training.schedule;
    const LowerBounds bounds = computeLowerBounds(problem);
    // The fitting maps by model period. Without transfer time a map simulates at its
    // model period or slower, so the simulations stop at the first map whose model
    // period is below neither the best simulated one nor the best contiguous one.
    const bool free = trial % 2 == 0;
    std::vector<std::pair<double, std::vector<int>>> fitting;
    forEachMap(layers, gpus, [&](const std::vector<int> &map) {
      const ModelValue value = modelValue(problem, order, map, kind);
      if (value.fits)
        fitting.emplace_back(value.period, map);
    });
    std::sort(fitting.begin(), fitting.end());
    double brute = kInfinity, bruteContiguous = kInfinity;
    const double bruteModel = fitting.empty() ? kInfinity : fitting.front().first;
    for (const auto &[period, map] : fitting) {
      const Allocation allocation = allocationOfMap(problem, order, map);
      if (free && period >= brute * (1 - 1e-9)) {
        if (period >= bruteContiguous * (1 - 1e-9))
          break; // neither best can improve
        if (!allocation.oneStagePerGpu())
          continue;
      }
      const double simulated = simulatedPeriod(problem, allocation, kind, bounds);
      EXPECT_TRUE(!free || simulated >= period * (1 - 1e-9)) << name;
      brute = std::min(brute, simulated);
      if (allocation.oneStagePerGpu())
        bruteContiguous = std::min(bruteContiguous, simulated);
    }
    PlanOptions options;
    options.algorithms = {"ilp-general"};
    // Proving optimality is the point: no wall-clock limit that a loaded or
    // sanitized machine could hit (these MIPs solve in well under a second).
    options.ilpTimeLimitSeconds = 3600;
    AlgorithmContext context{options, bounds};
    AlgorithmOutput output = ilp->run(problem, context);
    if (brute == kInfinity) {
      EXPECT_FALSE(output.allocation.has_value()) << name;
      continue;
    }
    ++feasible;
    ASSERT_TRUE(output.allocation.has_value()) << name << ": " << output.reason;
    beatsContiguous += brute < bruteContiguous * (1 - 1e-9);
    // The MIP's allocation fits the model at the period it reports, and the
    // simulator runs it within the model's in-flight counts.
    std::vector<int> map;
    for (int l : order)
      map.push_back(output.allocation->gpuOfStage[static_cast<size_t>(output.allocation->stageOfLayer[static_cast<size_t>(l)])]);
    const ModelValue value = modelValue(problem, order, map, kind);
    EXPECT_TRUE(value.fits) << name;
    EXPECT_NEAR(output.predictedPeriodMs, value.period, 1e-6 * value.period) << name;
    ASSERT_TRUE(output.schedule.has_value());
    PlanResult result = evaluateUnderPolicyOrThrow(problem, *output.allocation, *output.schedule, bounds);
    ASSERT_TRUE(result.valid) << name << ": " << result.reason;
    const int S = output.allocation->numStages();
    for (int s = 0; s < S; ++s)
      EXPECT_LE(result.stages[static_cast<size_t>(s)].inFlight,
                kind == ScheduleKind::GPipe ? problem.training.microbatches
                                            : std::min(S - s, problem.training.microbatches))
          << name;
    EXPECT_GE(result.periodMs, brute * (1 - 1e-9)) << name;
    // The bound: on the model's period of every map (with links, where the model's
    // port rows may exceed what the simulator charges), on the simulated one without.
    EXPECT_LE(output.provenLowerBoundMs, (free ? brute : bruteModel) * (1 + 1e-9)) << name;
    const bool oneRound = output.notes.find("after 1 MIP solve:") != std::string::npos;
    if (free) { // the best simulated map, proven
      ++freeLinks;
      EXPECT_NEAR(result.periodMs, brute, 1e-6 * brute) << name << ": " << output.notes;
      EXPECT_NE(output.notes.find("optimal in simulation"), std::string::npos) << name << ": " << output.notes;
      EXPECT_NEAR(output.provenLowerBoundMs, brute, 1e-6 * brute) << name << ": " << output.notes;
      firstAtModel += oneRound && result.periodMs <= bruteModel * (1 + 1e-6);
      severalRounds += !oneRound;
    } else {
      linksAtBest += result.periodMs <= brute * (1 + 1e-6);
    }
  }
  // Enough of the cases are feasible, general allocations matter on some of them,
  // and the loop matters on some.
  EXPECT_GT(feasible, trials / 2);
  EXPECT_GT(beatsContiguous, trials / 50);
  EXPECT_TRUE(scaled || severalRounds > 0);
  RecordProperty("feasible", feasible);
  RecordProperty("beats_contiguous", beatsContiguous);
  RecordProperty("first_at_model_period", firstAtModel);
  std::printf("ilp-general: %d feasible of %d, %d beat every contiguous split; free links: "
              "%d plans, the first optimum at its model period on %d, several rounds on %d; "
              "with links %d of %d at the best simulated map\n",
              feasible, trials, beatsContiguous, freeLinks, firstAtModel, severalRounds, linksAtBest,
              feasible - freeLinks);
}

TEST(GeneralAllocation, PaperExampleSixAgainstNine) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  // P = 3, w = (6, 3, 6, 3): the best contiguous split has period 9, a general
  // allocation ({1}, {3}, {2, 4}) has 6, and the 1F1B schedule reaches it.
  Problem problem;
  for (double w : {6.0, 3.0, 6.0, 3.0}) {
    Layer layer;
    layer.name = "l" + std::to_string(problem.layers.size());
    layer.forwardMs = w / 3;
    layer.backwardMs = 2 * w / 3;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 3;
  problem.platform.intraNode = problem.platform.interNode = LinkSpec{kInfinity, 0};
  problem.training.microbatches = 12;
  problem.training.communicationBuffers = false;
  orThrow(problem.finalize());
  PlanOptions options;
  options.algorithms = {"ilp", "ilp-general", "general"};
  PlanningReport report = planOrThrow(problem, options);
  ASSERT_EQ(report.results.size(), 3u);
  EXPECT_NEAR(report.results[0].periodMs, 9.0, 1e-9);
  for (size_t i : {1u, 2u}) {
    ASSERT_TRUE(report.results[i].valid) << report.results[i].algorithm << ": " << report.results[i].reason;
    EXPECT_NEAR(report.results[i].periodMs, 6.0, 1e-9) << report.results[i].algorithm;
    EXPECT_FALSE(report.results[i].allocation.oneStagePerGpu());
  }
  EXPECT_NEAR(report.results[1].predictedPeriodMs, 6.0, 1e-9);
  ASSERT_NE(report.best(), nullptr);
  EXPECT_NEAR(report.best()->periodMs, 6.0, 1e-9);
  // `best` includes both on a model this small.
  PlanningReport defaults = planOrThrow(problem);
  ASSERT_NE(defaults.best(), nullptr);
  EXPECT_NEAR(defaults.best()->periodMs, 6.0, 1e-9);
}

TEST(GeneralAllocation, SchedulesOfRandomGeneralAllocationsPassTheChecker) {
  std::mt19937 rng(5);
  int checked = 0;
  for (int trial = 0; trial < 150; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 8);
    const int gpus = 2 + static_cast<int>(rng() % 3);
    Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
    problem.training.microbatches = 1 + static_cast<int>(rng() % 8);
    const std::vector<int> order = topologicalOrder(problem);
    std::vector<int> map;
    for (int i = 0; i < layers; ++i)
      map.push_back(static_cast<int>(rng() % static_cast<unsigned>(gpus)));
    const Allocation allocation = allocationOfMap(problem, order, map);
    for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::OneFOneBStash,
                              ScheduleKind::ZeroBubble}) {
      problem.training.schedule = kind;
      const std::string name = "trial " + std::to_string(trial) + " " + toString(kind);
      Schedule schedule;
      SimulationResult result = simulatePlan(problem, allocation, kind, &schedule);
      ASSERT_TRUE(result.completed) << name << ": " << result.error;
      CheckReport check = checkSchedule(problem, allocation, schedule);
      EXPECT_TRUE(check.ok()) << name << ": " << (check.ok() ? "" : check.violations.front());
      CheckReport timing = checkTimeline(problem, allocation, schedule, result.timeline);
      EXPECT_TRUE(timing.ok()) << name << ": " << (timing.ok() ? "" : timing.violations.front());
      const int S = allocation.numStages();
      for (int s = 0; s < S; ++s)
        EXPECT_LE(result.stageInFlight[static_cast<size_t>(s)],
                  kind == ScheduleKind::GPipe ? problem.training.microbatches
                                              : std::min(S - s, problem.training.microbatches))
            << name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 600);
}

// The period of a general allocation is the marginal cost of micro-batches under
// one kind of order: the one the generator chose for m micro-batches (periodic
// pattern or list scheduler) is generated for 2m too, even where choosing again at
// 2m would take the other kind (the period would then be of no schedule).
TEST(GeneralAllocation, ThePeriodIsThatOfTheOrderChosenForMMicrobatches) {
  std::mt19937 rng(11);
  int mixed = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int layers = 4 + static_cast<int>(rng() % 8);
    const int gpus = 2 + static_cast<int>(rng() % 2);
    Problem problem = trial % 2 ? randomDag(rng, layers, gpus) : randomChain(rng, layers, gpus);
    problem.platform.memoryBytesPerGpu = kInfinity;
    const int m = 2 + static_cast<int>(rng() % 6);
    problem.training.microbatches = m;
    const std::vector<int> order = topologicalOrder(problem);
    std::vector<int> map;
    for (int i = 0; i < layers; ++i)
      map.push_back(static_cast<int>(rng() % static_cast<unsigned>(gpus)));
    const Allocation allocation = allocationOfMap(problem, order, map);
    if (allocation.oneStagePerGpu())
      continue;
    const StageGraph graph = buildStageGraph(problem, allocation);
    const ScheduleKind kind = ScheduleKind::OneFOneB;
    GeneralOrder atM = GeneralOrder::Choose, atTwiceM = GeneralOrder::Choose;
    const Schedule shorter = generateSchedule(kind, problem, allocation, graph, m, nullptr, &atM);
    generateSchedule(kind, problem, allocation, graph, 2 * m, nullptr, &atTwiceM);
    ASSERT_NE(atM, GeneralOrder::Choose);
    if (atM == atTwiceM)
      continue;
    ++mixed;
    const std::string name = "trial " + std::to_string(trial);
    GeneralOrder same = atM;
    const Schedule longer = generateSchedule(kind, problem, allocation, graph, 2 * m, nullptr, &same);
    EXPECT_EQ(same, atM) << name;
    const SimulationResult a = simulate(problem, allocation, shorter, graph);
    const SimulationResult b = simulate(problem, allocation, longer, graph);
    ASSERT_TRUE(a.completed && b.completed) << name;
    double marginal = (b.iterationMs - a.iterationMs) / m;
    for (double busy : a.gpuBusyMs)
      marginal = std::max(marginal, busy / m);
    const SimulationResult plan = simulatePlan(problem, allocation, kind);
    EXPECT_NEAR(plan.periodMs, marginal, 1e-9 * marginal) << name;
    EXPECT_NEAR(plan.iterationMs, a.iterationMs, 1e-9 * a.iterationMs) << name;
  }
  EXPECT_GT(mixed, 0) << "no allocation whose order kind differs between m and 2m";
}

TEST(GeneralAllocation, HeuristicIsValidAndNeverBelowTheExactOptimum) {
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(31);
  const Algorithm *general = findAlgorithm("general");
  const Algorithm *ilp = findAlgorithm("ilp-general");
  ASSERT_NE(general, nullptr);
  int compared = 0, optimal = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 5);
    const int gpus = 2 + static_cast<int>(rng() % 2);
    Problem problem = randomSmallChain(rng, layers, gpus, 0); // free links
    problem.platform.memoryBytesPerGpu = kInfinity;
    problem.platform.speed.clear();
    LowerBounds bounds = computeLowerBounds(problem);
    PlanOptions options;
    options.algorithms = {"general", "ilp-general"};
    AlgorithmContext context{options, bounds};
    AlgorithmOutput heuristic = general->run(problem, context);
    AlgorithmOutput exact = ilp->run(problem, context);
    ASSERT_TRUE(heuristic.allocation.has_value()) << trial << ": " << heuristic.reason;
    ASSERT_TRUE(exact.allocation.has_value()) << trial << ": " << exact.reason;
    PlanResult result = evaluateOrThrow(problem, *heuristic.allocation, *heuristic.schedule, bounds);
    ASSERT_TRUE(result.valid) << trial << ": " << result.reason;
    EXPECT_GE(result.periodMs, exact.predictedPeriodMs * (1 - 1e-9)) << trial;
    // LPT on balanced chunks: within 4/3 of the optimum plus the largest chunk's excess.
    EXPECT_LE(heuristic.predictedPeriodMs, 2 * exact.predictedPeriodMs) << trial;
    optimal += heuristic.predictedPeriodMs <= exact.predictedPeriodMs * (1 + 1e-6);
    ++compared;
  }
  std::printf("general: optimal on %d of %d small chains\n", optimal, compared);
}

TEST(GeneralAllocation, BlockMovesFitNeverLoseToTheirStartAndNeverBeatEveryMap) {
  // `general-moves` against enumeration of every map layer -> GPU, each simulated
  // (the periods and memory of the schedules that run, not a model): its plan fits,
  // is never worse than the contiguous plan it starts from, and never better than
  // the best map; on some chains it finds a general allocation that beats it.
  std::mt19937 rng(13);
  const Algorithm *moves = findAlgorithm("general-moves");
  ASSERT_NE(moves, nullptr);
  int compared = 0, improved = 0, mapsBeatStart = 0, optimal = 0;
  const int trials = scaledTrials(150);
  for (int trial = 0; trial < trials; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 4); // 3..6
    const int gpus = 2 + static_cast<int>(rng() % 2);   // 2..3
    Problem problem = randomSmallChain(rng, layers, gpus, trial);
    const std::string name = "trial " + std::to_string(trial);
    LowerBounds bounds = computeLowerBounds(problem);
    PlanOptions options;
    options.algorithms = {"general-moves"};
    AlgorithmContext context{options, bounds};
    AlgorithmOutput output = moves->run(problem, context);
    if (!output.allocation)
      continue; // no contiguous plan fits to start from
    ASSERT_TRUE(output.schedule.has_value()) << name;
    const ScheduleKind kind = *output.schedule;
    PlanResult result = evaluateUnderPolicyOrThrow(problem, *output.allocation, kind, bounds);
    ASSERT_TRUE(result.valid) << name << ": " << result.reason;
    EXPECT_LE(result.maxMemoryFraction, 1 + 1e-9) << name;
    // Its start: madpipe's plan, improved by boundary moves.
    AlgorithmOutput contiguous = findAlgorithm("madpipe")->run(problem, context);
    ASSERT_TRUE(contiguous.allocation.has_value()) << name;
    PlanResult start = improveByBoundaryMovesOrThrow(
        problem, evaluateUnderPolicyOrThrow(problem, *contiguous.allocation, kind, bounds), bounds,
        Objective::Period);
    ASSERT_TRUE(start.valid) << name << ": " << start.reason;
    EXPECT_LE(result.periodMs, start.periodMs * (1 + 1e-9)) << name;
    const double best = bestOverEveryMap(problem, layers, gpus, kind, bounds);
    EXPECT_GE(result.periodMs, best * (1 - 1e-9)) << name;
    ++compared;
    improved += result.periodMs < start.periodMs * (1 - 1e-9);
    mapsBeatStart += best < start.periodMs * (1 - 1e-9);
    optimal += result.periodMs <= best * (1 + 1e-9);
  }
  EXPECT_GT(compared, trials / 2);
  EXPECT_GT(improved, 0);
  std::printf("general-moves: %d chains; a map beats the contiguous start on %d, the moves "
              "improve it on %d, reach the best map on %d\n",
              compared, mapsBeatStart, improved, optimal);
}

TEST(GeneralAllocation, BestMovesBlocksOfItsChosenPlanAndNeverBeatsEveryMap) {
  // `best`'s last step against enumeration of every map layer -> GPU: with the
  // block moves, best's plan is never worse than without them (the chosen plan is
  // where they start), never better than the best map, passes the checker, and a
  // `block-moves` result is strictly better than the plan it started from and
  // names it.
  std::mt19937 rng(29);
  int compared = 0, moved = 0;
  const int trials = scaledTrials(80);
  for (int trial = 0; trial < trials; ++trial) {
    const int layers = 3 + static_cast<int>(rng() % 4); // 3..6
    const int gpus = 2 + static_cast<int>(rng() % 2);   // 2..3
    Problem problem = randomSmallChain(rng, layers, gpus, trial);
    const std::string name = "trial " + std::to_string(trial);
    PlanOptions options;
    PlanOptions without = options;
    without.improveByBlockMoves = false;
    const PlanningReport report = planOrThrow(problem, options);
    const PlanningReport before = planOrThrow(problem, without);
    if (!before.best())
      continue;
    ASSERT_NE(report.best(), nullptr) << name;
    const PlanResult &chosen = *report.best();
    EXPECT_LE(chosen.periodMs, before.best()->periodMs * (1 + 1e-9)) << name;
    EXPECT_TRUE(checkSchedule(problem, chosen.allocation, chosen.schedule).ok()) << name;
    const double best = bestOverEveryMap(problem, layers, gpus, chosen.scheduleKind,
                                         computeLowerBounds(problem));
    EXPECT_GE(chosen.periodMs, best * (1 - 1e-9)) << name;
    for (const PlanResult &result : report.results)
      if (result.algorithm == "block-moves") {
        EXPECT_TRUE(result.valid) << name;
        EXPECT_LT(result.periodMs, before.best()->periodMs * (1 - 1e-9)) << name;
        EXPECT_EQ(result.notes.rfind("from " + before.best()->algorithm + "'s ", 0), 0u)
            << name << ": " << result.notes;
      }
    ++compared;
    moved += chosen.algorithm == "block-moves";
  }
  // On these small chains `general` and `ilp-general` usually find the best map
  // already: the block moves are chosen on about 1 chain in 80 (the profiles'
  // gains are in partitioner/bench/general_moves.py).
  EXPECT_GT(compared, trials / 2);
  std::printf("best's block moves: %d chains, chosen on %d\n", compared, moved);
}

TEST(GeneralAllocation, BoundOverEveryMapNeverExceedsTheBestSimulatedMap) {
  // The CBC bound over every general allocation against enumeration of every map
  // layer -> GPU, each simulated under the chain's schedule: it never exceeds the
  // best map's period, even when its bisection may look above it (upper = 1.5x the
  // best), and it is never below the other bounds. On some chains it proves more
  // than they do, and on some it proves the best map optimal.
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(41);
  int compared = 0, raised = 0, tight = 0;
  const int trials = scaledTrials(200);
  for (int trial = 0; trial < trials; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 5); // 2..6
    const int gpus = 1 + static_cast<int>(rng() % 3);   // 1..3
    Problem problem = randomSmallChain(rng, layers, gpus, trial);
    const std::string name = "trial " + std::to_string(trial);
    const LowerBounds bounds = computeLowerBounds(problem);
    const double best = bestOverEveryMap(problem, layers, gpus, problem.training.schedule, bounds);
    if (best == kInfinity)
      continue; // no map fits
    const GeneralAllocationBound general =
        generalAllocationBound(problem, bounds.bestMs, 1.5 * best, 10);
    EXPECT_EQ(general.unknown, 0) << name << ": " << general.notes;
    EXPECT_GE(general.periodMs, bounds.bestMs) << name;
    EXPECT_LE(general.periodMs, best * (1 + 1e-9))
        << name << ": bound " << general.periodMs << " ms above the best map's " << best
        << " ms (" << general.notes << ")";
    ++compared;
    raised += general.periodMs > bounds.bestMs * 1.001;
    tight += general.periodMs >= best * 0.99;
  }
  EXPECT_GT(compared, trials / 2);
  EXPECT_GT(raised, 0);
  std::printf("general-allocation bound: %d chains, above the other bounds on %d, within 1 %% "
              "of the best map on %d\n",
              compared, raised, tight);
}

TEST(GeneralAllocation, PlanWithTheGeneralBoundRaisesEveryGapConsistently) {
  // plan() with generalBoundSeconds: the report's bound is the largest of its parts,
  // no valid plan is below it (gap >= 0), and each plan's gap is measured to it.
  if (!haveMipSolver())
    GTEST_SKIP() << "built without CBC";
  std::mt19937 rng(43);
  int raised = 0;
  for (int trial = 0; trial < scaledTrials(30); ++trial) {
    Problem problem = randomSmallChain(rng, 4 + static_cast<int>(rng() % 4), 2 + static_cast<int>(rng() % 2), trial);
    problem.training.recompute = RecomputePolicy::None;
    PlanOptions options;
    options.generalBoundSeconds = 5;
    const PlanningReport report = planOrThrow(problem, options);
    if (!report.best())
      continue;
    const std::string name = "trial " + std::to_string(trial);
    const LowerBounds &bounds = report.bounds;
    EXPECT_FALSE(bounds.generalNotes.empty()) << name;
    EXPECT_DOUBLE_EQ(bounds.bestMs, std::max({bounds.workMs, bounds.largestLayerMs,
                                              bounds.memoryMs, bounds.generalMs}))
        << name;
    for (const PlanResult &result : report.results)
      if (result.valid) {
        EXPECT_GE(result.lowerBoundMs, bounds.bestMs) << name << " " << result.algorithm;
        EXPECT_GE(result.gap, -1e-9) << name << " " << result.algorithm;
      }
    raised += bounds.generalMs > 0;
  }
  EXPECT_GT(raised, 0);
}

TEST(GeneralAllocation, HeuristicOnALargeChainStaysFastAndValid) {
  std::mt19937 rng(8);
  Problem problem = randomChain(rng, 400, 8);
  problem.platform.memoryBytesPerGpu = kInfinity;
  problem.platform.speed.clear();
  problem.training.microbatches = 16;
  orThrow(problem.finalize());
  PlanOptions options;
  options.algorithms = {"general", "balanced"};
  PlanningReport report = planOrThrow(problem, options);
  ASSERT_TRUE(report.results[0].valid) << report.results[0].reason;
  EXPECT_LT(report.results[0].plannerSeconds, 5.0);
  // Without memory limits, assigning chunks by LPT is never worse than one balanced
  // chunk per GPU by more than the largest layer.
  EXPECT_LE(report.results[0].predictedPeriodMs,
            report.results[1].periodMs + report.bounds.largestLayerMs + 1e-9);
}

} // namespace
} // namespace partitioner::testing
