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

double StageModel::backwardMs(int from, int to, int gpu, bool recompute) const {
  const double backward = (lattice_.backward[static_cast<size_t>(to)] -
                           lattice_.backward[static_cast<size_t>(from)]) /
                          problem_.platform.speedOf(gpu);
  return recompute ? backward + forwardMs(from, to, gpu) : backward;
}

double StageModel::computeMs(int from, int to, int gpu, bool recompute) const {
  const double work =
      (lattice_.work[static_cast<size_t>(to)] - lattice_.work[static_cast<size_t>(from)]) /
      problem_.platform.speedOf(gpu);
  return recompute ? work + forwardMs(from, to, gpu) : work;
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

double StageModel::periodMs(int from, int to, int gpu, bool recompute) const {
  return std::max(computeMs(from, to, gpu, recompute), commMs(from, to, gpu));
}

double StageModel::staticBytes(int from, int to, int versions) const {
  const double params =
      lattice_.params[static_cast<size_t>(to)] - lattice_.params[static_cast<size_t>(from)];
  const double read = lattice_.readParametersBetween(from, to);
  const TrainingSettings &training = problem_.training;
  double bytes = training.stateMultiplier * params + readerStateMultiplier(training) * read +
                 (versions - 1) * (params + read);
  if (problem_.training.communicationBuffers)
    bytes += kBuffersPerCutTensor * (lattice_.cutBytes[static_cast<size_t>(from)] +
                                     lattice_.cutBytes[static_cast<size_t>(to)]);
  return bytes;
}

double StageModel::memoryBytes(int from, int to, int inFlight, bool recompute) const {
  const double saved = lattice_.savedBetween(from, to);
  const double inputs =
      lattice_.inputs[static_cast<size_t>(to)] - lattice_.inputs[static_cast<size_t>(from)];
  const double kept = recompute ? lattice_.cutBytes[static_cast<size_t>(from)] + inputs : saved;
  return staticBytes(from, to, weightVersions(problem_.training, inFlight)) +
         inFlight * kept + (recompute ? saved : 0.0) + lattice_.workspaceBetween(from, to);
}

std::vector<bool> recomputeVariants(RecomputePolicy policy) {
  switch (policy) {
  case RecomputePolicy::None:
    break;
  case RecomputePolicy::Auto:
    return {false, true};
  case RecomputePolicy::All:
    return {true};
  }
  return {false};
}

StageChoice StageModel::choose(int from, int to, int inFlight, int gpu, bool checkMemory) const {
  StageChoice choice;
  for (bool recompute : recomputeVariants(problem_.training.recompute)) {
    if (checkMemory && !fits(from, to, inFlight, recompute))
      continue;
    choice.feasible = true;
    choice.recompute = recompute;
    choice.periodMs = periodMs(from, to, gpu, recompute);
    break;
  }
  return choice;
}

} // namespace partitioner
