// plan(): run algorithms, schedule + simulate + check each allocation, keep the best.
#include "partitioner/Planner.h"
#include "partitioner/BoundaryMoves.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Linearize.h"
#include "partitioner/KPeriodic.h"
#include "partitioner/Parallel.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>

namespace partitioner {

namespace {
bool anyTrue(const std::vector<bool> &flags) {
  return std::find(flags.begin(), flags.end(), true) != flags.end();
}

bool nearlyEqual(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}
} // namespace

std::string toString(Objective objective) {
  return objective == Objective::Period ? "period" : "iteration";
}

Expected<Objective> parseObjective(const std::string &text) {
  if (text == "period")
    return Objective::Period;
  if (text == "iteration" || text == "iteration-time")
    return Objective::IterationTime;
  return Expected<Objective>::failure("unknown objective '" + text + "' (period, iteration)");
}

bool betterPlan(const PlanResult &a, const PlanResult &b, Objective objective) {
  const double aFirst = objective == Objective::Period ? a.periodMs : a.iterationMs;
  const double bFirst = objective == Objective::Period ? b.periodMs : b.iterationMs;
  const double aSecond = objective == Objective::Period ? a.iterationMs : a.periodMs;
  const double bSecond = objective == Objective::Period ? b.iterationMs : b.periodMs;
  if (!nearlyEqual(aFirst, bFirst))
    return aFirst < bFirst;
  if (!nearlyEqual(aSecond, bSecond))
    return aSecond < bSecond;
  if (!nearlyEqual(a.crossingBytes, b.crossingBytes))
    return a.crossingBytes < b.crossingBytes;
  return a.maxMemoryFraction < b.maxMemoryFraction;
}

Allocation numberGpusInPipelineOrder(const Problem &problem, const Allocation &allocation) {
  const Platform &platform = problem.platform;
  const bool interchangeable =
      platform.gpus <= platform.gpusPerNode &&
      std::all_of(platform.speed.begin(), platform.speed.end(),
                  [&](double speed) { return speed == platform.speed.front(); });
  if (!interchangeable)
    return allocation;
  std::vector<int> label(static_cast<size_t>(platform.gpus), -1);
  int next = 0;
  // Stages are numbered in pipeline order, so the first stage of a GPU is the
  // first time it appears in gpuOfStage.
  for (int gpu : allocation.gpuOfStage)
    if (gpu >= 0 && gpu < platform.gpus && label[static_cast<size_t>(gpu)] < 0)
      label[static_cast<size_t>(gpu)] = next++;
  for (int &l : label)
    if (l < 0)
      l = next++;
  Allocation relabelled = allocation;
  for (int &gpu : relabelled.gpuOfStage)
    if (gpu >= 0 && gpu < platform.gpus)
      gpu = label[static_cast<size_t>(gpu)];
  return relabelled;
}

PlanResult evaluateOrThrow(const Problem &problem, const Allocation &input, ScheduleKind kind,
                           const LowerBounds &bounds) {
  PlanResult result;
  result.scheduleKind = kind;
  Allocation allocation = numberGpusInPipelineOrder(problem, input);
  // No stage recomputes: the flags are left empty (one spelling of "none").
  if (!anyTrue(allocation.recompute))
    allocation.recompute.clear();
  result.allocation = allocation;
  result.lowerBoundMs = bounds.bestMs;
  StageGraph graph; // built once: the simulation and both checks read it
  try {
    validateAllocation(problem, allocation);
    graph = buildStageGraph(problem, allocation);
    result.simulation = simulatePlan(problem, allocation, graph, kind, &result.schedule);
  } catch (const Error &error) {
    result.reason = error.what();
    return result;
  }
  if (!result.simulation.completed) {
    result.reason = result.simulation.error;
    return result;
  }
  for (int s = 0; s < graph.numStages; ++s) {
    StageMetrics stage;
    const size_t i = static_cast<size_t>(s);
    stage.gpu = graph.gpu[i];
    stage.layers = graph.layers[i];
    stage.forwardMs = graph.forwardMs[i];
    stage.backwardMs = graph.backwardMs[i];
    stage.recompute = graph.recompute[i];
    stage.computeMs = stage.forwardMs + stage.backwardMs;
    stage.inBytes = graph.inBytes[i];
    stage.outBytes = graph.outBytes[i];
    stage.inFlight = result.simulation.stageInFlight[i];
    result.stages.push_back(stage);
  }
  result.crossingBytes = crossingBytes(graph);
  result.periodMs = result.simulation.periodMs;
  result.iterationMs = result.simulation.iterationMs;
  result.bubbleFraction = result.simulation.bubbleFraction;
  result.gap = bounds.bestMs > 0 ? result.periodMs / bounds.bestMs - 1 : 0;
  const double limit = problem.platform.memoryBytesPerGpu;
  std::string overflow;
  for (int g = 0; g < problem.platform.gpus; ++g) {
    GpuMetrics metrics;
    metrics.breakdown = result.simulation.memory[static_cast<size_t>(g)];
    metrics.memoryBytes = metrics.breakdown.peakBytes;
    metrics.memoryLimitBytes = limit;
    result.maxMemoryFraction =
        std::max(result.maxMemoryFraction, limit < kInfinity ? metrics.memoryBytes / limit : 0.0);
    if (metrics.memoryBytes > limit * (1 + 1e-12) &&
        metrics.memoryBytes / limit >= result.maxMemoryFraction) {
      std::ostringstream out;
      out << "infeasible: GPU " << g << " (stage";
      for (int s = 0; s < graph.numStages; ++s)
        if (graph.gpu[static_cast<size_t>(s)] == g)
          out << " " << s;
      out << ") needs " << formatBytes(metrics.memoryBytes, problem.platform.byteUnits)
          << ", limit " << formatBytes(limit, problem.platform.byteUnits);
      overflow = out.str();
    }
    result.gpus.push_back(metrics);
  }
  CheckReport check = checkSchedule(graph, result.schedule);
  CheckReport timing = checkTimeline(problem, graph, result.schedule, result.simulation.timeline);
  for (const auto &v : timing.violations)
    check.violations.push_back(v);
  if (!check.ok()) {
    result.reason = "schedule check failed: " + check.violations.front();
    return result;
  }
  if (!overflow.empty()) {
    result.reason = overflow;
    return result;
  }
  result.valid = true;
  return result;
}

namespace {
/// GPUs whose simulated peak exceeds the limit (none when the simulation failed).
std::vector<bool> overflowingGpus(const Problem &problem, const PlanResult &result) {
  std::vector<bool> over(static_cast<size_t>(problem.platform.gpus), false);
  if (!result.simulation.completed)
    return over;
  const double limit = problem.platform.memoryBytesPerGpu;
  for (size_t g = 0; g < result.gpus.size(); ++g)
    over[g] = result.gpus[g].memoryBytes > limit * (1 + 1e-12);
  return over;
}
} // namespace

PlanResult evaluateUnderPolicyOrThrow(const Problem &problem, const Allocation &input,
                                      ScheduleKind kind, const LowerBounds &bounds) {
  const RecomputePolicy policy = problem.training.recompute;
  Allocation allocation = input;
  const size_t stages = static_cast<size_t>(allocation.numStages());
  if (policy == RecomputePolicy::None)
    return evaluateOrThrow(problem, allocation, kind, bounds);
  if (policy == RecomputePolicy::All) {
    allocation.recompute.assign(stages, true);
    return evaluateOrThrow(problem, allocation, kind, bounds);
  }
  if (allocation.recompute.size() != stages)
    allocation.recompute.assign(stages, false);
  PlanResult result = evaluateOrThrow(problem, allocation, kind, bounds);
  const bool overflowed = anyTrue(overflowingGpus(problem, result));
  // Mark stages on overflowing GPUs, the largest saving (in flight x (saved -
  // checkpoint)) first.
  for (;;) {
    const std::vector<bool> over = overflowingGpus(problem, result);
    if (result.valid || !anyTrue(over))
      break;
    const StageGraph graph = buildStageGraph(problem, allocation);
    int pick = -1;
    double bestSaving = 0;
    for (size_t s = 0; s < stages; ++s) {
      if (allocation.recompute[s] || !over[static_cast<size_t>(graph.gpu[s])])
        continue;
      const double saving = result.simulation.stageInFlight[s] *
                            (graph.savedBytes[s] - graph.checkpointBytes(static_cast<int>(s)));
      if (saving > bestSaving) {
        bestSaving = saving;
        pick = static_cast<int>(s);
      }
    }
    if (pick < 0)
      break;
    allocation.recompute[static_cast<size_t>(pick)] = true;
    result = evaluateOrThrow(problem, allocation, kind, bounds);
  }
  // Marking one stage at a time can stop short of a plan (or reach a slower one)
  // that recomputing every stage finds: the better of the two is kept.
  if (overflowed && !std::all_of(allocation.recompute.begin(), allocation.recompute.end(),
                                 [](bool flag) { return flag; })) {
    Allocation everywhere = allocation;
    everywhere.recompute.assign(stages, true);
    PlanResult candidate = evaluateOrThrow(problem, everywhere, kind, bounds);
    if (candidate.valid && (!result.valid || candidate.periodMs < result.periodMs * (1 - 1e-9))) {
      allocation = everywhere;
      result = std::move(candidate);
    }
  }
  if (!result.valid)
    return result;
  // Clear the marks that are not needed (the DPs mark by the position rule, which
  // can keep more micro-batches than the schedule does).
  for (size_t s = 0; s < stages; ++s) {
    if (!allocation.recompute[s])
      continue;
    Allocation trial = allocation;
    trial.recompute[s] = false;
    PlanResult candidate = evaluateOrThrow(problem, trial, kind, bounds);
    if (candidate.valid && candidate.periodMs <= result.periodMs * (1 + 1e-9)) {
      allocation = trial;
      result = std::move(candidate);
    }
  }
  return result;
}

/// A plan that `best`'s last steps improved from the chosen one, begun at `start`:
/// joins the results (timed, reported to onResult) and may be chosen.
static void addImprovedResult(const Problem &problem, PlanningReport &report,
                              const PlanOptions &options, PlanResult improved,
                              std::chrono::steady_clock::time_point start) {
  improved.plannerSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.results.push_back(std::move(improved));
  if (options.onResult)
    options.onResult(report.results.back());
  chooseBest(problem, report, options);
}

/// `best`'s last step: the chosen plan, when its schedule runs several stages per
/// GPU, with blocks of layers moved to other GPUs (improveByBlockMovesOrThrow, within
/// kBestBlockMoveBudget), then one-layer boundary moves.
/// A strictly better plan joins the results as `block-moves` and may be chosen.
static void addBlockMovesOfChosen(const Problem &problem, PlanningReport &report,
                                  const PlanOptions &options) {
  const PlanResult &chosen = report.results[static_cast<size_t>(report.chosen)];
  switch (chosen.scheduleKind) {
  case ScheduleKind::OneFOneB:
  case ScheduleKind::OneFOneBStash:
  case ScheduleKind::ZeroBubble:
  case ScheduleKind::GPipe:
    break;
  default:
    return;
  }
  if (problem.platform.gpus < 2)
    return;
  const auto start = std::chrono::steady_clock::now();
  BlockMoveStats stats;
  PlanResult moved = improveByBlockMovesOrThrow(problem, chosen, report.bounds, options.objective,
                                                kBestBlockMoveBudget, &stats, options.threads);
  if (stats.movesKept == 0)
    return;
  if (options.improveByBoundaryMoves)
    moved = improveByBoundaryMovesOrThrow(problem, moved, report.bounds, options.objective,
                                          nullptr, options.threads);
  moved.algorithm = "block-moves";
  moved.notes = "from " + chosen.algorithm + "'s " +
                describeBlockMoves(chosen, moved, stats, options.objective);
  moved.predictedPeriodMs = bottleneckPeriod(problem, moved.allocation);
  addImprovedResult(problem, report, options, std::move(moved), start);
}

/// k-periodic orders (bestWordSchedule, k = 2..4) of the 1F1B plans with one stage
/// per GPU whose memory keeps some stage below 1F1B's counts: the chosen plan and
/// the allocations other algorithms made (a split that does not fit under 1F1B's
/// counts may fit with fewer), those whose bottleneck is below the chosen period,
/// at most kKPeriodicCandidates of them, lowest bottleneck first. The best that is
/// strictly better than the chosen plan joins the results as `k-periodic`.
static void addKPeriodicOrders(const Problem &problem, PlanningReport &report,
                               const PlanOptions &options) {
  const auto start = std::chrono::steady_clock::now();
  const PlanResult chosen = report.results[static_cast<size_t>(report.chosen)];
  const double target =
      options.objective == Objective::Period ? chosen.periodMs : chosen.iterationMs;
  std::vector<std::pair<double, const PlanResult *>> candidates;
  for (const PlanResult &result : report.results) {
    const Allocation &allocation = result.allocation;
    if ((result.scheduleKind != ScheduleKind::OneFOneB &&
         result.scheduleKind != ScheduleKind::OneFOneBStash) ||
        allocation.numStages() < 2 || !allocation.oneStagePerGpu() ||
        !allocation.stageOrders.empty() ||
        allocation.stageOfLayer.size() != problem.layers.size())
      continue;
    const double bottleneck = bottleneckPeriod(problem, allocation);
    if (bottleneck >= chosen.periodMs * (1 - 1e-9))
      continue; // no order of it can beat the chosen period
    bool seen = false;
    for (const auto &candidate : candidates)
      seen |= candidate.second->allocation.stageOfLayer == allocation.stageOfLayer &&
              candidate.second->allocation.gpuOfStage == allocation.gpuOfStage;
    if (!seen)
      candidates.push_back({bottleneck, &result});
  }
  std::sort(candidates.begin(), candidates.end(),
            [](const auto &a, const auto &b) { return a.first < b.first; });
  if (candidates.size() > kKPeriodicCandidates)
    candidates.resize(kKPeriodicCandidates);
  // The candidates whose memory keeps a stage below 1F1B's counts; each of them
  // and each k gets an equal share of the budget, and the searches run on threads
  // (independent, and reduced below in the same order as one after the other).
  std::vector<const PlanResult *> binding;
  for (const auto &candidate : candidates) {
    const PlanResult &base = *candidate.second;
    const int stages = base.allocation.numStages();
    const std::vector<int> caps =
        memoryCaps(problem, base.allocation, buildStageGraph(problem, base.allocation));
    bool binds = false;
    for (int s = 0; s < stages; ++s)
      binds |= caps[static_cast<size_t>(s)] < std::min(stages - s, problem.training.microbatches);
    if (binds)
      binding.push_back(&base);
  }
  constexpr int kFirstK = 2, kLastK = 4, kCount = kLastK - kFirstK + 1;
  const std::vector<WordScheduleResult> searched = mapOnThreads<WordScheduleResult>(
      binding.size() * kCount, options.threads, [&](size_t job) {
        const Allocation &allocation = binding[job / kCount]->allocation;
        const long long evaluations = static_cast<long long>(
            kKPeriodicActionBudget /
            (3.0 * static_cast<double>(candidates.size()) * allocation.numStages() * 36));
        return bestWordSchedule(problem, allocation, kFirstK + static_cast<int>(job % kCount),
                                kBestWordScheduleLimit, evaluations);
      });
  std::optional<PlanResult> best;
  std::string from;
  for (size_t c = 0; c < binding.size(); ++c) {
    const PlanResult &base = *binding[c];
    WordScheduleResult orders;
    for (size_t k = 0; k < kCount; ++k)
      if (searched[c * kCount + k].periodMs < orders.periodMs)
        orders = searched[c * kCount + k];
    if (orders.orders.empty())
      continue;
    Allocation allocation = base.allocation;
    allocation.stageOrders = orders.orders;
    allocation.inFlightLimit.clear();
    PlanResult ordered = evaluateOrThrow(problem, allocation, base.scheduleKind, report.bounds);
    const double value =
        options.objective == Objective::Period ? ordered.periodMs : ordered.iterationMs;
    if (ordered.valid && value < target * (1 - 1e-9) &&
        (!best || betterPlan(ordered, *best, options.objective))) {
      best = std::move(ordered);
      from = base.algorithm;
    }
  }
  if (!best)
    return;
  PlanResult ordered = std::move(*best);
  if (options.improveByBoundaryMoves)
    ordered = improveByBoundaryMovesOrThrow(problem, ordered, report.bounds, options.objective,
                                            nullptr, options.threads);
  const bool period = options.objective == Objective::Period;
  std::ostringstream note;
  note.precision(2);
  note << std::fixed << "the split of " << from << " in orders";
  for (const StageOrder &order : ordered.allocation.stageOrders)
    note << " " << toString(order);
  note << " (" << (period ? "period " : "iteration ") << "of " << chosen.algorithm << "'s plan "
       << target << " -> " << (period ? ordered.periodMs : ordered.iterationMs) << " ms)";
  ordered.algorithm = "k-periodic";
  ordered.notes = note.str();
  ordered.predictedPeriodMs = kInfinity;
  addImprovedResult(problem, report, options, std::move(ordered), start);
}

std::string noPlanReason(const PlanningReport &report) {
  std::string reason = "no valid plan";
  for (const PlanResult &r : report.results)
    if (!r.reason.empty()) {
      reason = r.algorithm + ": " + r.reason;
      if (r.algorithm == "madpipe")
        break;
    }
  return reason;
}

/// The bound over every general allocation, up to the chosen period: it raises the
/// report's bound and every plan's bound and gap.
static void addGeneralAllocationBound(const Problem &problem, PlanningReport &report, double seconds) {
  LowerBounds &bounds = report.bounds;
  const double chosenMs = report.results[static_cast<size_t>(report.chosen)].periodMs;
  const GeneralAllocationBound general =
      generalAllocationBound(problem, bounds.bestMs, chosenMs, seconds);
  bounds.generalNotes = general.notes;
  bounds.generalSeconds = general.seconds;
  if (general.periodMs <= bounds.bestMs)
    return;
  bounds.generalMs = general.periodMs;
  bounds.bestMs = general.periodMs;
  for (PlanResult &result : report.results) {
    result.lowerBoundMs = std::max(result.lowerBoundMs, bounds.bestMs);
    if (result.periodMs < kInfinity)
      result.gap = result.periodMs / result.lowerBoundMs - 1;
  }
}

PlanningReport planOrThrow(const Problem &input, const PlanOptions &options) {
  Problem problem = input;
  orThrow(problem.finalize());
  topologicalOrder(problem); // throws on cycles, naming them
  PlanningReport report;
  report.problemName = problem.name;
  report.bounds = computeLowerBounds(problem);

  std::vector<const Algorithm *> algorithms;
  for (const std::string &name : options.algorithms) {
    if (name == "best" || name == "all") {
      for (const auto &algorithm : algorithmRegistry())
        if (name == "all" || algorithm->partOfBest())
          if (std::find(algorithms.begin(), algorithms.end(), algorithm.get()) == algorithms.end())
            algorithms.push_back(algorithm.get());
      continue;
    }
    const Algorithm *algorithm = findAlgorithm(name);
    if (!algorithm) {
      std::string known;
      for (const auto &a : algorithmRegistry())
        known += (known.empty() ? "" : ", ") + a->name();
      throw Error("unknown algorithm '" + name + "' (known: " + known + ", best)");
    }
    if (std::find(algorithms.begin(), algorithms.end(), algorithm) == algorithms.end())
      algorithms.push_back(algorithm);
  }

  IdealLatticeCache ideals(problem); // the DAG's downsets, enumerated once
  const AlgorithmContext context{options, report.bounds, &ideals};
  // Per algorithm, the plans of its other models that the boundary moves start from too.
  std::vector<std::vector<AlternativePlan>> alternatives(algorithms.size());
  auto runAlgorithm = [&](size_t index) {
    const Algorithm *algorithm = algorithms[index];
    const auto start = std::chrono::steady_clock::now();
    AlgorithmOutput output;
    try {
      output = algorithm->run(problem, context);
    } catch (const Error &error) {
      output.reason = error.what();
    }
    alternatives[index] = std::move(output.alternatives);
    const double algorithmSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    PlanResult result;
    if (output.allocation) {
      result = evaluateUnderPolicyOrThrow(problem, *output.allocation,
                                          output.schedule.value_or(problem.training.schedule),
                                          report.bounds);
    } else {
      result.reason = output.reason.empty() ? "no allocation" : output.reason;
      result.scheduleKind = output.schedule.value_or(problem.training.schedule);
      result.lowerBoundMs = report.bounds.bestMs;
    }
    if (output.provenLowerBoundMs > report.bounds.bestMs) {
      // A bound proven for this algorithm's own model (ilp): its gap is measured to it.
      result.lowerBoundMs = output.provenLowerBoundMs;
      if (result.periodMs < kInfinity)
        result.gap = result.periodMs / result.lowerBoundMs - 1;
    }
    result.algorithm = algorithm->name();
    result.notes = output.notes;
    result.predictedPeriodMs = output.predictedPeriodMs;
    result.plannerSeconds = algorithmSeconds;
    return result;
  };
  // Each algorithm on a thread of its own (up to options.threads); onResult sees
  // the results on this thread, in the algorithms' order, as soon as they are done.
  for (PlanResult &result : mapOnThreads<PlanResult>(
           algorithms.size(), options.threads,
           [&](size_t i) { return runAlgorithm(i); },
           [&](size_t, const PlanResult &result) {
             if (options.onResult)
               options.onResult(result);
           }))
    report.results.push_back(std::move(result));
  chooseBest(problem, report, options);
  if (options.improveByBoundaryMoves && report.chosen >= 0) {
    // The best plan by each objective is improved under the user's objective:
    // the runner-up by the objective may be the one the moves lift above the
    // winner (an interleaved plan best by iteration can win by period too).
    std::vector<int> candidates = {report.chosen};
    if (report.bestByOtherObjective >= 0 && report.bestByOtherObjective != report.chosen)
      candidates.push_back(report.bestByOtherObjective);
    bool moved = false;
    for (int index : candidates) {
      PlanResult &plan = report.results[static_cast<size_t>(index)];
      BoundaryMoveStats stats;
      PlanResult improved =
          improveByBoundaryMovesOrThrow(problem, plan, report.bounds, options.objective, &stats,
                                        options.threads);
      // The moves from the algorithm's other plans: the one that ends best is kept.
      std::string startNote;
      for (const AlternativePlan &alternative : alternatives[static_cast<size_t>(index)]) {
        PlanResult other = evaluateUnderPolicyOrThrow(problem, alternative.allocation,
                                                      plan.scheduleKind, report.bounds);
        if (!other.valid)
          continue;
        other.algorithm = plan.algorithm;
        other.notes = alternative.notes;
        other.predictedPeriodMs = alternative.predictedPeriodMs;
        other.plannerSeconds = plan.plannerSeconds;
        BoundaryMoveStats otherStats;
        PlanResult otherImproved = improveByBoundaryMovesOrThrow(
            problem, other, report.bounds, options.objective, &otherStats, options.threads);
        if (objectiveValue(otherImproved, options.objective) <
            objectiveValue(improved, options.objective) * (1 - 1e-9)) {
          std::ostringstream note;
          note.precision(2);
          note << std::fixed << "; the plan of its " << alternative.model << " (its own plan's "
               << "moves end at " << objectiveValue(improved, options.objective) << " ms)";
          startNote = note.str();
          plan = std::move(other);
          improved = std::move(otherImproved);
          stats = otherStats;
          moved = true; // the algorithm's result changed
        }
      }
      plan.notes += startNote;
      improved.notes += startNote;
      if (stats.movesKept == 0)
        continue;
      const bool period = options.objective == Objective::Period;
      std::ostringstream note;
      note.precision(2);
      note << std::fixed << (plan.notes.empty() ? "" : "; ") << "then " << stats.movesKept
           << " one-layer boundary move" << (stats.movesKept == 1 ? "" : "s") << " ("
           << (period ? "period " : "iteration ") << (period ? plan.periodMs : plan.iterationMs)
           << " -> " << (period ? improved.periodMs : improved.iterationMs) << " ms"
           << (stats.stoppedAtLimit ? ", stopped at the limit of moves" : "") << ")";
      improved.notes += note.str();
      improved.predictedPeriodMs = plan.predictedPeriodMs;
      improved.periodBeforeMovesMs =
          plan.periodBeforeMovesMs < kInfinity ? plan.periodBeforeMovesMs : plan.periodMs;
      plan = std::move(improved);
      moved = true;
    }
    // An improved plan is better than before, so the winner may now be the
    // other candidate, and the best plan by the other objective may change.
    if (moved)
      chooseBest(problem, report, options);
  }
  const bool askedForBest =
      std::any_of(options.algorithms.begin(), options.algorithms.end(),
                  [](const std::string &name) { return name == "best" || name == "all"; });
  if (options.improveByBlockMoves && askedForBest && report.chosen >= 0)
    addBlockMovesOfChosen(problem, report, options);
  if (options.improveByKPeriodicOrders && askedForBest && report.chosen >= 0)
    addKPeriodicOrders(problem, report, options);
  if (options.generalBoundSeconds > 0 && report.chosen >= 0)
    addGeneralAllocationBound(problem, report, options.generalBoundSeconds);
  // What the report and the plan JSON show of the plans: the chosen ones.
  for (int chosen : {report.chosen, report.bestByOtherObjective})
    if (chosen >= 0)
      recordMessages(problem, report.results[static_cast<size_t>(chosen)]);
  return report;
}

void recordMessages(const Problem &problem, PlanResult &result) {
  if (!problem.training.communicationBuffers || problem.training.messagesFromTimeline ||
      !result.simulation.completed || result.allocation.numStages() == 0)
    return;
  recordMessagePeaks(buildStageGraph(problem, result.allocation), result.schedule.splitBackward,
                     result.simulation);
  for (size_t g = 0; g < result.gpus.size(); ++g)
    result.gpus[g].breakdown.messageBytes = result.simulation.memory[g].messageBytes;
}

void chooseBest(const Problem &problem, PlanningReport &report, const PlanOptions &options) {
  report.objective = options.objective;
  const Objective other =
      options.objective == Objective::Period ? Objective::IterationTime : Objective::Period;
  auto pick = [&](Objective objective) {
    int chosen = -1;
    for (size_t i = 0; i < report.results.size(); ++i) {
      const PlanResult &candidate = report.results[i];
      if (!candidate.valid)
        continue;
      if (options.requireSchedule && candidate.scheduleKind != problem.training.schedule)
        continue;
      if (chosen < 0 ||
          betterPlan(candidate, report.results[static_cast<size_t>(chosen)], objective))
        chosen = static_cast<int>(i);
    }
    return chosen;
  };
  // Never trust a candidate's `valid` alone: the winner is checked again, and
  // one that fails is dropped with the checker's reason.
  for (;;) {
    report.chosen = pick(options.objective);
    if (report.chosen < 0)
      break;
    PlanResult &candidate = report.results[static_cast<size_t>(report.chosen)];
    CheckReport check = checkSchedule(problem, candidate.allocation, candidate.schedule);
    if (check.ok())
      break;
    candidate.valid = false;
    candidate.reason = "dropped: its schedule fails the checker: " + check.violations.front();
  }
  report.bestByOtherObjective = pick(other);
}

Expected<PlanningReport> plan(const Problem &problem, const PlanOptions &options) {
  return catchErrors([&] { return planOrThrow(problem, options); });
}

Expected<PlanResult> evaluateAllocation(const Problem &problem, const Allocation &allocation,
                                        ScheduleKind kind, const LowerBounds &bounds) {
  return catchErrors([&] {
    validateAllocation(problem, allocation);
    PlanResult result = evaluateUnderPolicyOrThrow(problem, allocation, kind, bounds);
    recordMessages(problem, result);
    return result;
  });
}

void reuseFreedMemory() {
#if defined(__GLIBC__)
  constexpr int kLargestReused = 32 << 20; // glibc's own ceiling for the threshold
  mallopt(M_MMAP_THRESHOLD, kLargestReused);
  mallopt(M_TRIM_THRESHOLD, 8 * kLargestReused);
#endif
}

} // namespace partitioner
