// Data-parallel replicas: the all-reduce time against a step-by-step ring on
// each GPU's own links, and the (replicas x stages) choice against brute force
// over every contiguous split of every replica count and layout.
#include "TestUtil.h"

#include "partitioner/Output.h"
#include "partitioner/Planner.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

namespace partitioner {
namespace {

using testing::allCompositions;
using testing::randomChain;
using testing::scaledTrials;

double uniform(std::mt19937 &rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

/// The global GPUs of stage position `gpu`'s replicas under `layout`.
std::vector<int> replicaGpus(ReplicaLayout layout, int gpu, int stages, int replicas) {
  std::vector<int> gpus;
  for (int j = 0; j < replicas; ++j)
    gpus.push_back(layout == ReplicaLayout::PipelineMajor ? j * stages + gpu : gpu * replicas + j);
  return gpus;
}

/// Steps of rings run side by side: each step every ring sends `chunk` bytes
/// along each hop, and a step lasts as long as its slowest hop.
double ringSteps(const Platform &platform, const std::vector<std::vector<int>> &rings,
                 double chunk, int steps) {
  double step = 0;
  for (const auto &ring : rings)
    for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i)
      step = std::max(step,
                      platform.linkBetween(ring[i], ring[(i + 1) % ring.size()]).transferMs(chunk));
  return steps * step;
}

/// The all-reduce of `bytes` over `members` (global GPUs), step by step: a flat
/// ring in GPU order, and (several nodes with several GPUs each) reduce-scatter
/// in each node, rings across nodes of the GPUs with the same local index, then
/// all-gather in each node; the faster of the two.
double allReduceBySteps(const Platform &platform, std::vector<int> members, double bytes) {
  std::sort(members.begin(), members.end());
  const int k = static_cast<int>(members.size());
  if (k <= 1 || bytes <= 0)
    return 0;
  const double flat = ringSteps(platform, {members}, bytes / k, 2 * (k - 1));
  std::map<int, std::vector<int>> byNode;
  for (int gpu : members)
    byNode[gpu / platform.gpusPerNode].push_back(gpu);
  const int nodes = static_cast<int>(byNode.size());
  const int q = static_cast<int>(byNode.begin()->second.size());
  for (const auto &entry : byNode)
    if (static_cast<int>(entry.second.size()) != q) {
      ADD_FAILURE() << "the reference takes the same number of members on every node";
      return std::nan("");
    }
  if (nodes == 1 || q == 1)
    return flat;
  std::vector<std::vector<int>> inNode, across(static_cast<size_t>(q));
  for (const auto &entry : byNode) {
    inNode.push_back(entry.second);
    for (int i = 0; i < q; ++i)
      across[static_cast<size_t>(i)].push_back(entry.second[static_cast<size_t>(i)]);
  }
  const double scatter = ringSteps(platform, inNode, bytes / q, q - 1);
  const double cross = ringSteps(platform, across, bytes / q / nodes, 2 * (nodes - 1));
  return std::min(flat, 2 * scatter + cross);
}

/// The gradients in buckets of kAllReduceBucketBytes, one all-reduce each, one
/// after the other.
double bucketsBySteps(const Platform &platform, const std::vector<int> &members, double bytes) {
  double ms = 0;
  for (double left = bytes; left > 0; left -= kAllReduceBucketBytes)
    ms += allReduceBySteps(platform, members, std::min(left, kAllReduceBucketBytes));
  return ms;
}

Platform randomPlatform(std::mt19937 &rng) {
  Platform platform;
  const int perNode[] = {1, 2, 4, 8};
  platform.gpusPerNode = perNode[rng() % 4];
  platform.intraNode = LinkSpec{uniform(rng, 1e9, 1e11), uniform(rng, 0, 0.05)};
  platform.interNode = LinkSpec{uniform(rng, 1e8, 2e10), uniform(rng, 0, 0.1)};
  return platform;
}

TEST(AllReduce, EqualsAStepByStepRingOnTheGpusOwnLinks) {
  std::mt19937 rng(41);
  int hierarchical = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    Platform platform = randomPlatform(rng);
    const int stages = 1 << (rng() % 5), replicas = 1 << (rng() % 6);
    const ReplicaLayout layout =
        rng() % 2 ? ReplicaLayout::PipelineMajor : ReplicaLayout::StageMajor;
    const int gpu = static_cast<int>(rng() % static_cast<unsigned>(stages));
    const std::vector<int> members = replicaGpus(layout, gpu, stages, replicas);
    std::map<int, int> perNode;
    for (int g : members)
      ++perNode[g / platform.gpusPerNode];
    AllReduceGroup group{static_cast<int>(perNode.size()), perNode.begin()->second};
    ASSERT_EQ(group.size(), replicas);
    hierarchical += group.nodes > 1 && group.perNode > 1;
    const double bytes = uniform(rng, 0, 1e9);
    const double expected = bucketsBySteps(platform, members, bytes);
    EXPECT_NEAR(allReduceMs(platform, group, bytes), expected, 1e-9 * std::max(1.0, expected))
        << replicas << " replicas of " << stages << " stages, " << toString(layout) << ", "
        << platform.gpusPerNode << " GPUs per node";
  }
  EXPECT_GT(hierarchical, 200); // the two-level case is exercised
}

/// The iteration of r replicas of `allocation` on `pipeline` (one replica's
/// problem), computed from its simulated timeline: each GPU's all-reduce starts
/// at the end of its last action.
double replicaIteration(const Problem &pipeline, const PlanResult &plan, int stages, int replicas,
                        ReplicaLayout layout, const Platform &whole) {
  std::vector<double> lastEnd(static_cast<size_t>(stages), 0), bytes(static_cast<size_t>(stages), 0);
  for (const TimedAction &action : plan.simulation.timeline)
    lastEnd[static_cast<size_t>(action.gpu)] =
        std::max(lastEnd[static_cast<size_t>(action.gpu)], action.endMs);
  for (size_t l = 0; l < pipeline.layers.size(); ++l)
    bytes[static_cast<size_t>(plan.allocation.gpuOfStage[static_cast<size_t>(
        plan.allocation.stageOfLayer[l])])] += pipeline.layers[l].parameterBytes;
  double iteration = plan.iterationMs;
  for (int gpu = 0; gpu < stages; ++gpu) {
    const double ms = bucketsBySteps(whole, replicaGpus(layout, gpu, stages, replicas),
                                     bytes[static_cast<size_t>(gpu)]);
    if (ms > 0)
      iteration = std::max(iteration, lastEnd[static_cast<size_t>(gpu)] + ms);
  }
  return iteration;
}

/// One replica's problem, as the test derives it: S GPUs, m / r micro-batches,
/// links between the global GPUs of replica 0's positions.
Problem replicaProblem(const Problem &problem, int stages, int replicas, ReplicaLayout layout) {
  Problem pipeline = problem;
  pipeline.platform.gpus = stages;
  pipeline.training.microbatches /= replicas;
  if (layout == ReplicaLayout::StageMajor)
    pipeline.platform.gpusPerNode = std::max(1, problem.platform.gpusPerNode / replicas);
  orThrow(pipeline.finalize());
  // The positions' links are those of the global GPUs.
  for (int a = 0; a < stages; ++a)
    for (int b = 0; b < stages; ++b) {
      const int ga = replicaGpus(layout, a, stages, replicas)[0];
      const int gb = replicaGpus(layout, b, stages, replicas)[0];
      EXPECT_EQ(&pipeline.platform.linkBetween(a, b) == &pipeline.platform.intraNode,
                &problem.platform.linkBetween(ga, gb) == &problem.platform.intraNode);
    }
  return pipeline;
}

TEST(Replicas, ChoiceMatchesBruteForceOverEverySplitAndLayout) {
  std::mt19937 rng(7);
  const int trials = scaledTrials(60);
  int planned = 0, equal = 0, moreThanOneReplica = 0, pipelineOnly = 0, noneFits = 0;
  double worst = 1;
  for (int trial = 0; trial < trials; ++trial) {
    const int gpus = rng() % 2 ? 4 : 2, layers = 3 + static_cast<int>(rng() % 4);
    Problem problem = randomChain(rng, layers, gpus);
    problem.platform.speed.clear();
    problem.platform.gpusPerNode = rng() % 2 ? 1 : 2;
    // Heavier parameters make the all-reduces cost; a memory limit (kept on half
    // of the light ones) makes the splits with more stages the ones that fit.
    const double scale[] = {1, 100, 1000};
    const double parameterScale = scale[rng() % 3];
    for (Layer &layer : problem.layers)
      layer.parameterBytes *= parameterScale;
    if (parameterScale > 1 || rng() % 2)
      problem.platform.memoryBytesPerGpu = kInfinity;
    problem.training.microbatches = gpus * (1 + static_cast<int>(rng() % 3));
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"balanced", "pipedream", "madpipe"};
    options.improveByBlockMoves = false;
    // Brute force: every contiguous split into at most S stages, one per GPU,
    // of every replica count and layout.
    double bruteForce = kInfinity;
    for (int stages = 1; stages <= gpus; stages *= 2) {
      const int replicas = gpus / stages;
      for (ReplicaLayout layout : {ReplicaLayout::PipelineMajor, ReplicaLayout::StageMajor}) {
        Problem pipeline = replicaProblem(problem, stages, replicas, layout);
        for (const auto &sizes : allCompositions(layers, stages)) {
          Allocation allocation;
          for (size_t s = 0; s < sizes.size(); ++s) {
            allocation.gpuOfStage.push_back(static_cast<int>(s));
            allocation.stageOfLayer.insert(allocation.stageOfLayer.end(),
                                           static_cast<size_t>(sizes[s]), static_cast<int>(s));
          }
          // Under every cap on the micro-batches each stage keeps (1 .. the
          // stages from it to the end), as madpipe's plans carry them.
          const int k = static_cast<int>(sizes.size());
          allocation.inFlightLimit.assign(static_cast<size_t>(k), 1);
          while (true) {
            PlanResult result = orThrow(evaluateAllocation(
                pipeline, allocation, ScheduleKind::OneFOneB, LowerBounds{}));
            if (result.valid)
              bruteForce = std::min(bruteForce, replicaIteration(pipeline, result, stages,
                                                                 replicas, layout, problem.platform));
            int s = 0;
            while (s < k && ++allocation.inFlightLimit[static_cast<size_t>(s)] > k - s)
              allocation.inFlightLimit[static_cast<size_t>(s++)] = 1;
            if (s == k)
              break;
          }
        }
      }
    }
    ReplicaReport report = orThrow(planReplicas(problem, {}, options));
    if (!report.best()) {
      EXPECT_EQ(bruteForce, kInfinity) << "the brute force fits a split the planner does not";
      ++noneFits;
      continue;
    }
    const ReplicaPlan &chosen = *report.best();
    pipelineOnly += chosen.replicas == 1;
    moreThanOneReplica += chosen.replicas > 1;
    // Every candidate's figure is its allocation's, re-derived here, and the
    // chosen one is the shortest.
    for (const ReplicaPlan &candidate : report.candidates) {
      if (!candidate.valid)
        continue;
      EXPECT_LE(chosen.iterationMs, candidate.iterationMs + 1e-9);
      Problem pipeline =
          replicaProblem(problem, candidate.stages, candidate.replicas, candidate.layout);
      PlanResult replayed = orThrow(evaluateAllocation(
          pipeline, candidate.pipeline.best()->allocation, ScheduleKind::OneFOneB,
          candidate.pipeline.bounds));
      EXPECT_NEAR(candidate.iterationMs,
                  replicaIteration(pipeline, replayed, candidate.stages, candidate.replicas,
                                   candidate.layout, problem.platform),
                  1e-9 * candidate.iterationMs);
    }
    ASSERT_LT(bruteForce, kInfinity);
    ++planned;
    const double ratio = chosen.iterationMs / bruteForce;
    worst = std::max(worst, ratio);
    equal += ratio <= 1 + 1e-9;
  }
  std::cout << "replicas: brute-force optimum on " << equal << " of " << planned
            << " chains, worst ratio " << worst << "; chosen: one pipeline on " << pipelineOnly
            << ", replicas on " << moreThanOneReplica << "; nothing fits on " << noneFits << "\n";
  // The planner's pipelines come from heuristics and DPs (madpipe's caps can
  // beat a plain 1F1B split); the split choice must track the brute force.
  EXPECT_GE(equal, planned * 8 / 10) << "worst ratio " << worst;
  EXPECT_LE(worst, 1.10);
  EXPECT_GT(moreThanOneReplica, planned / 10);
  EXPECT_GT(pipelineOnly, planned / 10);
}

