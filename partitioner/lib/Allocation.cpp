// Allocations and the stage graph they induce.
#include "partitioner/Allocation.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <map>
#include <set>

namespace partitioner {

int Allocation::numGpusUsed() const {
  return static_cast<int>(std::set<int>(gpuOfStage.begin(), gpuOfStage.end()).size());
}

bool Allocation::oneStagePerGpu() const { return numGpusUsed() == numStages(); }

void validateAllocation(const Problem &problem, const Allocation &allocation) {
  const int stages = allocation.numStages();
  if (allocation.stageOfLayer.size() != problem.layers.size())
    throw Error("allocation covers " + std::to_string(allocation.stageOfLayer.size()) +
                " layers, the problem has " + std::to_string(problem.layers.size()));
  std::vector<int> count(static_cast<size_t>(std::max(stages, 0)), 0);
  for (size_t l = 0; l < problem.layers.size(); ++l) {
    int s = allocation.stageOfLayer[l];
    if (s < 0 || s >= stages)
      throw Error("layer '" + problem.layers[l].name + "' has stage " + std::to_string(s) +
                  ", outside 0.." + std::to_string(stages - 1));
    ++count[static_cast<size_t>(s)];
  }
  for (int s = 0; s < stages; ++s) {
    if (count[static_cast<size_t>(s)] == 0)
      throw Error("stage " + std::to_string(s) + " is empty");
    int g = allocation.gpuOfStage[static_cast<size_t>(s)];
    if (g < 0 || g >= problem.platform.gpus)
      throw Error("stage " + std::to_string(s) + " is on GPU " + std::to_string(g) +
                  ", the platform has " + std::to_string(problem.platform.gpus));
  }
  if (!allocation.recompute.empty() &&
      allocation.recompute.size() != static_cast<size_t>(stages))
    throw Error("allocation gives recompute flags for " +
                std::to_string(allocation.recompute.size()) + " stages, it has " +
                std::to_string(stages));
  if (!allocation.stageOrders.empty()) {
    if (allocation.stageOrders.size() != static_cast<size_t>(stages))
      throw Error("allocation gives orders for " + std::to_string(allocation.stageOrders.size()) +
                  " stages, it has " + std::to_string(stages));
    if (!allocation.oneStagePerGpu())
      throw Error("stage orders need one stage per GPU");
    for (int s = 0; s < stages; ++s)
      orThrow(parseStageOrder(toString(allocation.stageOrders[static_cast<size_t>(s)])));
  }
  for (const Tensor &tensor : problem.tensors)
    for (int consumer : tensor.consumers)
      if (allocation.stageOfLayer[static_cast<size_t>(consumer)] <
          allocation.stageOfLayer[static_cast<size_t>(tensor.producer)])
        throw Error("tensor of '" + problem.layers[static_cast<size_t>(tensor.producer)].name +
                    "' (stage " +
                    std::to_string(allocation.stageOfLayer[static_cast<size_t>(tensor.producer)]) +
                    ") flows back to '" + problem.layers[static_cast<size_t>(consumer)].name +
                    "' (stage " +
                    std::to_string(allocation.stageOfLayer[static_cast<size_t>(consumer)]) + ")");
}

Allocation allocationFromCuts(const Problem &problem, const CutLattice &lattice,
                              const CutPartition &partition) {
  Allocation allocation;
  allocation.stageOfLayer.assign(problem.layers.size(), -1);
  const size_t stages = partition.gpus.size();
  for (size_t s = 0; s < stages; ++s)
    for (int layer : lattice.layersBetween(partition.cuts[s], partition.cuts[s + 1]))
      allocation.stageOfLayer[static_cast<size_t>(layer)] = static_cast<int>(s);
  // Stages keep their GPUs from the end-built DP but are renumbered from GPU 0 so that
  // a pipeline shorter than the platform uses the first GPUs.
  const int shift = stages ? partition.gpus.front() : 0;
  for (int g : partition.gpus)
    allocation.gpuOfStage.push_back(g - shift);
  if (std::count(partition.recompute.begin(), partition.recompute.end(), true) > 0)
    allocation.recompute = partition.recompute;
  if (problem.platform.speed.empty() == false)
    allocation.gpuOfStage = partition.gpus; // heterogeneous: keep the priced GPUs
  return allocation;
}

Allocation allocationFromSizes(const Problem &problem, const std::vector<int> &order,
                               const std::vector<int> &stageSizes) {
  Allocation allocation;
  allocation.stageOfLayer.assign(problem.layers.size(), -1);
  size_t position = 0;
  for (size_t s = 0; s < stageSizes.size(); ++s) {
    for (int i = 0; i < stageSizes[s]; ++i)
      allocation.stageOfLayer[static_cast<size_t>(order[position++])] = static_cast<int>(s);
    allocation.gpuOfStage.push_back(static_cast<int>(s));
  }
  return allocation;
}

StageGraph buildStageGraph(const Problem &problem, const Allocation &allocation) {
  StageGraph graph;
  const int stages = allocation.numStages();
  graph.numStages = stages;
  graph.gpu = allocation.gpuOfStage;
  auto zeros = [&](std::vector<double> &v) { v.assign(static_cast<size_t>(stages), 0.0); };
  zeros(graph.forwardMs);
  zeros(graph.backwardMs);
  zeros(graph.weightGradientMs);
  zeros(graph.savedBytes);
  zeros(graph.parameterBytes);
  zeros(graph.readParameterBytes);
  zeros(graph.inputBytes);
  zeros(graph.workspaceBytes);
  zeros(graph.inBytes);
  zeros(graph.outBytes);
  graph.predecessors.resize(static_cast<size_t>(stages));
  graph.successors.resize(static_cast<size_t>(stages));
  graph.layers.resize(static_cast<size_t>(stages));
  {
    std::vector<size_t> count(static_cast<size_t>(stages), 0);
    for (int s : allocation.stageOfLayer)
      if (s >= 0 && s < stages)
        ++count[static_cast<size_t>(s)];
    for (size_t s = 0; s < count.size(); ++s)
      graph.layers[s].reserve(count[s]);
  }
  graph.recompute.assign(static_cast<size_t>(stages), false);
  for (int s = 0; s < stages; ++s)
    graph.recompute[static_cast<size_t>(s)] = allocation.recomputes(s);
  for (size_t l = 0; l < problem.layers.size(); ++l) {
    const Layer &layer = problem.layers[l];
    const int s = allocation.stageOfLayer[l];
    const double speed = problem.platform.speedOf(allocation.gpuOfStage[static_cast<size_t>(s)]);
    graph.forwardMs[static_cast<size_t>(s)] += layer.forwardMs / speed;
    graph.backwardMs[static_cast<size_t>(s)] += layer.backwardMs / speed;
    graph.weightGradientMs[static_cast<size_t>(s)] += layer.weightGradientMs() / speed;
    graph.savedBytes[static_cast<size_t>(s)] += layer.savedBytes;
    graph.parameterBytes[static_cast<size_t>(s)] += layer.parameterBytes;
    graph.inputBytes[static_cast<size_t>(s)] += layer.inputBytes;
    graph.workspaceBytes[static_cast<size_t>(s)] =
        std::max(graph.workspaceBytes[static_cast<size_t>(s)], layer.workspaceBytes);
    graph.layers[static_cast<size_t>(s)].push_back(static_cast<int>(l));
  }
  // A shared saved value: one copy in each stage holding one of its keepers.
  for (const SharedSaved &value : problem.sharedSaved) {
    if (value.layers.empty())
      continue;
    const int first = allocation.stageOfLayer[static_cast<size_t>(value.layers.front())];
    if (std::all_of(value.layers.begin(), value.layers.end(), [&](int layer) {
          return allocation.stageOfLayer[static_cast<size_t>(layer)] == first;
        })) {
      graph.savedBytes[static_cast<size_t>(first)] += value.bytes; // kept by one stage
      continue;
    }
    std::set<int> keeping;
    for (int layer : value.layers)
      keeping.insert(allocation.stageOfLayer[static_cast<size_t>(layer)]);
    for (int s : keeping)
      graph.savedBytes[static_cast<size_t>(s)] += value.bytes;
  }
  // A shared parameter: owned by the first stage reading it; the first stage on
  // every other GPU reading it keeps a copy.
  for (const SharedParameter &value : problem.sharedParameters) {
    std::set<int> reading;
    for (int layer : value.layers)
      reading.insert(allocation.stageOfLayer[static_cast<size_t>(layer)]);
    std::set<int> gpus;
    for (int s : reading) {
      const int gpu = allocation.gpuOfStage[static_cast<size_t>(s)];
      if (!gpus.insert(gpu).second)
        continue;
      (s == *reading.begin() ? graph.parameterBytes : graph.readParameterBytes)[static_cast<size_t>(s)] +=
          value.bytes;
    }
  }
  std::map<std::pair<int, int>, double> edges;
  for (const Tensor &tensor : problem.tensors) {
    const int from = allocation.stageOfLayer[static_cast<size_t>(tensor.producer)];
    // Most tensors stay in their producer's stage: no set for them.
    if (std::all_of(tensor.consumers.begin(), tensor.consumers.end(), [&](int consumer) {
          return allocation.stageOfLayer[static_cast<size_t>(consumer)] == from;
        }))
      continue;
    std::set<int> consumingStages;
    for (int consumer : tensor.consumers) {
      int to = allocation.stageOfLayer[static_cast<size_t>(consumer)];
      if (to != from)
        consumingStages.insert(to);
    }
    for (int to : consumingStages)
      edges[{from, to}] += tensor.bytes;
  }
  for (const auto &[key, bytes] : edges) {
    graph.successors[static_cast<size_t>(key.first)].push_back({key.second, bytes});
    graph.predecessors[static_cast<size_t>(key.second)].push_back({key.first, bytes});
    graph.outBytes[static_cast<size_t>(key.first)] += bytes;
    graph.inBytes[static_cast<size_t>(key.second)] += bytes;
  }
  for (size_t s = 0; s < static_cast<size_t>(stages); ++s)
    if (graph.recompute[s])
      graph.backwardMs[s] += graph.forwardMs[s];
  return graph;
}

double crossingBytes(const StageGraph &graph) {
  double total = 0;
  for (double bytes : graph.outBytes)
    total += bytes;
  return total;
}

} // namespace partitioner
