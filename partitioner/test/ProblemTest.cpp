// Problem model, readers (graph.txt, JSON), linearisation and cut sets, input errors.
#include "TestUtil.h"

#include "partitioner/CutLattice.h"
#include "partitioner/Error.h"
#include "partitioner/Problem.h"
#include "partitioner/Linearize.h"
#include "partitioner/StageModel.h"
#include "partitioner/Problem.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <random>
#include <sstream>

namespace partitioner {
namespace {

std::string dataPath(const std::string &name) { return std::string(PIPE_PARTITIONER_TEST_DATA) + "/" + name; }

std::string errorOf(const std::function<void()> &action) {
  try {
    action();
  } catch (const Error &error) {
    return error.what();
  }
  return "";
}

TEST(Problem, ParsesSizesAndBandwidths) {
  EXPECT_DOUBLE_EQ(orThrow(parseBytes("16GB")), 16e9);
  EXPECT_DOUBLE_EQ(orThrow(parseBytes("16gb")), 16e9);
  EXPECT_DOUBLE_EQ(orThrow(parseBytes("1GiB")), 1073741824.0);
  EXPECT_DOUBLE_EQ(orThrow(parseBytes("512MB")), 512e6);
  EXPECT_DOUBLE_EQ(orThrow(parseBytes("1e9")), 1e9);
  EXPECT_EQ(orThrow(parseBytes("inf")), kInfinity);
  EXPECT_DOUBLE_EQ(orThrow(parseBandwidth("25GB/s")), 25e9);
  EXPECT_DOUBLE_EQ(orThrow(parseBandwidth("100Gb/s")), 12.5e9);
  EXPECT_NE(errorOf([] { orThrow(parseBytes("16 parsecs")); }).find("unknown unit"), std::string::npos);
  EXPECT_NE(errorOf([] { orThrow(parseBytes("-3GB")); }).find("positive"), std::string::npos);
  EXPECT_NE(errorOf([] { orThrow(parseScheduleKind("2f2b")); }).find("unknown schedule '2f2b'"), std::string::npos);
}

TEST(Problem, ReadsGraphTextWithInputsListsAndSkipConnections) {
  Problem problem = orThrow(readProblemFile(dataPath("tiny_graph.txt")));
  ASSERT_EQ(problem.layers.size(), 6u);
  EXPECT_EQ(problem.layers[0].name, "node1");
  EXPECT_EQ(problem.layers[0].forwardMs, 0); // inputs are free, like the reference
  EXPECT_EQ(problem.layers[0].savedBytes, 0);
  EXPECT_EQ(problem.layers[1].outputBytes, 400); // [300; 100] summed
  EXPECT_FALSE(problem.isChain());
  const std::vector<int> order = topologicalOrder(problem);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  // node2's output goes to node3 and (skip) node5: it crosses every cut up to node5
  // once, whatever its number of consumers behind the cut.
  const std::vector<double> cut = cutBytesAlong(problem, order);
  EXPECT_EQ(cut, (std::vector<double>{100, 400, 700, 600, 200, 0}));
}

TEST(Problem, IdealLatticeOfTheTinyGraph) {
  Problem problem = orThrow(readProblemFile(dataPath("tiny_graph.txt")));
  auto lattice = idealLattice(problem, 1000);
  ASSERT_TRUE(lattice.has_value());
  // Chain 1-2-3-4-5-6 plus the skip 2->5: the downsets are exactly the 7 prefixes.
  EXPECT_EQ(lattice->numCuts(), 7u);
  EXPECT_FALSE(idealLattice(problem, 3).has_value());
}

TEST(Problem, ChainLatticeWorkspaceIsTheLargestOfTheRange) {
  // The sparse table's two reads against the largest layer of every range.
  std::mt19937 rng(3);
  for (int layers : {1, 2, 3, 7, 8, 9, 33, 100}) {
    Problem problem;
    for (int l = 0; l < layers; ++l) {
      Layer layer;
      layer.name = "l" + std::to_string(l);
      layer.forwardMs = layer.backwardMs = 1;
      layer.workspaceBytes = static_cast<double>(rng() % 1000);
      problem.layers.push_back(layer);
    }
    orThrow(problem.finalize());
    std::vector<int> order(static_cast<size_t>(layers));
    for (int l = 0; l < layers; ++l)
      order[static_cast<size_t>(l)] = l;
    const CutLattice lattice = chainLattice(problem, order);
    for (int from = 0; from <= layers; ++from)
      for (int to = from; to <= layers; ++to) {
        double largest = 0;
        for (int l = from; l < to; ++l)
          largest = std::max(largest, problem.layers[static_cast<size_t>(l)].workspaceBytes);
        ASSERT_EQ(lattice.workspaceBetween(from, to), largest) << layers << ": " << from << ".." << to;
      }
  }
}

TEST(Problem, WhenMemoryNeverBindsEveryStageFits) {
  // StageModel::memoryNeverBinds against every stage of chain and ideal lattices of
  // random networks with workspace, shared saved values and shared parameters (all
  // of them, or those within a limit of work), at limits around the stages' largest
  // need (so that the answer is both ways).
  std::mt19937 rng(17);
  int never = 0, binds = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 9);
    Problem problem = trial % 2 ? testing::randomDag(rng, layers, 4) : testing::randomChain(rng, layers, 4);
    testing::addRandomWorkspace(rng, problem);
    if (trial % 3 == 0)
      testing::addRandomSharedSaved(rng, problem);
    if (trial % 4 == 0)
      testing::addRandomSharedParameters(rng, problem);
    const ScheduleKind kinds[] = {ScheduleKind::OneFOneB, ScheduleKind::OneFOneBStash};
    problem.training.schedule = kinds[trial % 2];
    problem.training.recompute = trial % 5 == 0 ? RecomputePolicy::Auto : RecomputePolicy::None;
    problem.platform.memoryBytesPerGpu = kInfinity;
    orThrow(problem.finalize());
    std::vector<CutLattice> lattices = {chainLattice(problem, topologicalOrder(problem))};
    if (auto ideals = idealLattice(problem, 5000))
      lattices.push_back(*ideals);
    for (const CutLattice &lattice : lattices) {
      // A stage is a pair of nested cuts (from a subset of to, not equal).
      auto stage = [&](int from, int to) {
        if (lattice.size[static_cast<size_t>(to)] <= lattice.size[static_cast<size_t>(from)])
          return false;
        for (int l = 0; l < layers; ++l)
          if (lattice.contains(from, l) && !lattice.contains(to, l))
            return false;
        return true;
      };
      const StageModel unbounded(problem, lattice);
      const int inFlight = 1 + static_cast<int>(rng() % 4);
      double largest = 0;
      for (int from = 0; from < lattice.fullCut(); ++from)
        for (int to = from + 1; to <= lattice.fullCut(); ++to)
          if (stage(from, to))
            largest = std::max(largest, unbounded.memoryBytes(from, to, inFlight));
      // Every stage, then (chains) those doing at most a random share of the work.
      const double total = lattice.work[static_cast<size_t>(lattice.fullCut())];
      const double maxWork = trial % 3 == 0 ? kInfinity : total * (0.1 + 0.1 * (rng() % 8));
      for (double scale : {0.3, 0.6, 0.9, 1.0, 1.5, 3.0, 10.0}) {
        Problem limited = problem;
        limited.platform.memoryBytesPerGpu = largest * scale;
        const StageModel model(limited, lattice);
        if (!model.memoryNeverBinds(inFlight, maxWork)) {
          ++binds;
          continue;
        }
        ++never;
        for (int from = 0; from < lattice.fullCut(); ++from)
          for (int to = from + 1; to <= lattice.fullCut(); ++to)
            if (stage(from, to) && lattice.work[static_cast<size_t>(to)] -
                                           lattice.work[static_cast<size_t>(from)] <=
                                       maxWork)
              ASSERT_TRUE(model.fits(from, to, inFlight))
                  << "trial " << trial << ": stage " << from << ".." << to << " at " << scale;
      }
    }
  }
  EXPECT_GT(never, 100);
  EXPECT_GT(binds, 100);
}

