// Schedules as per-GPU ordered action lists (F, B, or B split into input/weight parts)
// and their generators: GPipe, 1F1B with flush, interleaved 1F1B, 1F1B with weight
// stashing, zero-bubble (ZB-H1 style) and the memory-constrained periodic schedule.
#ifndef PARTITIONER_SCHEDULE_H
#define PARTITIONER_SCHEDULE_H

#include "partitioner/Allocation.h"
#include "partitioner/Planner.h"

#include <optional>
#include <string>
#include <vector>

namespace partitioner {

// The action vocabulary, shared by plan.json (loweredActions) and the stage IR
// (pipe-schedule):
//   compute      "F3@s1" (forward of micro-batch 3 on stage 1), "B3@s1", "Bi3@s1", "W3@s1"
//   transfers    "SEND_F3@s1->s2" / "RECV_F3@s1->s2": the activations of micro-batch 3
//                from stage 1 to stage 2; "SEND_B3@s2->s1" / "RECV_B3@s2->s1": their
//                gradients back (the stage IR adds " tag=N": one entry per tensor)
//   after the last micro-batch   "REDUCE_TIED_GRADIENTS", "OPTIMIZER_STEP"

/// "F3@s1" (forward of micro-batch 3 on stage 1), "B", "Bi", "W".
std::string toString(const Action &action);

/// "SEND_F3@s1->s2", "RECV_B3@s2->s1": a transfer of micro-batch `microbatch` from
/// stage `from` to stage `to`, activations (forward) or gradients (backward).
std::string transferAction(bool send, bool gradient, int microbatch, int from, int to);

constexpr const char *kReduceTiedGradientsAction = "REDUCE_TIED_GRADIENTS";
constexpr const char *kOptimizerStepAction = "OPTIMIZER_STEP";





/// Offsets of the 1-periodic pattern at period T (docs/partitioner.md, "Schedules"):
/// F of stage s starts at forwardOffset[s] + i T for micro-batch i, its B at
/// backwardOffset[s] + i T.
/// Forwards run as soon as their inputs arrive; each backward is delayed until its
/// slot does not overlap the stage's forward slot modulo T. A transfer holds its
/// sender's send port and its receiver's receive port for its occupancy (bytes over
/// bandwidth; the latency follows), in the first slot free on both modulo T:
/// activations first, in stage order, then gradients from the last stage. Ports that
/// carry one transfer at a time then mostly keep the pattern's period; with
/// transfers as pure delays, the simulated 1F1B period of random DAGs on slow links
/// was up to 2.1 times the pattern's (test Links.GeneratedOrdersRunAtTheirPattern...).
struct PeriodicPattern {
  double periodMs = 0;
  std::vector<double> forwardOffset, backwardOffset;
  std::vector<int> inFlight; ///< ceil((B end - F start) / T) per stage
  /// Every transfer found a slot free on both its ports modulo T.
  bool portsFit = true;
  /// The transfers that hold ports, each with the start of its slot for micro-batch
  /// 0 (micro-batch i's starts i T later): the order generateSchedule gives the ports.
  struct SlottedTransfer {
    int fromStage = 0, toStage = 0;
    bool gradient = false;
    double startMs = 0;
  };
  std::vector<SlottedTransfer> transfers;
};
PeriodicPattern periodicPattern(const Problem &problem, const Allocation &allocation, double periodMs);
/// The same on the allocation's stage graph (buildStageGraph), built once by callers
/// that try many periods.
PeriodicPattern periodicPattern(const Problem &problem, const StageGraph &graph, double periodMs);

/// Smallest period a 1-periodic pattern of this allocation can have: the largest
/// per-GPU compute or port (send / receive) load per micro-batch.
double bottleneckPeriod(const Problem &problem, const Allocation &allocation);
double bottleneckPeriod(const Problem &problem, const StageGraph &graph);

/// The pattern a 1F1B order of one stage per GPU runs: the periodic pattern at the
/// bottleneck period, or at the smallest longer one (bisection, up to 64 times it) at
/// which every transfer has its port slot and stage s keeps at most S - s
/// micro-batches alive, and at most allocation.inFlightLimit[s] when the allocation
/// has a cap per stage (0 reads as 1). Nothing when no such period is found (the
/// generator then uses the textbook order).
std::optional<PeriodicPattern> oneFOneBPattern(const Problem &problem,
                                               const Allocation &allocation,
                                               const StageGraph &graph);

/// The generator behind makeSchedule (Planner.h), for the partitioner's own
/// code: throws Error when the kind does not apply to the allocation. Periodic
/// needs one stage per GPU; interleaved needs stage s on GPU s mod G. 1F1B,
/// 1F1B-stash and ZB-H1 on a general allocation (a GPU holding several stages) use
/// the list-scheduling order of greedySchedule with caps min(S - s, m). 1F1B (with
/// flush or stashing) orders each GPU's operations by the periodic pattern at the
/// bottleneck period (at most min(S - s, m) alive, fewer when stages are
/// unbalanced), slowed to the smallest period at which no stage keeps more than
/// that, nor more than allocation.inFlightLimit[s] when the allocation has one per
/// stage; it uses the textbook order (warm-up S - s - 1) when no period up to 64
/// times the bottleneck keeps within those. Periodic uses the pattern at allocation.targetPeriodMs. ZB-H1
/// uses the list-scheduling order of greedySchedule (Simulator.h).
Schedule generateSchedule(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                          int microbatches);
/// Which order 1F1B (flush or stash) on a general allocation took: the periodic
/// pattern or the list scheduler's; Choose when it is for the generator to decide.
enum class GeneralOrder { Choose, Pattern, List };

/// The same with the allocation's stage graph given (buildStageGraph(problem, allocation)).
/// Where the generator simulated the schedule it returns (to choose between two
/// orders), `simulated` receives that simulation. With `order`, 1F1B on a general
/// allocation takes the order it names (the pattern when one exists, else the list
/// scheduler's) instead of choosing, and it is set to the order taken.
Schedule generateSchedule(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                          const StageGraph &graph, int microbatches,
                          std::optional<SimulationResult> *simulated = nullptr,
                          GeneralOrder *order = nullptr);

/// Generates `kind` for the allocation (generateSchedule), simulates m micro-batches and
/// measures the period as the marginal cost of micro-batches: (time(2m) - time(m)) / m.
/// On a general allocation, the order chosen for m micro-batches (pattern or list)
/// is the one generated for 2m, so that the period is that of one kind of order.
SimulationResult simulatePlan(const Problem &problem, const Allocation &allocation,
                              ScheduleKind kind, Schedule *scheduleOut = nullptr);
/// The same on the allocation's stage graph (buildStageGraph), built once by callers
/// that also check the plan.
SimulationResult simulatePlan(const Problem &problem, const Allocation &allocation,
                              const StageGraph &graph, ScheduleKind kind,
                              Schedule *scheduleOut = nullptr);
/// The first half of simulatePlan: m micro-batches only, so its iteration time,
/// memory and completion are simulatePlan's, and its periodMs is not measured (0).
/// Half the work for a search that judges iteration times.
SimulationResult simulateIteration(const Problem &problem, const Allocation &allocation,
                                   ScheduleKind kind);

} // namespace partitioner

#endif
