// The discrete-event simulator: replays any allocation + schedule (per-GPU action
// order, operations start as soon as their inputs have arrived and their GPU is free,
// transfers serialised on full-duplex per-GPU send/receive ports). It is the single
// source of period, iteration time, bubble fraction and per-GPU peak memory.
#ifndef PARTITIONER_SIMULATOR_H
#define PARTITIONER_SIMULATOR_H

#include "partitioner/Allocation.h"
#include "partitioner/Schedule.h"

#include <string>
#include <vector>

#include "partitioner/Planner.h"

namespace partitioner {





/// Replays one schedule. A schedule that cannot complete yields completed = false and
/// an error naming the blocked GPU and action.
SimulationResult simulate(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule);
/// The same with the allocation's stage graph given (buildStageGraph(problem, allocation)).
/// Without `withMemory`, the timeline and times only: memory and stageInFlight stay
/// empty (the 2m-micro-batch run that measures the period needs no memory).
SimulationResult simulate(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule, const StageGraph &graph,
                          bool withMemory = true);

/// Sets each GPU's messageBytes (GpuMemory) from the simulated timeline: what
/// simulate() does itself only when the problem charges them
/// (TrainingSettings::messagesFromTimeline).
void recordMessagePeaks(const StageGraph &graph, bool splitBackward, SimulationResult &result);

/// Per-GPU order of a 1F1B-like schedule built by list scheduling: each stage runs its
/// next backward as soon as it can, else its next forward if fewer than caps[s]
/// micro-batches are alive on it (1F1B with flush: caps = min(S - s, m)), else (B/W
/// split) a deferred weight-gradient. Same memory bound as the textbook 1F1B order, no
/// stalls when stages have unequal F/B ratios.
Schedule greedySchedule(const Problem &problem, const Allocation &allocation, ScheduleKind kind,
                        int microbatches, const std::vector<int> &caps);
Schedule greedySchedule(const Problem &problem, const Allocation &allocation,
                        const StageGraph &graph, ScheduleKind kind, int microbatches,
                        const std::vector<int> &caps);


/// Numbers the transfers of a stage graph for `microbatches` micro-batches: each
/// edge's activations and their gradients, per micro-batch (the port orders of the
/// simulator and of the checker).
class TransferIndex {
public:
  static constexpr size_t kNone = static_cast<size_t>(-1);
  TransferIndex(const StageGraph &graph, int microbatches);
  size_t size() const { return 2 * edges_ * static_cast<size_t>(microbatches_); }
  /// The number of `t`, or kNone when it names a stage, micro-batch or edge that the
  /// graph does not have (an edge runs from the lower stage to the higher).
  size_t of(const Transfer &t) const;
  /// The number of the transfer out of `stage` along its k-th successor edge
  /// (activations) or its k-th predecessor edge (gradients), for micro-batch mb.
  size_t along(int stage, size_t k, bool gradient, int mb) const {
    const size_t edge = gradient ? predecessorEdge_[static_cast<size_t>(stage)][k]
                                 : edgeBase_[static_cast<size_t>(stage)] + k;
    return ((gradient ? edges_ : 0) + edge) * static_cast<size_t>(microbatches_) +
           static_cast<size_t>(mb);
  }
  /// The number's edge (numbered in successor order) and whether it is a gradient.
  size_t edgeOf(size_t number) const {
    return number / static_cast<size_t>(microbatches_) % edges_;
  }
  bool isGradient(size_t number) const {
    return number / static_cast<size_t>(microbatches_) >= edges_;
  }
  size_t edges() const { return edges_; }
  /// The transfer a number names.
  Transfer at(size_t number) const;
  /// The bytes of the edge a number's transfer runs along.
  double bytesAlong(size_t number) const;

private:
  const StageGraph &graph_;
  int microbatches_;
  size_t edges_ = 0;
  std::vector<size_t> edgeBase_; ///< successors[s][k] is edge edgeBase_[s] + k
  std::vector<std::vector<size_t>> predecessorEdge_; ///< edge of predecessors[s][k]
  std::vector<int> lower_;       ///< each edge's lower stage
  /// The edge from `lower` to `upper`'s position in successors[lower], or kNone.
  size_t position(int lower, int upper) const;
  /// Edge number e (successor order).
  const StageGraph::Edge &edge(size_t e) const;
};

/// What is wrong with a schedule's port orders (Schedule::sendOrder / receiveOrder),
/// each line naming the port and the transfer, at most `limit` of them: one list per
/// GPU; each entry a transfer along an edge of the stage graph between two GPUs, on
/// its sender's send port or its receiver's receive port, listed once on each side.
/// With `holdsPorts` (the simulator, which knows the links), each entry must hold
/// ports and every transfer that does must be listed; without it (the checker), an
/// entry's tensors must have bytes. Shared by simulate() and checkSchedule().
std::vector<std::string> portOrderViolations(const StageGraph &graph, const Schedule &schedule,
                                             const TransferIndex &index, size_t limit,
                                             const std::vector<char> *holdsPorts = nullptr);

/// The dependency rules shared by the simulator and the checker: what an action waits
/// for (stage, micro-batch, kind of the producing action, bytes to transfer).
struct Dependency {
  Action producer;
  double bytes = 0; ///< 0 when on the same GPU or no data moves
};
std::vector<Dependency> dependenciesOf(const StageGraph &graph, const Action &action,
                                       bool splitBackward);

} // namespace partitioner

#endif
