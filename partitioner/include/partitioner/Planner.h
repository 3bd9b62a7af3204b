// The entry point: plan(problem, options) runs the requested algorithms (or every
// applicable one for `best`), schedules and simulates each allocation, and keeps the
// best valid plan whose schedule passes the checker: smallest period (or iteration
// time, by the objective), then the other of the two, bytes crossing stages and
// memory headroom.
#ifndef PARTITIONER_PLANNER_H
#define PARTITIONER_PLANNER_H

#include "partitioner/Algorithm.h"
#include "partitioner/Bounds.h"
#include "partitioner/Checker.h"
#include "partitioner/Simulator.h"

#include <functional>
#include <string>
#include <vector>

namespace partitioner {

struct PlanResult;

/// What `best` minimises first.
enum class Objective {
  Period,        ///< the steady-state period (throughput of an endless pipeline)
  IterationTime, ///< one iteration of m micro-batches, fill and drain included
};
std::string toString(Objective objective);
/// "period" or "iteration"; throws Error otherwise.
Objective parseObjective(const std::string &text);

struct PlanOptions {
  /// Algorithm names, or {"best"} for every algorithm whose partOfBest() is true.
  std::vector<std::string> algorithms{"best"};
  /// Use DAG-aware cuts (all downsets) when the graph has at most this many.
  size_t maxDownsets = 20000;
  bool dagAware = true;
  /// Only plans of the problem's own schedule family compete for the best (a
  /// user who asked for 1F1B does not get an interleaved plan). The others are
  /// still run and reported.
  bool requireSchedule = false;
  /// Time limit of each of the `ilp` and `ilp-general` algorithms (wall clock, from
  /// the algorithm's start: warm start, model building and CBC together).
  double ilpTimeLimitSeconds = 10;
  Objective objective = Objective::Period;
  /// Called with each algorithm's result as soon as it is evaluated (progress).
  std::function<void(const PlanResult &)> onResult;
};

struct StageMetrics {
  int gpu = 0;
  std::vector<int> layers;
  double forwardMs = 0, backwardMs = 0, computeMs = 0;
  double inBytes = 0, outBytes = 0;
  int inFlight = 0;
};

struct GpuMetrics {
  double memoryBytes = 0, memoryLimitBytes = 0;
  GpuMemory breakdown;
};

struct PlanResult {
  std::string algorithm;
  bool valid = false;  ///< an allocation exists, its schedule checks, and it fits
  std::string reason;  ///< why not valid
  std::string notes;
  ScheduleKind scheduleKind = ScheduleKind::OneFOneB;
  Allocation allocation;
  Schedule schedule;
  SimulationResult simulation;
  std::vector<StageMetrics> stages;
  std::vector<GpuMetrics> gpus;
  double periodMs = kInfinity, iterationMs = kInfinity, bubbleFraction = 0;
  double predictedPeriodMs = kInfinity;
  double lowerBoundMs = 0, gap = kInfinity; ///< gap = period / lower bound - 1
  double crossingBytes = 0;
  double maxMemoryFraction = 0; ///< max over GPUs of peak / limit
  double plannerSeconds = 0;
};

struct PlanningReport {
  std::string problemName;
  LowerBounds bounds;
  std::vector<PlanResult> results;
  Objective objective = Objective::Period;
  int chosen = -1; ///< index into results, -1 when nothing is valid
  /// The result `chosen` would be under the other objective (-1: none valid).
  int bestByOtherObjective = -1;
  const PlanResult *best() const {
    return chosen >= 0 ? &results[static_cast<size_t>(chosen)] : nullptr;
  }
};

/// One line saying why no plan is valid: madpipe's reason when it has one (it
/// names the stage, bytes and limit of the most memory-balanced split), else the
/// first algorithm's.
std::string noPlanReason(const PlanningReport &report);

/// Runs the algorithms; throws Error for unknown algorithm names.
PlanningReport plan(const Problem &problem, const PlanOptions &options = {});

/// Schedules, simulates and checks one allocation (what plan() does per algorithm).
PlanResult evaluateAllocation(const Problem &problem, const Allocation &allocation,
                              ScheduleKind kind, const LowerBounds &bounds);

/// True when `a` is a better plan than `b` (both valid): period then iteration time
/// (the other way round for Objective::IterationTime), crossing bytes, memory headroom.
bool betterPlan(const PlanResult &a, const PlanResult &b, Objective objective = Objective::Period);

/// Sets report.chosen (and bestByOtherObjective): candidates in order of preference
/// are checked again with checkSchedule; one that fails is marked invalid with a
/// note ("dropped: ...") and the next one wins. With options.requireSchedule only
/// plans of the problem's schedule family compete.
void chooseBest(const Problem &problem, PlanningReport &report, const PlanOptions &options);

/// Relabels the GPUs of `allocation` so that they are numbered in pipeline order of
/// their first stage (stage 0 on GPU 0, the next GPU to appear is GPU 1, ...), when
/// the GPUs are interchangeable (same speed, one node); otherwise returns it as is.
Allocation numberGpusInPipelineOrder(const Problem &problem, const Allocation &allocation);

} // namespace partitioner

#endif