/// Whether some position's replicas sit more on one node than on another.
bool unevenOnNodes(ReplicaLayout layout, int stages, int replicas, int gpusPerNode) {
  for (int gpu = 0; gpu < stages; ++gpu) {
    std::map<int, int> perNode;
    for (int member : replicaGpus(layout, gpu, stages, replicas))
      ++perNode[member / gpusPerNode];
    for (const auto &entry : perNode)
      if (entry.second != perNode.begin()->second)
        return true;
  }
  return false;
}

// GPU counts that are not a multiple of the node size (12 GPUs on nodes of 8):
// a split whose groups the all-reduce model cannot price is refused and says
// why; every split planned is priced as the step-by-step rings on the whole
// platform. Only the asked layouts are tried.
TEST(Replicas, SplitsWithUnevenAllReduceGroupsAreRefusedAndTheOthersPricedAsRings) {
  std::mt19937 rng(31);
  int refusedUneven = 0, planned = 0, onPartNodes = 0, acrossNodes = 0;
  for (int trial = 0; trial < scaledTrials(40); ++trial) {
    const int gpuCounts[] = {6, 10, 12, 16, 24};
    const int gpus = gpuCounts[rng() % 5];
    Problem problem = randomChain(rng, 4 + static_cast<int>(rng() % 6), gpus);
    problem.platform.speed.clear();
    problem.platform.memoryBytesPerGpu = kInfinity;
    const int perNode[] = {4, 8};
    problem.platform.gpusPerNode = perNode[rng() % 2];
    problem.platform.intraNode = LinkSpec{uniform(rng, 1e9, 1e11), uniform(rng, 0, 0.05)};
    problem.platform.interNode = LinkSpec{uniform(rng, 1e8, 2e10), uniform(rng, 0, 0.1)};
    problem.training.microbatches = gpus;
    for (Layer &layer : problem.layers)
      layer.parameterBytes *= 100;
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"balanced"};
    options.improveByBlockMoves = false;
    const bool pipelineMajorOnly = trial % 3 == 0;
    std::vector<ReplicaLayout> layouts = {ReplicaLayout::PipelineMajor};
    if (!pipelineMajorOnly)
      layouts.push_back(ReplicaLayout::StageMajor);
    ReplicaReport report = orThrow(planReplicas(problem, {}, options, layouts));
    const int g = problem.platform.gpusPerNode;
    for (const ReplicaPlan &c : report.candidates) {
      if (pipelineMajorOnly)
        EXPECT_EQ(c.layout, ReplicaLayout::PipelineMajor);
      const bool uneven = unevenOnNodes(c.layout, c.stages, c.replicas, g);
      if (c.reason.find("sit unevenly") != std::string::npos) {
        EXPECT_TRUE(uneven) << c.reason;
        ++refusedUneven;
        continue;
      }
      if (!c.valid)
        continue;
      EXPECT_FALSE(uneven) << c.replicas << " x " << c.stages << " " << toString(c.layout)
                           << " on " << gpus << " GPUs, " << g << " per node";
      ++planned;
      // (Where G is no multiple of g, an even group keeps to one node.)
      onPartNodes += gpus % g != 0 && c.replicas > 1;
      acrossNodes += c.group.nodes > 1;
      Problem pipeline = replicaProblem(problem, c.stages, c.replicas, c.layout);
      PlanResult replayed = orThrow(evaluateAllocation(
          pipeline, c.pipeline.best()->allocation, ScheduleKind::OneFOneB, c.pipeline.bounds));
      EXPECT_NEAR(c.iterationMs,
                  replicaIteration(pipeline, replayed, c.stages, c.replicas, c.layout,
                                   problem.platform),
                  1e-9 * c.iterationMs)
          << c.replicas << " x " << c.stages << " " << toString(c.layout) << " on " << gpus
          << " GPUs, " << g << " per node";
    }
  }
  EXPECT_GT(refusedUneven, 0);
  EXPECT_GT(planned, 0);
  EXPECT_GT(onPartNodes, 0);
  EXPECT_GT(acrossNodes, 0);
  // The case the all-reduce model priced as 4 GPUs before: 12 GPUs on nodes of 8,
  // 4 stages x 3 replicas pipeline-major (GPU 0's replicas on GPUs 0, 4 and 8).
  Problem problem = randomChain(rng, 8, 12);
  problem.platform.speed.clear();
  problem.platform.gpusPerNode = 8;
  problem.training.microbatches = 12;
  orThrow(problem.finalize());
  ReplicaReport report = orThrow(planReplicas(problem, {4}, {}, {ReplicaLayout::PipelineMajor}));
  ASSERT_EQ(report.candidates.size(), 1u);
  EXPECT_FALSE(report.candidates[0].valid);
  EXPECT_EQ(report.candidates[0].reason,
            "the 3 replicas of GPU 0 sit unevenly on nodes of 8 GPUs (2 on node "
            "0, 1 on node 1)");
  EXPECT_FALSE(planReplicas(problem, {4}, {}, {}).ok());
}

