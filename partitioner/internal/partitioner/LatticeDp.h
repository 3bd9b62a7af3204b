// Dynamic programs over a cut lattice that build contiguous partitions from the end of
// the network (stage k from the end runs on GPU P-k), so that each stage knows what is
// downstream of it: its position (1F1B-like rules) or its real latency (periodic).
#ifndef PARTITIONER_LATTICEDP_H
#define PARTITIONER_LATTICEDP_H

#include "partitioner/StageModel.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace partitioner {

/// A contiguous partition: stage i lies between cuts[i] and cuts[i+1], on gpus[i],
/// and was priced with inFlight[i] micro-batches alive.
struct CutPartition {
  std::vector<int> cuts;
  std::vector<int> gpus;
  std::vector<int> inFlight;
  /// Per stage: recomputes its forward (StageModel::choose); empty means none.
  std::vector<bool> recompute;
  double periodMs = kInfinity; ///< bottleneck under the DP's model
};

struct MinMaxOptions {
  int maxStages = 1;
  bool exactStageCount = false; ///< use exactly min(maxStages, layers) stages
  bool memoryAware = true;
  ScheduleKind inFlightRule = ScheduleKind::OneFOneB;
  /// PipeDream's position filter, (stages after this one) x (saved + params) <= M,
  /// instead of the schedule's in-flight rule.
  bool pipeDreamFilter = false;
  /// Stages slower than this are never considered (a known feasible period).
  double upperBoundMs = kInfinity;
  /// Second pass at the optimal period: fewest bytes crossing stages.
  bool tieBreak = true;
  /// The caller keeps the partition only when its period is below this times
  /// (1 - 1e-12) (an incumbent): at or above it the second pass is skipped.
  double keepOnlyBelowMs = kInfinity;
};

/// Exact: minimises the largest stage period max(compute, comm) over every contiguous
/// partition of the lattice into at most (or exactly) maxStages stages whose memory fits.
std::optional<CutPartition> minMaxPartition(const StageModel &model, const MinMaxOptions &options);

/// Exact: the partition whose worst stage memory / limit is smallest (time ignored);
/// used to explain infeasibility.
std::optional<CutPartition> minMemoryPartition(const StageModel &model, int maxStages,
                                               ScheduleKind inFlightRule);

/// Exact at a fixed period T for the periodic schedule: every stage's period <= T and
/// memory with n = ceil(span / T) copies fits, where the span of a stage is its
/// forward, the transfers, the downstream span and its backward, the backward being
/// delayed until its slot does not overlap the forward modulo T. Minimises the span of
/// the first stage; nothing when no partition is feasible at T.
std::optional<CutPartition> periodicPartition(const StageModel &model, int maxStages,
                                              double periodMs);

/// The smallest T (relative precision 1e-7) at which periodicPartition finds a
/// partition: doubling from `lowMs`, then bisection. When `outOfTime` says so, the
/// search stops with the best partition found so far (its T is feasible, not
/// proven minimal), or none if none was found yet.
std::optional<CutPartition> periodicMinPeriod(
    const StageModel &model, int maxStages, double lowMs,
    const std::function<bool()> &outOfTime = [] { return false; });

/// The stages a DP over `lattice` prices when no stage may be slower than
/// `upperBoundMs`: the nested cuts A ⊂ B whose difference does at most that much work.
/// Counted up to `budget`; returns min(count, budget + 1). Every DP pass walks these
/// pairs, so their number is what a DP costs (downsets alone are not: a DAG of many
/// blocks in series has few downsets per block, and quadratically many pairs).
size_t countLatticeStages(const Problem &problem, const CutLattice &lattice, double upperBoundMs,
                          size_t budget);

/// Greedy feasible upper bound for chain lattices (bisection on T, longest stages from
/// the end); exact when links are free. Infinity when nothing fits.
double greedyUpperBound(const StageModel &model, const MinMaxOptions &options);

/// Describes why no partition fits, e.g. "stage 0 (layers conv1..relu3) needs 18.2 GB
/// with 8 micro-batches in flight, limit 16 GB".
std::string explainMemoryInfeasibility(const StageModel &model, int maxStages,
                                       ScheduleKind inFlightRule);


} // namespace partitioner

#endif
