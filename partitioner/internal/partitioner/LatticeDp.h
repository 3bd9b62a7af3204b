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

/// minMaxPartition; when `options` give no upper bound, its window is bounded by
/// greedyUpperBound's split on a chain lattice (a DP pass walks the pairs of cuts
/// within the window: on a 1,000-layer chain at 64 GPUs, stages of about 16 layers
/// instead of every pair). Exact: the greedy split is feasible, so no stage of an
/// optimal partition does more work than it allows.
std::optional<CutPartition> boundedMinMaxPartition(const StageModel &model,
                                                   MinMaxOptions options);

/// Exact: the partition whose worst stage memory / limit is smallest (time ignored);
/// used to explain infeasibility.
std::optional<CutPartition> minMemoryPartition(const StageModel &model, int maxStages,
                                               ScheduleKind inFlightRule);

/// How the periodic DP counts the micro-batches a stage keeps alive.
enum class CopyRule {
  /// The periodic schedule: n = ceil(span / T) copies, memory checked with n.
  Span,
  /// 1F1B with flush as the library generates it (the periodic pattern at the
  /// smallest T at which no stage keeps more than min(k, m) alive, k the stages from
  /// the end counting itself, nor more than the plan's cap): n = ceil(span / T) <= k,
  /// memory checked with n copies, and n becomes the stage's cap
  /// (Allocation::inFlightLimit), so that the generated order keeps no more. Its T is
  /// the simulated 1F1B period with the transfers on the path of each stage's span,
  /// as the simulator times them.
  OneFOneB,
};

/// How the periodic DP times a stage's transfers.
enum class TransferModel {
  /// Each transfer a pure delay (latency + bytes / bandwidth) on the span.
  Delays,
  /// As the pattern behind the generated orders places them (Schedule.cpp): each
  /// gradient also waits, modulo T, for the first slot free of the next stage's
  /// activation send and of the activation its own stage receives (on a chain of
  /// one stage per GPU, an activation never waits).
  PortSlots,
};

/// Exact at a fixed period T with TransferModel::Delays (with PortSlots, each state
/// keeps the shortest span only, though a longer one with other slots can place an
/// earlier stage's gradient sooner): every stage's compute and port time <= T, and
/// memory fits with the copies `rule` gives, where the span of a stage is its
/// forward, the transfers, the downstream span and its backward, the backward being
/// delayed until its slot does not overlap the forward modulo T. Minimises the span of
/// the first stage; nothing when no partition is feasible at T.
std::optional<CutPartition> periodicPartition(const StageModel &model, int maxStages,
                                              double periodMs, CopyRule rule = CopyRule::Span,
                                              TransferModel transfers = TransferModel::Delays);

/// The smallest T (relative precision 1e-7) at which periodicPartition finds a
/// partition: doubling from `lowMs`, then bisection. When `outOfTime` says so, the
/// search stops with the best partition found so far (its T is feasible, not
/// proven minimal), or none if none was found yet. With PortSlots, whether a
/// partition fits is not monotone in T: the search returns a T at which one fits.
std::optional<CutPartition> periodicMinPeriod(
    const StageModel &model, int maxStages, double lowMs,
    const std::function<bool()> &outOfTime = [] { return false; },
    CopyRule rule = CopyRule::Span, TransferModel transfers = TransferModel::Delays);

/// The smallest period (relative precision 1e-7) at which the 1F1B spans of
/// `partition` fit along its one path (its transfers on the spans, timed by
/// `transfers`, no stage keeping more copies than its position allows or
/// partition.inFlight caps): where they fit at partition.periodMs, searched down to
/// the stages' own bottleneck, else up to 64 times it; infinity when they do not fit
/// below that. What the span model predicts for a partition planned without it, or
/// found by a DP at some T (with PortSlots, fitting is not monotone in T: the search
/// reaches a T at which it fits, not always the smallest).
double oneFOneBSpanPeriod(const StageModel &model, const CutPartition &partition,
                          TransferModel transfers);

/// 1F1B with flush on links that cost time: the smallest T (relative precision
/// 1e-4) at which periodicPartition under CopyRule::OneFOneB and `transfers` finds a
/// partition, searched from the min-max DP's bottleneck (a lower bound: the same
/// stages without the spans) and below `upperBoundMs` (an incumbent; nothing when no
/// partition beats it). `minMax` is that DP's partition; it is returned when the
/// span search finds nothing below the doubling limit (the simulator then judges
/// it). Without `minMaxFits`, it is the memory-blind DP's (memory allows no
/// partition under 1F1B's position rule, but one may fit with the fewer copies its
/// spans need): a lower bound only, never returned. With PortSlots, whether a
/// partition fits is not monotone in T: the bisection may stop above a T at which
/// one does, and nothing found at the incumbent's bound does not prove that nothing
/// fits below it.
std::optional<CutPartition> oneFOneBMinPeriod(const StageModel &model, int maxStages,
                                              const CutPartition &minMax, double upperBoundMs,
                                              bool minMaxFits, TransferModel transfers);

/// True when no transfer takes time (infinite bandwidth, no latency on both link
/// classes): the min-max DPs are then exact for 1F1B.
bool linksAreFree(const Platform &platform);

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
