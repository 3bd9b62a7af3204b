// Internal helper shared by the general-allocation algorithms (`ilp-general` and
// `general`): the layers along one topological order, any map position -> GPU, and the
// allocation it induces (each maximal run of positions on one GPU is a stage).
#ifndef PARTITIONER_ALGORITHMS_GENERAL_H
#define PARTITIONER_ALGORITHMS_GENERAL_H

#include "partitioner/Algorithm.h"
#include "partitioner/CutLattice.h"
#include "partitioner/Linearize.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace partitioner {
namespace detail {

/// The chain the general algorithms plan on: work per position and, per boundary b
/// (between positions b and b+1), the bytes of the tensors crossing it.
struct GeneralChain {
  std::vector<int> order;
  std::vector<double> work, saved, params;
  std::vector<double> boundaryBytes; ///< size L-1
  explicit GeneralChain(const Problem &problem) : GeneralChain(problem, topologicalOrder(problem)) {}
  /// `order` must be a topological order of the problem.
  GeneralChain(const Problem &problem, std::vector<int> order_) : order(std::move(order_)) {
    const CutLattice lattice = chainLattice(problem, order);
    for (size_t i = 0; i < order.size(); ++i) {
      work.push_back(lattice.work[i + 1] - lattice.work[i]);
      // The layer's own saved bytes: shared saved values are charged apart.
      saved.push_back(problem.layers[static_cast<size_t>(order[i])].savedBytes);
      params.push_back(lattice.params[i + 1] - lattice.params[i]);
      if (i + 1 < order.size())
        boundaryBytes.push_back(lattice.cutBytes[i + 1]);
    }
  }
  int size() const { return static_cast<int>(order.size()); }
};

/// Stages are the maximal runs of equal GPUs along the order, numbered in order.
inline Allocation allocationFromGpuMap(const Problem &problem, const GeneralChain &chain,
                                       const std::vector<int> &gpuOfPosition) {
  Allocation allocation;
  allocation.stageOfLayer.assign(problem.layers.size(), 0);
  for (int i = 0; i < chain.size(); ++i) {
    const int gpu = gpuOfPosition[static_cast<size_t>(i)];
    if (i == 0 || gpu != gpuOfPosition[static_cast<size_t>(i - 1)])
      allocation.gpuOfStage.push_back(gpu);
    allocation.stageOfLayer[static_cast<size_t>(chain.order[static_cast<size_t>(i)])] =
        allocation.numStages() - 1;
  }
  return allocation;
}

/// The schedule a general allocation is planned for: the problem's when it handles
/// several stages per GPU (1F1B, 1F1B-stash, ZB-H1, GPipe), else 1F1B.
inline ScheduleKind generalScheduleKind(const Problem &problem) {
  switch (problem.training.schedule) {
  case ScheduleKind::OneFOneB:
  case ScheduleKind::OneFOneBStash:
  case ScheduleKind::ZeroBubble:
  case ScheduleKind::GPipe:
    return problem.training.schedule;
  default:
    return ScheduleKind::OneFOneB;
  }
}

/// Port occupancy of a transfer across boundary b, on the slowest link class in use
/// (latency does not occupy ports, as in the simulator).
inline double boundaryOccupancyMs(const Problem &problem, const GeneralChain &chain, size_t b) {
  const Platform &platform = problem.platform;
  double ms = platform.intraNode.occupancyMs(chain.boundaryBytes[b]);
  if (platform.gpus > platform.gpusPerNode)
    ms = std::max(ms, platform.interNode.occupancyMs(chain.boundaryBytes[b]));
  return ms;
}

} // namespace detail
} // namespace partitioner

#endif