TEST(Problem, TheUniformPeriodIsThePeriodAtEveryGpu) {
  // StageModel::uniformPeriodMs (the memory-blind DPs' shortcut) against periodMs of
  // every stage of chain and ideal lattices at every GPU its transfers allow, where
  // every GPU has one speed and the links between the GPUs one class (one link
  // class, or every GPU in one node with a slower link beyond it): the same number,
  // bit for bit.
  std::mt19937 rng(23);
  int compared = 0;
  for (int trial = 0; trial < 100; ++trial) {
    const int layers = 2 + static_cast<int>(rng() % 9);
    Problem problem = trial % 2 ? testing::randomDag(rng, layers, 4) : testing::randomChain(rng, layers, 4);
    if (trial % 4 < 2)
      problem.platform.interNode = problem.platform.intraNode;
    else
      problem.platform.gpusPerNode = problem.platform.gpus; // a slower link after the last
    problem.platform.speed.clear(); // every GPU at speed 1, or all at 1.7
    if (trial % 3 == 0)
      problem.platform.speed.assign(static_cast<size_t>(problem.platform.gpus), 1.7);
    orThrow(problem.finalize());
    std::vector<CutLattice> lattices = {chainLattice(problem, topologicalOrder(problem))};
    if (auto ideals = idealLattice(problem, 5000))
      lattices.push_back(*ideals);
    for (const CutLattice &lattice : lattices) {
      const StageModel model(problem, lattice);
      ASSERT_TRUE(model.oneSpeed() && model.pipelineLinksAlike()) << "trial " << trial;
      ASSERT_EQ(model.oneLinkClass(), trial % 4 < 2) << "trial " << trial;
      const int gpus = problem.platform.gpus;
      for (int from = 0; from < lattice.fullCut(); ++from)
        for (int to = from + 1; to <= lattice.fullCut(); ++to)
          for (int gpu = 0; gpu < gpus; ++gpu) {
            if ((from != lattice.emptyCut() && gpu == 0) ||
                (to != lattice.fullCut() && gpu == gpus - 1))
              continue; // a transfer from or to a GPU the platform does not have
            ++compared;
            ASSERT_EQ(model.uniformPeriodMs(from, to), model.periodMs(from, to, gpu))
                << "trial " << trial << ": stage " << from << ".." << to << " on GPU " << gpu;
          }
    }
  }
  EXPECT_GT(compared, 500);
}