// A schedule the user asked for (requireSchedule) holds inside every split, as
// it does in plan(): without it, interleaved plans win some splits.
TEST(Replicas, RequiredScheduleHoldsInEverySplit) {
  std::mt19937 rng(17);
  int interleavedWithout = 0, checked = 0;
  for (int trial = 0; trial < scaledTrials(12); ++trial) {
    Problem problem = randomChain(rng, 12, 8);
    problem.platform.speed.clear();
    problem.platform.memoryBytesPerGpu = kInfinity;
    problem.training.microbatches = 8;
    problem.training.schedule = ScheduleKind::OneFOneB;
    orThrow(problem.finalize());
    PlanOptions options;
    options.algorithms = {"balanced", "interleaved"};
    options.improveByBlockMoves = false;
    for (bool required : {false, true}) {
      options.requireSchedule = required;
      ReplicaReport report = orThrow(planReplicas(problem, {}, options));
      for (const ReplicaPlan &c : report.candidates) {
        if (!c.valid)
          continue;
        const ScheduleKind kind = c.pipeline.best()->scheduleKind;
        if (required) {
          EXPECT_EQ(kind, ScheduleKind::OneFOneB) << c.replicas << " x " << c.stages;
          ++checked;
        } else {
          interleavedWithout += kind == ScheduleKind::Interleaved;
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
  EXPECT_GT(interleavedWithout, 0);
}

// A tied parameter is all-reduced by its owner only, the earliest stage that
// reads it: the other readers send it their gradient (as the generated
// programs do), so their all-reduce does not carry it.
TEST(Replicas, ASharedParameterIsAllReducedByItsOwnerOnly) {
  std::mt19937 rng(29);
  Problem problem = randomChain(rng, 6, 4);
  problem.platform.speed.clear();
  problem.platform.memoryBytesPerGpu = kInfinity;
  problem.training.microbatches = 4;
  for (Layer &layer : problem.layers)
    layer.parameterBytes = 1e6;
  problem.sharedParameters.push_back(SharedParameter{{0, 5}, 5e7});
  orThrow(problem.finalize());
  PlanOptions options;
  options.algorithms = {"balanced"};
  options.improveByBlockMoves = false;
  ReplicaReport report = orThrow(planReplicas(problem, {2}, options));
  ASSERT_NE(report.best(), nullptr);
  const ReplicaPlan &split = *report.best();
  ASSERT_EQ(split.replicas, 2);
  const Allocation &allocation = split.pipeline.best()->allocation;
  const int first = allocation.gpuOfStage[static_cast<size_t>(allocation.stageOfLayer[0])];
  const int last = allocation.gpuOfStage[static_cast<size_t>(allocation.stageOfLayer[5])];
  ASSERT_NE(first, last);
  std::vector<double> expected(2, 0);
  for (size_t l = 0; l < problem.layers.size(); ++l)
    expected[static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(
        allocation.stageOfLayer[l])])] += 1e6;
  expected[static_cast<size_t>(first)] += 5e7;
  EXPECT_EQ(split.gradientBytes, expected);
  EXPECT_GT(split.allReduceMs[static_cast<size_t>(first)],
            split.allReduceMs[static_cast<size_t>(last)]);
}

TEST(Replicas, SplitsNotPlannedByTheirBoundCannotWin) {
  std::mt19937 rng(13);
  int skipped = 0;
  for (int trial = 0; trial < scaledTrials(20); ++trial) {
    Problem problem = randomChain(rng, 8, 8);
    problem.platform.speed.clear();
    problem.platform.gpusPerNode = 1 << (rng() % 4);
    problem.training.microbatches = 8;
    if (rng() % 2)
      for (Layer &layer : problem.layers)
        layer.parameterBytes *= 300; // all-reduces that cost
    if (rng() % 2)
      problem.platform.memoryBytesPerGpu = kInfinity;
    orThrow(problem.finalize());
    std::map<std::pair<int, ReplicaLayout>, int> progress; // onSplit calls per split
    ReplicaReport all = orThrow(planReplicas(
        problem, {}, {}, {ReplicaLayout::PipelineMajor, ReplicaLayout::StageMajor},
        [&](const ReplicaPlan &split) { ++progress[std::make_pair(split.stages, split.layout)]; }));
    for (const ReplicaPlan &c : all.candidates) {
      const int calls = progress[std::make_pair(c.stages, c.layout)];
      // Every split that applies, planned or skipped by its bound.
      EXPECT_EQ(calls, replicaPipelineProblem(problem, c.stages, c.layout).ok() ? 1 : 0)
          << c.replicas << " x " << c.stages << ": " << c.reason;
    }
    double each = kInfinity;
    for (int stages : {1, 2, 4, 8}) {
      ReplicaReport one = orThrow(planReplicas(problem, {stages}));
      if (one.best())
        each = std::min(each, one.best()->iterationMs);
    }
    ASSERT_EQ(all.best() != nullptr, each < kInfinity);
    if (all.best())
      EXPECT_NEAR(all.best()->iterationMs, each, 1e-9 * each);
    for (const ReplicaPlan &c : all.candidates)
      skipped += c.reason.rfind("not planned", 0) == 0;
  }
  EXPECT_GT(skipped, 0);
}

TEST(Replicas, OneReplicaIsThePlainPlanByIteration) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 10; ++trial) {
    Problem problem = randomChain(rng, 8, 4);
    problem.platform.speed.clear();
    orThrow(problem.finalize());
    ReplicaReport report = orThrow(planReplicas(problem, {4}));
    PlanOptions options;
    options.objective = Objective::IterationTime;
    PlanningReport plain = orThrow(plan(problem, options));
    ASSERT_EQ(report.candidates.size(), 1u);
    ASSERT_EQ(report.best() != nullptr, plain.best() != nullptr);
    if (!plain.best())
      continue;
    EXPECT_DOUBLE_EQ(report.best()->iterationMs, plain.best()->iterationMs);
    EXPECT_EQ(report.best()->allReduceMs, std::vector<double>(4, 0.0));
  }
}

