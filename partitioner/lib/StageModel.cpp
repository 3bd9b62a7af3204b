// Stage costs (docs/partitioner.md, "The model": "Memory of a GPU" and "Platform").
#include "partitioner/StageModel.h"

#include <algorithm>

namespace partitioner {

int positionalInFlight(ScheduleKind kind, int stagesFromEnd, int microbatches) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return microbatches;
  default:
    return std::min(stagesFromEnd, microbatches);
  }
}

StageModel::StageModel(const Problem &problem, const CutLattice &lattice)
    : problem_(problem), lattice_(lattice) {}

double StageModel::forwardMs(int from, int to, int gpu) const {
  return (lattice_.forward[static_cast<size_t>(to)] -
          lattice_.forward[static_cast<size_t>(from)]) /
         problem_.platform.speedOf(gpu);
}

double StageModel::backwardMs(int from, int to, int gpu) const {
  return (lattice_.backward[static_cast<size_t>(to)] -
          lattice_.backward[static_cast<size_t>(from)]) /
         problem_.platform.speedOf(gpu);
}

double StageModel::computeMs(int from, int to, int gpu) const {
  return (lattice_.work[static_cast<size_t>(to)] - lattice_.work[static_cast<size_t>(from)]) /
         problem_.platform.speedOf(gpu);
}

double StageModel::boundaryTransferMs(int cut, int gpu) const {
  const Platform &platform = problem_.platform;
  return platform.linkBetween(gpu, gpu + 1)
      .transferMs(lattice_.cutBytes[static_cast<size_t>(cut)]);
}

double StageModel::commMs(int from, int to, int gpu) const {
  double total = 0;
  if (from != lattice_.emptyCut())
    total += boundaryTransferMs(from, gpu - 1);
  if (to != lattice_.fullCut())
    total += boundaryTransferMs(to, gpu);
  return total;
}

double StageModel::periodMs(int from, int to, int gpu) const {
  return std::max(computeMs(from, to, gpu), commMs(from, to, gpu));
}

double StageModel::staticBytes(int from, int to, int versions) const {
  const double params =
      lattice_.params[static_cast<size_t>(to)] - lattice_.params[static_cast<size_t>(from)];
  double bytes = problem_.training.stateMultiplier * params + (versions - 1) * params;
  if (problem_.training.communicationBuffers)
    bytes += kBuffersPerCutTensor * (lattice_.cutBytes[static_cast<size_t>(from)] +
                                     lattice_.cutBytes[static_cast<size_t>(to)]);
  return bytes;
}

double StageModel::memoryBytes(int from, int to, int inFlight) const {
  const double saved =
      lattice_.saved[static_cast<size_t>(to)] - lattice_.saved[static_cast<size_t>(from)];
  return staticBytes(from, to, weightVersions(problem_.training, inFlight)) +
         inFlight * saved;
}

} // namespace partitioner
