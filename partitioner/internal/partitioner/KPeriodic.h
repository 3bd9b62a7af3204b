// k-periodic schedules of one stage per GPU (docs/partitioner.md, "k-periodic
// schedules"): each GPU runs its forwards and backwards in an order whose steady
// state repeats a word of k backwards and k forwards, so that k micro-batches may
// be treated differently inside one pattern. The search over every word under the
// memory limit, beside the best 1-periodic order, answers what 1-periodicity costs.
#ifndef PARTITIONER_KPERIODIC_H
#define PARTITIONER_KPERIODIC_H

#include "partitioner/Allocation.h"
#include "partitioner/Planner.h"

#include <string>
#include <vector>

namespace partitioner {

/// Micro-batches the order keeps alive at most (a forward makes one alive, its
/// backward frees it), or -1 when a backward comes with none alive.
int peakInFlight(const StageOrder &order);

/// Every order with a word of k 'B's and k 'F's (starting with 'B'), warm-up 1 ..
/// maxPeak, that keeps at most maxPeak alive. k = 1: "BF" with each warm-up.
std::vector<StageOrder> stageWords(int k, int maxPeak);

/// Per-GPU action lists of `orders` (one per stage, stage s on the allocation's GPU)
/// for `microbatches` micro-batches. Needs one stage per GPU.
Schedule wordSchedule(const Problem &problem, const Allocation &allocation,
                      const std::vector<StageOrder> &orders, int microbatches);

/// A k-periodic schedule and what it runs at.
struct WordScheduleResult {
  std::vector<StageOrder> orders;
  /// The marginal time of a micro-batch, (time(2m) - time(m)) / m, with m = 12 (a
  /// multiple of every k <= 4), as simulatePlan measures a period.
  double periodMs = kInfinity;
  /// Orders evaluated (simulated twice each).
  long long evaluated = 0;
  /// The search stopped at its limit of evaluations.
  bool stoppedAtLimit = false;
};

/// The period of `orders` under the problem's memory limit, or infinity when a
/// GPU overflows or the schedule does not complete.
double wordPeriod(const Problem &problem, const Allocation &allocation, const StageGraph &graph,
                  const std::vector<StageOrder> &orders);

/// An upper bound on the micro-batches each stage can keep alive within the memory
/// limit (at most S - s; 0 when not even one fits): its state, extra weight
/// versions and buffers plus that many copies of its saved bytes fit. Orders that
/// keep more cannot fit; those that keep fewer are checked by simulation.
std::vector<int> memoryCaps(const Problem &problem, const Allocation &allocation,
                            const StageGraph &graph);

/// The exhaustive limit `best` searches the orders of its chosen plan with, per k.
constexpr long long kBestWordScheduleLimit = 5000;
/// The allocations `best` searches orders of, at most.
constexpr size_t kKPeriodicCandidates = 3;
/// Simulated actions `best` spends on the search, in all: each evaluation
/// simulates S x (12 + 24) of them.
constexpr double kKPeriodicActionBudget = 2e6;

/// The best orders whose words have k 'B's and k 'F's per stage: every combination
/// when there are at most `exhaustiveLimit`, else a descent from the best
/// 1-periodic orders that changes one stage's order at a time while the period
/// shortens. k = 1 is the best 1-periodic order (by the same rule). At most
/// `maxEvaluations` orders are evaluated; the best so far is returned.
WordScheduleResult bestWordSchedule(const Problem &problem, const Allocation &allocation, int k,
                                    long long exhaustiveLimit = 200000,
                                    long long maxEvaluations = 1LL << 62);

} // namespace partitioner

#endif