TEST(Problem, RejectsMalformedGraphsWithTheLineAndNode) {
  std::string message = errorOf([] { orThrow(readProblemFile(dataPath("malformed_graph.txt"))); });
  EXPECT_NE(message.find("malformed_graph.txt:2"), std::string::npos) << message;
  EXPECT_NE(message.find("'fast' is not a number"), std::string::npos) << message;
  message = errorOf([] {
    Problem p = orThrow(readProblemFile(dataPath("cycle_graph.txt")));
    topologicalOrder(p);
  });
  EXPECT_NE(message.find("cycle"), std::string::npos) << message;
  EXPECT_NE(message.find("node2"), std::string::npos) << message;
  EXPECT_NE(message.find("node3"), std::string::npos) << message;
  std::istringstream unknown("node1 -- A -- forward_compute_time=1, backward_compute_time=1, "
                             "activation_size=1, parameter_size=1\n node1 -- node9\n");
  message = errorOf([&] { orThrow(readGraphText(unknown, "g")); });
  EXPECT_NE(message.find("g:2: edge to unknown node node9"), std::string::npos) << message;
  std::istringstream duplicate("node1 -- A -- forward_compute_time=1, backward_compute_time=1, "
                               "activation_size=1, parameter_size=1\nnode1 -- A -- forward_compute_time=1, "
                               "backward_compute_time=1, activation_size=1, parameter_size=1\n");
  message = errorOf([&] { orThrow(readGraphText(duplicate, "g")); });
  EXPECT_NE(message.find("defined twice"), std::string::npos) << message;
  std::istringstream missing("node1 -- A -- forward_compute_time=1, activation_size=1, parameter_size=1\n");
  message = errorOf([&] { orThrow(readGraphText(missing, "g")); });
  EXPECT_NE(message.find("node1 has no backward_compute_time"), std::string::npos) << message;
  std::istringstream empty("\n\n");
  EXPECT_NE(errorOf([&] { orThrow(readGraphText(empty, "g")); }).find("no node lines"), std::string::npos);
}