/// A random chain on 8 GPUs of one speed, 4 per node, m micro-batches.
Problem nodesOfFour(std::mt19937 &rng, int layers, int microbatches) {
  Problem problem = randomChain(rng, layers, 8);
  problem.platform.speed.clear();
  problem.platform.gpusPerNode = 4;
  problem.training.microbatches = microbatches;
  orThrow(problem.finalize());
  return problem;
}

TEST(Replicas, SplitsThatDoNotApplySayWhy) {
  std::mt19937 rng(5);
  Problem problem = nodesOfFour(rng, 6, 6);
  ReplicaReport report = orThrow(planReplicas(problem, {}));
  for (const ReplicaPlan &c : report.candidates)
    if (6 % c.replicas != 0) {
      EXPECT_FALSE(c.valid);
      EXPECT_NE(c.reason.find("do not split evenly over " + std::to_string(c.replicas)),
                std::string::npos)
          << c.reason;
    }
  EXPECT_FALSE(planReplicas(problem, {3}).ok());
  // Asked for stage-major only: each split once, one replica or one stage as
  // pipeline-major (the same GPUs either way).
  ReplicaReport stageMajor =
      orThrow(planReplicas(problem, {}, {}, {ReplicaLayout::StageMajor}));
  ASSERT_EQ(stageMajor.candidates.size(), 4u); // S = 1, 2, 4, 8
  for (const ReplicaPlan &c : stageMajor.candidates)
    EXPECT_EQ(c.layout, c.replicas == 1 || c.stages == 1 ? ReplicaLayout::PipelineMajor
                                                         : ReplicaLayout::StageMajor)
        << c.replicas << " x " << c.stages;
  problem.platform.speed = {1, 1, 1, 1, 2, 2, 2, 2};
  auto mixed = planReplicas(problem, {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.error().find("one speed"), std::string::npos);
}

TEST(Replicas, PlanJsonCarriesTheSplitAndTheAllReduces) {
  std::mt19937 rng(9);
  Problem problem = nodesOfFour(rng, 8, 16);
  ReplicaReport report = orThrow(planReplicas(problem, {}));
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream out;
  writeReplicaPlanJson(report, out);
  auto document = nlohmann::json::parse(out.str());
  const auto &split = document.at("data_parallel");
  EXPECT_EQ(split.at("replicas").get<int>() * split.at("stages").get<int>(), 8);
  EXPECT_EQ(document.at("gpus").get<int>(), split.at("stages").get<int>());
  EXPECT_EQ(document.at("microbatches").get<int>() * split.at("replicas").get<int>(), 16);
  EXPECT_DOUBLE_EQ(split.at("iteration_ms").get<double>(), report.best()->iterationMs);
  EXPECT_EQ(split.at("tried").size(), report.candidates.size());
  // It replays on the whole problem; a changed iteration is a mismatch.
  ReplayCheck check = orThrow(replayPlan(problem, out.str()));
  EXPECT_TRUE(check.ok()) << (check.mismatches.empty() ? "" : check.mismatches[0]);
  document["data_parallel"]["iteration_ms"] = report.best()->iterationMs * 1.01;
  check = orThrow(replayPlan(problem, document.dump()));
  ASSERT_EQ(check.mismatches.size(), 1u);
  EXPECT_NE(check.mismatches[0].find("data_parallel iteration_ms"), std::string::npos);
  Problem fewer = problem;
  fewer.platform.gpus = 4;
  orThrow(fewer.finalize());
  EXPECT_FALSE(replayPlan(fewer, out.str()).ok());
  std::ostringstream table;
  writeReplicaTable(report, table);
  EXPECT_NE(table.str().find("chosen: "), std::string::npos);
}

} // namespace
} // namespace partitioner
