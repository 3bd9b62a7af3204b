// Cost of one contiguous stage (between two cuts of a lattice) on one GPU: compute,
// link time per micro-batch and memory for a given number of in-flight micro-batches.
// Shared by every dynamic program so that they price stages identically.
#ifndef PARTITIONER_STAGEMODEL_H
#define PARTITIONER_STAGEMODEL_H

#include "partitioner/CutLattice.h"
#include "partitioner/Problem.h"

#include <vector>

namespace partitioner {

/// In-flight micro-batches of a stage under the position rule of a schedule family:
/// `stagesFromEnd` counts the stage itself (1 for the last stage). GPipe keeps all m;
/// 1F1B-like schedules keep min(stagesFromEnd, m). Periodic schedules have no position
/// rule (their count comes from the downstream latency) and fall back to 1F1B's bound.
int positionalInFlight(ScheduleKind kind, int stagesFromEnd, int microbatches);

/// The variants of a stage a policy tries, in order, keeping the first that fits:
/// none {as it is}, auto {as it is, recomputing}, all {recomputing}.
std::vector<bool> recomputeVariants(RecomputePolicy policy);

/// A stage as a dynamic program prices it under the problem's RecomputePolicy.
struct StageChoice {
  bool feasible = false;
  bool recompute = false;     ///< the stage recomputes its forward in the backward
  double periodMs = kInfinity; ///< max(compute, communication), recomputation included
};

class StageModel {
public:
  StageModel(const Problem &problem, const CutLattice &lattice);

  double forwardMs(int from, int to, int gpu) const;
  /// With `recompute`, the backward runs the forward again first.
  double backwardMs(int from, int to, int gpu, bool recompute = false) const;
  double computeMs(int from, int to, int gpu, bool recompute = false) const;
  /// Transfer of the bytes leaving `cut`, between gpu and gpu+1.
  double boundaryTransferMs(int cut, int gpu) const;
  /// Port time per micro-batch (full-duplex ports, communication overlapping compute):
  /// receive c(from) from gpu-1 and send c(to) to gpu+1, gradients in reverse.
  double commMs(int from, int to, int gpu) const;
  /// Contribution of the stage to the period: max(compute, communication).
  double periodMs(int from, int to, int gpu, bool recompute = false) const;
  /// Parameters x state multiplier, shared parameters an earlier stage owns x
  /// readerStateMultiplier, extra weight versions, communication buffers.
  double staticBytes(int from, int to, int versions) const;
  /// staticBytes + inFlight x saved activations (weight versions from the policy);
  /// with `recompute`, inFlight x the bytes entering the stage (received, and the
  /// model inputs its layers read) + one copy of the saved activations (the
  /// micro-batch being recomputed). Plus the largest workspace of its layers.
  double memoryBytes(int from, int to, int inFlight, bool recompute = false) const;
  double memoryLimit() const { return problem_.platform.memoryBytesPerGpu; }
  bool fits(int from, int to, int inFlight, bool recompute = false) const {
    return memoryBytes(from, to, inFlight, recompute) <= memoryLimit() * (1 + 1e-12);
  }
  /// The stage under the recompute policy: None prices it as it is, All always
  /// recomputing, Auto as it is when it fits (or memory is not checked) and
  /// recomputing otherwise. Infeasible when `checkMemory` and the variant does not
  /// fit with `inFlight` micro-batches. Recomputing never shortens a stage, so Auto
  /// recomputes only where it must.
  StageChoice choose(int from, int to, int inFlight, int gpu, bool checkMemory) const;

  const CutLattice &lattice() const { return lattice_; }
  const Problem &problem() const { return problem_; }

private:
  const Problem &problem_;
  const CutLattice &lattice_;
};

} // namespace partitioner

#endif