TEST(Problem, JsonRoundTripAndErrors) {
  std::ifstream in(dataPath("tiny_problem.json"));
  Problem problem = orThrow(readProblemJson(in, "tiny_problem.json"));
  EXPECT_EQ(problem.layers.size(), 4u);
  EXPECT_DOUBLE_EQ(problem.layers[0].parameterBytes, 2e9);
  EXPECT_DOUBLE_EQ(problem.platform.memoryBytesPerGpu, 24e9);
  EXPECT_DOUBLE_EQ(problem.platform.intraNode.bandwidthBytesPerSecond, 25e9);
  EXPECT_EQ(problem.training.microbatches, 8);
  std::ostringstream out;
  writeProblemJson(problem, out);
  std::istringstream back(out.str());
  Problem again = orThrow(readProblemJson(back, "again"));
  ASSERT_EQ(again.layers.size(), problem.layers.size());
  EXPECT_EQ(again.tensors.size(), problem.tensors.size());
  EXPECT_EQ(again.tensors[0].consumers, (std::vector<int>{1, 3}));
  EXPECT_DOUBLE_EQ(again.layers[1].savedBytes, 2e8);
  EXPECT_DOUBLE_EQ(again.platform.memoryBytesPerGpu, 24e9);
  EXPECT_FALSE(again.training.messagesFromTimeline);
  problem.training.messagesFromTimeline = true;
  std::ostringstream charged;
  writeProblemJson(problem, charged);
  std::istringstream chargedBack(charged.str());
  EXPECT_TRUE(orThrow(readProblemJson(chargedBack, "charged")).training.messagesFromTimeline);
  problem.training.messagesFromTimeline = false;

  std::istringstream noLayers(R"({"name": "x"})");
  EXPECT_NE(errorOf([&] { orThrow(readProblemJson(noLayers, "x.json")); }).find("'layers'"), std::string::npos);
  std::istringstream negative(R"({"layers": [{"name": "a", "forward_ms": -1}]})");
  std::string message = errorOf([&] { orThrow(readProblemJson(negative, "x.json")); });
  EXPECT_NE(message.find("layer 0 ('a')"), std::string::npos) << message;
  std::istringstream badTensor(R"({"layers": [{"name": "a"}], "tensors": [{"producer": 0, "consumers": [4]}]})");
  EXPECT_NE(errorOf([&] { orThrow(readProblemJson(badTensor, "x.json")); }).find("tensors[0].consumers[0] is 4, outside 0..0"), std::string::npos);
  // Shared parameters round-trip, and need two distinct layers.
  problem.sharedParameters.push_back({{3, 0}, 5e8});
  orThrow(problem.finalize());
  std::ostringstream withShared;
  writeProblemJson(problem, withShared);
  std::istringstream sharedBack(withShared.str());
  Problem tied = orThrow(readProblemJson(sharedBack, "tied"));
  ASSERT_EQ(tied.sharedParameters.size(), 1u);
  EXPECT_EQ(tied.sharedParameters[0].layers, (std::vector<int>{0, 3}));
  EXPECT_DOUBLE_EQ(tied.sharedParameters[0].bytes, 5e8);
  std::istringstream lonely(
      R"({"layers": [{"name": "a"}, {"name": "b"}], "shared_parameters": [{"layers": [1, 1], "bytes": 4}]})");
  EXPECT_NE(errorOf([&] { orThrow(readProblemJson(lonely, "x.json")); })
                .find("shared parameter 0: needs two or more distinct layers"),
            std::string::npos);
  std::istringstream notJson("{layers: ");
  EXPECT_NE(errorOf([&] { orThrow(readProblemJson(notJson, "x.json")); }).find("not valid JSON"), std::string::npos);
}

TEST(Problem, LargeRandomDagLinearisesQuickly) {
  // 10,000 nodes, skip connections: order and cut sets are linear-time.
  std::mt19937 rng(1);
  Problem problem;
  const int n = 10000;
  for (int i = 0; i < n; ++i) {
    Layer layer;
    layer.name = "n" + std::to_string(i);
    layer.forwardMs = 1;
    layer.outputBytes = 1;
    problem.layers.push_back(layer);
  }
  for (int i = 0; i + 1 < n; ++i) {
    Tensor t{i, {i + 1}, 1.0};
    if (i + 10 < n && rng() % 4 == 0)
      t.consumers.push_back(i + 10);
    problem.tensors.push_back(t);
  }
  orThrow(problem.finalize());
  auto order = topologicalOrder(problem);
  auto cut = cutBytesAlong(problem, order);
  ASSERT_EQ(cut.size(), static_cast<size_t>(n));
  for (int i = 0; i + 1 < n; ++i)
    ASSERT_GE(cut[static_cast<size_t>(i)], 1.0);
}

} // namespace
} // namespace partitioner
