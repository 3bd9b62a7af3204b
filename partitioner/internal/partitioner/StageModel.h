// Cost of one contiguous stage (between two cuts of a lattice) on one GPU: compute,
// link time per micro-batch and memory for a given number of in-flight micro-batches.
// Shared by every dynamic program so that they price stages identically.
#ifndef PARTITIONER_STAGEMODEL_H
#define PARTITIONER_STAGEMODEL_H

#include "partitioner/CutLattice.h"
#include "partitioner/Problem.h"

#include <algorithm>
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

/// What a stage between two cuts is made of, whatever GPU and position it takes:
/// its times at speed 1 and its byte counts. A dynamic program prices one stage at
/// many positions (GPU, in-flight count); it reads the lattice once for all of them.
struct StageTerms {
  double forwardMs = 0, backwardMs = 0, workMs = 0;
  double parameterBytes = 0; ///< its layers' and the shared ones it owns
  double readParameterBytes = 0;
  double savedBytes = 0;
  double inputBytes = 0;
  double workspaceBytes = 0;
  double inBytes = 0, outBytes = 0; ///< leaving the cut before it, leaving its own cut
  bool first = false, last = false; ///< no stage before it, none after it
  int fromCut = 0, toCut = 0;
};

class StageModel {
public:
  StageModel(const Problem &problem, const CutLattice &lattice);

  /// The stage between cuts `from` and `to` (from < to).
  StageTerms terms(int from, int to) const;
  /// Its times and the bytes crossing its cuts only (the byte counts of its memory
  /// left at 0): what its times and transfers need, quicker to read.
  StageTerms timeTerms(int from, int to) const;

  double forwardMs(int from, int to, int gpu) const { return forwardMs(timeTerms(from, to), gpu); }
  /// With `recompute`, the backward runs the forward again first.
  double backwardMs(int from, int to, int gpu, bool recompute = false) const {
    return backwardMs(timeTerms(from, to), gpu, recompute);
  }
  double computeMs(int from, int to, int gpu, bool recompute = false) const {
    return computeMs(timeTerms(from, to), gpu, recompute);
  }
  /// Transfer of the bytes leaving `cut`, between gpu and gpu+1.
  double boundaryTransferMs(int cut, int gpu) const {
    return transferMs(lattice_.cutBytes[static_cast<size_t>(cut)], gpu);
  }
  /// The part of boundaryTransferMs that holds the two GPUs' ports (the latency
  /// does not).
  double boundaryOccupancyMs(int cut, int gpu) const {
    return problem_.platform.linkBetween(gpu, gpu + 1).occupancyMs(
        lattice_.cutBytes[static_cast<size_t>(cut)]);
  }
  /// Port time per micro-batch (full-duplex ports, communication overlapping compute):
  /// receive c(from) from gpu-1 and send c(to) to gpu+1, gradients in reverse.
  double commMs(int from, int to, int gpu) const { return commMs(timeTerms(from, to), gpu); }
  /// Contribution of the stage to the period: max(compute, communication).
  double periodMs(int from, int to, int gpu, bool recompute = false) const {
    return periodMs(timeTerms(from, to), gpu, recompute);
  }
  /// Parameters x state multiplier, shared parameters an earlier stage owns x
  /// readerStateMultiplier, extra weight versions, communication buffers.
  double staticBytes(int from, int to, int versions) const {
    return staticBytes(terms(from, to), versions);
  }
  /// staticBytes + inFlight x saved activations (weight versions from the policy);
  /// with `recompute`, inFlight x the bytes entering the stage (received, and the
  /// model inputs its layers read) + one copy of the saved activations (the
  /// micro-batch being recomputed). Plus the largest workspace of its layers.
  double memoryBytes(int from, int to, int inFlight, bool recompute = false) const {
    return memoryBytes(terms(from, to), inFlight, recompute);
  }
  double memoryLimit() const { return problem_.platform.memoryBytesPerGpu; }
  bool fits(int from, int to, int inFlight, bool recompute = false) const {
    return fits(terms(from, to), inFlight, recompute);
  }
  /// The stage under the recompute policy: None prices it as it is, All always
  /// recomputing, Auto as it is when it fits (or memory is not checked) and
  /// recomputing otherwise. Infeasible when `checkMemory` and the variant does not
  /// fit with `inFlight` micro-batches. Recomputing never shortens a stage, so Auto
  /// recomputes only where it must.
  StageChoice choose(int from, int to, int inFlight, int gpu, bool checkMemory) const {
    return choose(terms(from, to), inFlight, gpu, checkMemory);
  }

  // The same from the stage's terms (StageModel::terms).
  double forwardMs(const StageTerms &stage, int gpu) const {
    return stage.forwardMs / problem_.platform.speedOf(gpu);
  }
  double backwardMs(const StageTerms &stage, int gpu, bool recompute = false) const {
    const double backward = stage.backwardMs / problem_.platform.speedOf(gpu);
    return recompute ? backward + forwardMs(stage, gpu) : backward;
  }
  double computeMs(const StageTerms &stage, int gpu, bool recompute = false) const {
    const double work = stage.workMs / problem_.platform.speedOf(gpu);
    return recompute ? work + forwardMs(stage, gpu) : work;
  }
  double commMs(const StageTerms &stage, int gpu) const {
    if (oneLinkClass_) // every link alike: per cut, computed once
      return (stage.first ? 0.0 : cutTransferMs_[static_cast<size_t>(stage.fromCut)]) +
             (stage.last ? 0.0 : cutTransferMs_[static_cast<size_t>(stage.toCut)]);
    return (stage.first ? 0.0 : transferMs(stage.inBytes, gpu - 1)) +
           (stage.last ? 0.0 : transferMs(stage.outBytes, gpu));
  }
  double periodMs(const StageTerms &stage, int gpu, bool recompute = false) const {
    return std::max(computeMs(stage, gpu, recompute), commMs(stage, gpu));
  }
  double staticBytes(const StageTerms &stage, int versions) const;
  double memoryBytes(const StageTerms &stage, int inFlight, bool recompute = false) const;
  bool fits(const StageTerms &stage, int inFlight, bool recompute = false) const {
    return memoryBytes(stage, inFlight, recompute) <= memoryLimit() * (1 + 1e-12);
  }
  StageChoice choose(const StageTerms &stage, int inFlight, int gpu, bool checkMemory) const;

  /// True when every stage of the lattice doing at most `maxWork` of work, kept as
  /// it is (not recomputing), fits with `inFlight` micro-batches alive: a bound is
  /// within the limit, from the whole network (all its parameters and saved values,
  /// every shared parameter read again, its largest workspace, the largest cut
  /// received and sent) or, on a chain with `maxWork` finite, from the longest
  /// stage within it starting at each cut. A DP that prices only such stages may
  /// then leave memory unchecked and find the same partition. False under
  /// RecomputePolicy::All, whose stages always recompute.
  bool memoryNeverBinds(int inFlight, double maxWork = kInfinity) const;

  const CutLattice &lattice() const { return lattice_; }
  const Problem &problem() const { return problem_; }
  /// True when every transfer is priced alike, whichever GPUs it joins.
  bool oneLinkClass() const { return oneLinkClass_; }
  /// True when every GPU has the same speed.
  bool oneSpeed() const { return oneSpeed_; }
  /// True when the links between consecutive GPUs 0..gpus-1 are of one class (as
  /// when all are in one node, where the link from the last GPU to a next node's
  /// differs): every transfer of a pipeline of stages on GPUs in order.
  bool pipelineLinksAlike() const { return pipelineLinksAlike_; }
  /// periodMs(from, to, gpu) without recomputation, when oneSpeed() and
  /// pipelineLinksAlike(), for a stage whose transfers join GPUs of the platform
  /// (first, or on GPU 1 or later; last, or before the last GPU), as every stage of
  /// the DPs' pipelines from the end: the same number, read from the lattice's
  /// prefix sums and the cuts' transfer times (the memory-blind DPs price tens of
  /// millions of stages).
  double uniformPeriodMs(int from, int to) const {
    const size_t a = static_cast<size_t>(from), b = static_cast<size_t>(to);
    const double compute = (lattice_.work[b] - lattice_.work[a]) / problem_.platform.speedOf(0);
    const double comm = (from == lattice_.emptyCut() ? 0.0 : cutTransferMs_[a]) +
                        (to == lattice_.fullCut() ? 0.0 : cutTransferMs_[b]);
    return std::max(compute, comm);
  }

private:
  /// `bytes` sent from gpu to gpu+1 (or back).
  double transferMs(double bytes, int gpu) const {
    return problem_.platform.linkBetween(gpu, gpu + 1).transferMs(bytes);
  }

  const Problem &problem_;
  const CutLattice &lattice_;
  bool oneLinkClass_ = true;
  bool oneSpeed_ = true;
  bool pipelineLinksAlike_ = true;
  /// With pipelineLinksAlike_: the transfer time of each cut's bytes.
  std::vector<double> cutTransferMs_;
};

/// One stage priced at many positions, as the dynamic programs do (every number of
/// stages after it, on the GPU that number implies): the same choices as
/// StageModel::choose, with the stage's terms read once, its period per variant
/// computed once per pair of link classes around the GPU when the GPUs have one
/// speed, and the largest in-flight count that fits per variant found once by
/// bisection (memory only grows with the count).
class PricedStage {
public:
  PricedStage(const StageModel &model, int from, int to);

  StageChoice choose(int inFlight, int gpu, bool checkMemory);
  /// Every term, memory included.
  const StageTerms &terms();
  /// Whether `inFlight` copies fit (StageModel::fits), from the largest count that
  /// fits, found once per variant.
  bool fits(bool recompute, int inFlight);

private:
  double periodMs(bool recompute, int gpu);

  const StageModel &model_;
  int from_, to_;
  StageTerms terms_; ///< times only until memoryTerms_ (read when memory is checked)
  bool memoryTerms_ = false;
  bool oneSpeed_, oneLinkClass_;
  /// Per variant and link classes (inter-node before the GPU, after it): -1 unknown.
  double period_[2][4];
  int largestFit_[2]; ///< -2: not searched yet; -1: not even 0 copies fit
};

} // namespace partitioner

#endif
