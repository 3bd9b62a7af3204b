// Table, plan JSON, trace JSON and SVG writers.
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/LatticeDp.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <map>
#include <sstream>

namespace partitioner {

using nlohmann::json;

namespace {

std::string fixed(double value, int digits = 2) {
  if (value == kInfinity)
    return "inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

/// A time in ms: three decimals below 10 ms, where two would hide the differences
/// between plans of a small model.
std::string milliseconds(double value) { return fixed(value, value < 10 ? 3 : 2); }

/// A gap in percent; a period that meets its bound up to rounding shows 0.0,
/// not -0.0.
std::string percent(double gap) {
  double value = 100 * gap;
  return fixed(std::fabs(value) < 0.05 ? 0.0 : value, 1);
}

std::string layerRange(const Problem &problem, const std::vector<int> &layers) {
  if (layers.empty())
    return "-";
  const std::string &first = problem.layers[static_cast<size_t>(layers.front())].name;
  const std::string &last = problem.layers[static_cast<size_t>(layers.back())].name;
  std::string text = std::to_string(layers.size()) + " (" + first;
  if (layers.size() > 1)
    text += ".." + last;
  return text + ")";
}

double jsonNumber(double value) { return std::isfinite(value) ? value : -1; }

std::string objectiveText(const Problem &problem, Objective objective) {
  return objective == Objective::Period
             ? std::string("the steady-state period")
             : "the iteration time of m = " + std::to_string(problem.training.microbatches) +
                   " micro-batches";
}

} // namespace

std::string describeStages(const Problem &problem, const PlanResult &plan) {
  const int stages = plan.allocation.numStages(), gpus = problem.platform.gpus;
  const int used = plan.allocation.numGpusUsed();
  std::vector<int> perGpu(static_cast<size_t>(std::max(gpus, 1)), 0);
  for (int gpu : plan.allocation.gpuOfStage)
    if (gpu >= 0 && gpu < gpus)
      ++perGpu[static_cast<size_t>(gpu)];
  const int most = *std::max_element(perGpu.begin(), perGpu.end());
  std::ostringstream out;
  out << stages << (stages == 1 ? " stage" : " stages") << " on ";
  if (used == gpus)
    out << gpus << (gpus == 1 ? " GPU" : " GPUs");
  else
    out << used << " of the " << gpus << " GPUs (" << gpus - used << " idle)";
  if (most <= 1)
    out << ", one stage per GPU";
  else if (plan.scheduleKind == ScheduleKind::Interleaved)
    out << ", " << most << " virtual stages per GPU (interleaved)";
  else
    out << ", up to " << most << " stages per GPU (general allocation)";
  return out.str();
}

void writeTable(const Problem &problem, const PlanningReport &report, std::ostream &out,
                bool timings) {
  const PlanResult *best = report.best();
  const ByteUnits units = problem.platform.byteUnits;
  out << "problem: " << problem.name << " | " << problem.layers.size() << " layers, "
      << problem.platform.gpus << " GPUs x "
      << formatBytes(problem.platform.memoryBytesPerGpu, units)
      << ", m = " << problem.training.microbatches << ", schedule "
      << toString(problem.training.schedule) << "\n";
  out << "objective: " << objectiveText(problem, report.objective) << " ("
      << (report.objective == Objective::Period ? "--objective iteration" : "--objective period")
      << " for the other)\n";
  out << "lower bound: " << milliseconds(report.bounds.bestMs) << " ms (work/P "
      << milliseconds(report.bounds.workMs) << ", largest layer "
      << milliseconds(report.bounds.largestLayerMs) << ", memory "
      << milliseconds(report.bounds.memoryMs);
  if (report.bounds.generalMs > 0)
    out << ", every general allocation " << milliseconds(report.bounds.generalMs);
  out << ")\n";
  if (!report.bounds.generalNotes.empty()) {
    out << "general-allocation bound: " << report.bounds.generalNotes;
    if (timings) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, " in %.2f s", report.bounds.generalSeconds);
      out << seconds;
    }
    out << "\n";
  }
  if (report.bounds.memoryInfeasible)
    out << "memory: no plan can fit: " << report.bounds.memoryReason << "\n";
  out << "\n";
  if (best) {
    out << "chosen: " << best->algorithm << " (" << toString(best->scheduleKind) << ") by "
        << toString(report.objective) << ": " << describeStages(problem, *best);
    if (!best->notes.empty())
      out << "; " << best->notes;
    out << "\n";
    out << std::left << std::setw(6) << "stage" << std::setw(5) << "gpu" << std::setw(40)
        << "layers" << std::right << std::setw(11) << "time ms" << std::setw(8) << "inflt"
        << std::setw(22) << "memory / limit" << "\n";
    for (size_t s = 0; s < best->stages.size(); ++s) {
      const StageMetrics &stage = best->stages[s];
      const GpuMetrics &gpu = best->gpus[static_cast<size_t>(stage.gpu)];
      std::string range = layerRange(problem, stage.layers);
      if (range.size() > 38)
        range = range.substr(0, 35) + "...";
      out << std::left << std::setw(6) << s << std::setw(5) << stage.gpu << std::setw(40) << range
          << std::right << std::setw(11) << milliseconds(stage.computeMs) << std::setw(8)
          << stage.inFlight << std::setw(22)
          << (formatBytes(gpu.memoryBytes, units) + " / " +
              formatBytes(gpu.memoryLimitBytes, units))
          << "\n";
    }
    std::string recomputing;
    for (size_t s = 0; s < best->stages.size(); ++s)
      if (best->stages[s].recompute)
        recomputing += (recomputing.empty() ? "" : ", ") + std::to_string(s);
    if (!recomputing.empty())
      out << "recompute: stage" << (recomputing.find(',') == std::string::npos ? " " : "s ")
          << recomputing
          << " (keep only their inputs per micro-batch in flight; the backward runs the "
             "forward again, included in time ms)\n";
    std::string messages;
    for (size_t g = 0; g < best->gpus.size(); ++g) {
      const GpuMemory &memory = best->gpus[g].breakdown;
      if (memory.messageBytes > memory.bufferBytes * (1 + 1e-9))
        messages += (messages.empty() ? "GPU " : ", GPU ") + std::to_string(g) + " " +
                    formatBytes(memory.messageBytes, units) + " (reserved " +
                    formatBytes(memory.bufferBytes, units) + ")";
    }
    if (!messages.empty())
      out << "messages: along the simulated timeline a runtime whose sends never block holds "
             "more than the buffers reserved per cut tensor: "
          << messages
          << (problem.training.messagesFromTimeline ? "; the memory above charges them"
                                                    : "; not charged in the memory above")
          << "\n";
    out << "period " << milliseconds(best->periodMs)
        << " ms, iteration (m=" << problem.training.microbatches << ") "
        << milliseconds(best->iterationMs) << " ms, bubble " << fixed(100 * best->bubbleFraction, 1)
        << " %, gap to bound " << percent(best->gap) << " %\n";
    const Objective other =
        report.objective == Objective::Period ? Objective::IterationTime : Objective::Period;
    if (report.bestByOtherObjective >= 0 && report.bestByOtherObjective != report.chosen) {
      const PlanResult &alternative =
          report.results[static_cast<size_t>(report.bestByOtherObjective)];
      out << "best by " << toString(other) << ": " << alternative.algorithm << " ("
          << toString(alternative.scheduleKind) << "): period "
          << milliseconds(alternative.periodMs) << " ms, iteration "
          << milliseconds(alternative.iterationMs) << " ms\n";
    } else {
      out << "also the best by " << toString(other) << "\n";
    }
    out << "\n";
  } else {
    out << "no valid plan\n\n";
  }
  out << std::left << std::setw(13) << "algorithm" << std::setw(12) << "schedule" << std::right
      << std::setw(7) << "stages" << std::setw(11) << "period" << std::setw(12) << "iteration"
      << std::setw(8) << "bubble" << std::setw(8) << "gap" << std::setw(11) << "max mem"
      << (timings ? "   time s" : "") << "  status\n";
  for (size_t i = 0; i < report.results.size(); ++i) {
    const PlanResult &r = report.results[i];
    out << std::left << std::setw(13) << r.algorithm << std::setw(12) << toString(r.scheduleKind)
        << std::right << std::setw(7)
        << (r.stages.empty() ? std::string("-") : std::to_string(r.stages.size())) << std::setw(11)
        << (r.stages.empty() ? std::string("-") : milliseconds(r.periodMs)) << std::setw(12)
        << (r.stages.empty() ? std::string("-") : milliseconds(r.iterationMs)) << std::setw(8)
        << (r.stages.empty() ? std::string("-") : fixed(100 * r.bubbleFraction, 1) + "%")
        << std::setw(8) << (r.stages.empty() ? std::string("-") : percent(r.gap) + "%");
    double peak = 0;
    for (const auto &g : r.gpus)
      peak = std::max(peak, g.memoryBytes);
    out << std::setw(11) << (r.gpus.empty() ? std::string("-") : formatBytes(peak, units));
    if (timings)
      out << std::setw(9) << fixed(r.plannerSeconds, 3);
    std::string status = static_cast<int>(i) == report.chosen ? "best" : r.valid ? "ok" : r.reason;
    if (static_cast<int>(i) == report.bestByOtherObjective &&
        report.chosen != report.bestByOtherObjective)
      status += " (best by " +
                toString(report.objective == Objective::Period ? Objective::IterationTime
                                                               : Objective::Period) +
                ")";
    out << "  " << status << "\n";
  }
}

std::vector<std::vector<std::string>> loweredActions(const Problem &problem, const PlanResult &plan) {
  const StageGraph graph = buildStageGraph(problem, plan.allocation);
  std::vector<std::vector<std::string>> ranks(plan.schedule.actions.size());
  // Receives are placed right before the first action that needs them; sends right
  // after the action that produces them.
  for (size_t g = 0; g < plan.schedule.actions.size(); ++g)
    for (const Action &a : plan.schedule.actions[g]) {
      const int mb = a.microbatch;
      const size_t s = static_cast<size_t>(a.stage);
      auto remote = [&](const StageGraph::Edge &edge) {
        return graph.gpu[static_cast<size_t>(edge.stage)] != static_cast<int>(g);
      };
      if (a.kind == ActionKind::Forward) {
        for (const auto &edge : graph.predecessors[s])
          if (remote(edge))
            ranks[g].push_back(transferAction(false, false, mb, edge.stage, a.stage));
      } else if (a.kind != ActionKind::BackwardWeight) {
        for (const auto &edge : graph.successors[s])
          if (remote(edge))
            ranks[g].push_back(transferAction(false, true, mb, edge.stage, a.stage));
      }
      ranks[g].push_back(toString(a));
      if (a.kind == ActionKind::Forward) {
        for (const auto &edge : graph.successors[s])
          if (remote(edge))
            ranks[g].push_back(transferAction(true, false, mb, a.stage, edge.stage));
      } else if (a.kind != ActionKind::BackwardWeight) {
        for (const auto &edge : graph.predecessors[s])
          if (remote(edge))
            ranks[g].push_back(transferAction(true, true, mb, a.stage, edge.stage));
      }
    }
  for (auto &rank : ranks)
    if (!rank.empty())
      rank.push_back(kOptimizerStepAction);
  return ranks;
}

namespace {
json planJsonDocument(const Problem &problem, const PlanningReport &report, bool timings) {
  json document;
  json tried = json::array();
  for (const PlanResult &r : report.results) {
    json item;
    item["algorithm"] = r.algorithm;
    item["schedule"] = toString(r.scheduleKind);
    item["valid"] = r.valid;
    if (!r.reason.empty())
      item["reason"] = r.reason;
    if (!r.notes.empty())
      item["notes"] = r.notes;
    if (!r.stages.empty()) {
      item["stages"] = r.stages.size();
      item["period_ms"] = jsonNumber(r.periodMs);
      if (r.predictedPeriodMs < kInfinity)
        item["planned_period_ms"] = r.predictedPeriodMs;
      if (r.periodBeforeMovesMs < kInfinity)
        item["period_before_moves_ms"] = jsonNumber(r.periodBeforeMovesMs);
      item["iteration_ms"] = jsonNumber(r.iterationMs);
      item["bubble_fraction"] = r.bubbleFraction;
      item["gap"] = jsonNumber(r.gap);
      double peak = 0;
      for (const auto &g : r.gpus)
        peak = std::max(peak, g.memoryBytes);
      item["max_memory_bytes"] = peak;
    }
    if (timings)
      item["planner_seconds"] = r.plannerSeconds;
    tried.push_back(item);
  }
  document["schema_version"] = kPlanSchemaVersion;
  document["problem"] = problem.name;
  document["objective"] = toString(report.objective);
  document["lower_bounds_ms"] = {{"work", report.bounds.workMs},
                                 {"largest_layer", report.bounds.largestLayerMs},
                                 {"memory", report.bounds.memoryMs},
                                 {"best", report.bounds.bestMs}};
  if (report.bounds.generalMs > 0)
    document["lower_bounds_ms"]["general"] = report.bounds.generalMs;
  if (!report.bounds.generalNotes.empty()) {
    document["general_bound_notes"] = report.bounds.generalNotes;
    if (timings)
      document["general_bound_s"] = report.bounds.generalSeconds;
  }
  if (report.bounds.memoryInfeasible)
    document["memory_infeasible"] = report.bounds.memoryReason;
  document["tried"] = tried;
  const PlanResult *best = report.best();
  if (!best) {
    document["error"] = noPlanReason(report);
    return document;
  }
  document["algorithm"] = best->algorithm;
  document["schedule"] = toString(best->scheduleKind);
  document["microbatches"] = problem.training.microbatches;
  document["gpus"] = problem.platform.gpus;
  document["gpus_used"] = best->allocation.numGpusUsed();
  document["stages"] = best->stages.size();
  document["period_ms"] = best->periodMs;
  document["iteration_ms"] = best->iterationMs;
  document["bubble_fraction"] = best->bubbleFraction;
  document["lower_bound_ms"] = best->lowerBoundMs;
  document["gap"] = best->gap;
  document["crossing_bytes"] = best->crossingBytes;
  if (!best->notes.empty())
    document["notes"] = best->notes;
  if (report.bestByOtherObjective >= 0) {
    const PlanResult &other = report.results[static_cast<size_t>(report.bestByOtherObjective)];
    document[report.objective == Objective::Period ? "best_by_iteration" : "best_by_period"] = {
        {"algorithm", other.algorithm},
        {"schedule", toString(other.scheduleKind)},
        {"period_ms", other.periodMs},
        {"iteration_ms", other.iterationMs}};
  }
  json stageOf = json::object();
  for (size_t l = 0; l < problem.layers.size(); ++l)
    for (const std::string &node : problem.layers[l].nodeIds)
      stageOf[node] = best->allocation.stageOfLayer[l];
  document["stage_of"] = stageOf;
  document["gpu_of_stage"] = best->allocation.gpuOfStage;
  // What evaluateAllocation needs beyond the placement, so the plan replays exactly.
  std::vector<int> recomputeStages;
  for (int s = 0; s < best->allocation.numStages(); ++s)
    if (best->allocation.recomputes(s))
      recomputeStages.push_back(s);
  if (!best->allocation.inFlightLimit.empty() || best->allocation.targetPeriodMs > 0 ||
      !recomputeStages.empty() || !best->allocation.stageOrders.empty()) {
    json allocation = json::object();
    if (!best->allocation.stageOrders.empty()) {
      std::vector<std::string> orders;
      for (const StageOrder &order : best->allocation.stageOrders)
        orders.push_back(toString(order));
      allocation["stage_orders"] = orders;
    }
    if (!best->allocation.inFlightLimit.empty())
      allocation["in_flight_limit"] = best->allocation.inFlightLimit;
    if (best->allocation.targetPeriodMs > 0)
      allocation["target_period_ms"] = best->allocation.targetPeriodMs;
    if (!recomputeStages.empty())
      allocation["recompute_stages"] = recomputeStages;
    document["allocation"] = allocation;
  }
  json metrics = json::array();
  for (const StageMetrics &stage : best->stages) {
    const GpuMetrics &gpu = best->gpus[static_cast<size_t>(stage.gpu)];
    json item;
    item["gpu"] = stage.gpu;
    item["layers"] = stage.layers.size();
    item["time_ms"] = stage.computeMs;
    item["forward_ms"] = stage.forwardMs;
    item["backward_ms"] = stage.backwardMs;
    item["recompute"] = stage.recompute;
    item["in_flight"] = stage.inFlight;
    item["in_bytes"] = stage.inBytes;
    item["out_bytes"] = stage.outBytes;
    item["memory_bytes"] = gpu.memoryBytes;
    item["memory_limit_bytes"] = jsonNumber(gpu.memoryLimitBytes);
    item["memory_breakdown"] = {{"state", gpu.breakdown.stateBytes},
                                {"extra_weight_versions", gpu.breakdown.extraWeightBytes},
                                {"communication_buffers", gpu.breakdown.bufferBytes},
                                {"messages_held", gpu.breakdown.messageBytes},
                                {"activations_peak", gpu.breakdown.activationPeakBytes},
                                {"workspace", gpu.breakdown.workspaceBytes}};
    metrics.push_back(item);
  }
  document["stage_metrics"] = metrics;
  document["actions"] = loweredActions(problem, *best);
  return document;
}

void dumpJson(const json &document, std::ostream &out) {
  out << document.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
}
} // namespace

void writePlanJson(const Problem &problem, const PlanningReport &report, std::ostream &out,
                   bool timings) {
  dumpJson(planJsonDocument(problem, report, timings), out);
}

void writeReplicaTable(const ReplicaReport &report, std::ostream &out, bool timings) {
  out << "data-parallel replicas: " << report.gpus << " GPUs as replicas x stages, m = "
      << report.microbatches << " micro-batches per iteration split over the replicas\n";
  out << std::left << std::setw(10) << "replicas" << std::setw(8) << "stages" << std::setw(16)
      << "layout" << std::right << std::setw(13) << "pipeline ms" << std::setw(14)
      << "all-reduce ms" << std::setw(14) << "iteration ms" << std::setw(13) << "per mb ms"
      << (timings ? "   time s" : "") << "  status\n";
  for (size_t i = 0; i < report.candidates.size(); ++i) {
    const ReplicaPlan &c = report.candidates[i];
    out << std::left << std::setw(10) << c.replicas << std::setw(8) << c.stages << std::setw(16)
        << toString(c.layout) << std::right;
    if (c.valid) {
      const double allReduce =
          c.allReduceMs.empty() ? 0 : *std::max_element(c.allReduceMs.begin(), c.allReduceMs.end());
      out << std::setw(13) << milliseconds(c.pipelineIterationMs) << std::setw(14)
          << milliseconds(allReduce) << std::setw(14) << milliseconds(c.iterationMs)
          << std::setw(13) << milliseconds(c.iterationMs / report.microbatches);
    } else {
      out << std::setw(13) << "-" << std::setw(14) << "-" << std::setw(14) << "-" << std::setw(13)
          << "-";
    }
    if (timings)
      out << std::setw(9) << fixed(c.plannerSeconds, 3);
    out << "  " << (static_cast<int>(i) == report.chosen ? "best" : c.valid ? "ok" : c.reason)
        << "\n";
  }
  const ReplicaPlan *best = report.best();
  if (!best) {
    out << "no valid split\n";
    return;
  }
  out << "chosen: " << best->replicas << " replica" << (best->replicas == 1 ? "" : "s") << " of "
      << best->stages << " stage" << (best->stages == 1 ? "" : "s") << " (" << toString(best->layout)
      << "): iteration " << milliseconds(best->iterationMs) << " ms, of which the all-reduces add "
      << milliseconds(best->iterationMs - best->pipelineIterationMs)
      << " ms after the pipeline's last backward\n\n"
      << "each replica's pipeline:\n";
  writeTable(best->pipelineProblem, best->pipeline, out, timings);
}

void writeReplicaPlanJson(const ReplicaReport &report, std::ostream &out, bool timings) {
  json candidates = json::array();
  for (const ReplicaPlan &c : report.candidates) {
    json item;
    item["replicas"] = c.replicas;
    item["stages"] = c.stages;
    item["layout"] = toString(c.layout);
    item["valid"] = c.valid;
    if (c.valid) {
      item["pipeline_iteration_ms"] = c.pipelineIterationMs;
      item["iteration_ms"] = c.iterationMs;
    } else {
      item["reason"] = c.reason;
    }
    if (timings)
      item["planner_seconds"] = c.plannerSeconds;
    candidates.push_back(item);
  }
  const ReplicaPlan *best = report.best();
  json document;
  if (best) {
    document = planJsonDocument(best->pipelineProblem, best->pipeline, timings);
    document["data_parallel"] = {{"gpus", report.gpus},
                                 {"replicas", best->replicas},
                                 {"stages", best->stages},
                                 {"layout", toString(best->layout)},
                                 {"gpus_per_node", best->gpusPerNode},
                                 {"microbatches_per_iteration", report.microbatches},
                                 {"microbatches_per_replica", best->pipelineProblem.training.microbatches},
                                 {"gradient_bytes", best->gradientBytes},
                                 {"all_reduce_ms", best->allReduceMs},
                                 {"all_reduce_group", {{"nodes", best->group.nodes},
                                                       {"per_node", best->group.perNode}}},
                                 {"pipeline_iteration_ms", best->pipelineIterationMs},
                                 {"iteration_ms", best->iterationMs},
                                 {"tried", candidates}};
  } else {
    document["schema_version"] = kPlanSchemaVersion;
    document["problem"] = report.problemName;
    document["data_parallel"] = {{"gpus", report.gpus}, {"tried", candidates}};
    std::string reason = "no split of the GPUs into replicas has a valid plan";
    for (const ReplicaPlan &c : report.candidates)
      if (!c.reason.empty()) {
        reason += " (" + describeSplit(c) + ": " + c.reason + ")";
        break;
      }
    document["error"] = reason;
  }
  dumpJson(document, out);
}

void writeTraceJson(const Problem &problem, const PlanResult &plan, std::ostream &out) {
  json events = json::array();
  // Process 0 holds one compute track per GPU, process 1 one track per link
  // direction that carries a transfer; every track is named.
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 0}, {"args", {{"name", "compute"}}}});
  events.push_back(
      {{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "links"}}}});
  for (int g = 0; g < problem.platform.gpus; ++g)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", g},
                      {"args", {{"name", "GPU " + std::to_string(g) + " compute"}}}});
  std::map<std::pair<int, int>, int> linkTrack;
  for (const TimedTransfer &t : plan.simulation.transfers)
    linkTrack.emplace(std::make_pair(t.fromGpu, t.toGpu), 0);
  int track = 0;
  for (auto &[link, tid] : linkTrack) {
    tid = track++;
    events.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", 1},
         {"tid", tid},
         {"args",
          {{"name", "link " + std::to_string(link.first) + "->" + std::to_string(link.second)}}}});
  }
  for (const TimedAction &t : plan.simulation.timeline) {
    const char *category = t.action.kind == ActionKind::Forward ? "forward"
                           : t.action.kind == ActionKind::BackwardWeight ? "weight-gradient"
                                                                         : "backward";
    events.push_back({{"name", toString(t.action)},
                      {"cat", category},
                      {"ph", "X"},
                      {"pid", 0},
                      {"tid", t.gpu},
                      {"ts", t.startMs * 1000},
                      {"dur", (t.endMs - t.startMs) * 1000},
                      {"args", {{"stage", t.action.stage}, {"microbatch", t.action.microbatch}}}});
  }
  for (const TimedTransfer &t : plan.simulation.transfers)
    events.push_back(
        {{"name", transferAction(true, t.gradient, t.microbatch, t.fromStage, t.toStage)},
         {"cat", t.gradient ? "gradient-transfer" : "activation-transfer"},
         {"ph", "X"},
         {"pid", 1},
         {"tid", linkTrack.at({t.fromGpu, t.toGpu})},
         {"ts", t.startMs * 1000},
         {"dur", (t.endMs - t.startMs) * 1000},
         {"args", {{"bytes", t.bytes}}}});
  json document;
  document["traceEvents"] = events;
  document["displayTimeUnit"] = "ms";
  out << document.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

namespace {
/// A tick step of 1, 2 or 5 times a power of ten giving at most `ticks` steps.
double tickStep(double span, int ticks) {
  const double raw = span / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= raw)
      return factor * power;
  return 10 * power;
}

std::string tickLabel(double value, double step) {
  const int digits = step >= 1 ? 0 : static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
  return fixed(value, digits);
}

constexpr const char *kForwardColor = "#4e79a7";
constexpr const char *kBackwardColor = "#e15759";
constexpr const char *kWeightColor = "#59a14f";
constexpr const char *kTransferColor = "#f28e2b";
constexpr const char *kIdleColor = "#e8e8e8";
} // namespace

void writeSvg(const Problem &problem, const PlanResult &plan, std::ostream &out) {
  const int gpus = problem.platform.gpus;
  const double width = 1200, left = 80, right = 20, top = 58, rowHeight = 30;
  const double computeHeight = 20, transferHeight = 5;
  const double makespan = std::max(plan.simulation.iterationMs, 1e-9);
  const double scale = (width - left - right) / makespan;
  const double axisY = top + gpus * rowHeight + 4;
  const double height = axisY + 42;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"11\">\n";
  out << "<rect width=\"" << width << "\" height=\"" << height << "\" fill=\"white\"/>\n";
  out << "<text x=\"8\" y=\"18\" font-size=\"13\">" << plan.algorithm << " / "
      << toString(plan.scheduleKind) << ": " << describeStages(problem, plan) << "; period "
      << milliseconds(plan.periodMs) << " ms, iteration (m=" << problem.training.microbatches
      << ") " << milliseconds(plan.iterationMs) << " ms, bubble "
      << fixed(100 * plan.bubbleFraction, 1) << " %</text>\n";
  // Legend.
  const std::pair<const char *, const char *> legend[] = {
      {kForwardColor, "F forward"},
      {kBackwardColor, "B backward (Bi: input gradient)"},
      {kWeightColor, "W weight gradient"},
      {kTransferColor, "transfer (sender's row)"},
      {kIdleColor, "idle"}};
  double x = left;
  for (const auto &[color, label] : legend) {
    out << "<rect x=\"" << x << "\" y=\"28\" width=\"12\" height=\"12\" fill=\"" << color
        << "\"/>\n";
    out << "<text x=\"" << x + 16 << "\" y=\"38\">" << label << "</text>\n";
    x += 16 + 6.2 * std::string(label).size() + 20;
  }
  // One row per GPU: idle background, compute slices, the transfers it sends.
  for (int g = 0; g < gpus; ++g) {
    const double y = top + g * rowHeight;
    out << "<text x=\"8\" y=\"" << y + 15 << "\">GPU " << g << "</text>\n";
    out << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << fixed(makespan * scale)
        << "\" height=\"" << computeHeight + transferHeight + 1 << "\" fill=\"" << kIdleColor
        << "\"/>\n";
  }
  for (const TimedAction &t : plan.simulation.timeline) {
    const char *color = t.action.kind == ActionKind::Forward          ? kForwardColor
                        : t.action.kind == ActionKind::BackwardWeight ? kWeightColor
                                                                      : kBackwardColor;
    const double sx = left + t.startMs * scale, w = std::max(0.5, (t.endMs - t.startMs) * scale);
    const double y = top + t.gpu * rowHeight;
    out << "<rect x=\"" << fixed(sx) << "\" y=\"" << y << "\" width=\"" << fixed(w)
        << "\" height=\"" << computeHeight << "\" fill=\"" << color
        << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << toString(t.action) << " "
        << fixed(t.startMs, 3) << "-" << fixed(t.endMs, 3) << " ms</title></rect>\n";
    if (w > 14)
      out << "<text x=\"" << fixed(sx + 2) << "\" y=\"" << y + 14 << "\" fill=\"white\">"
          << t.action.microbatch << "</text>\n";
  }
  for (const TimedTransfer &t : plan.simulation.transfers) {
    const double sx = left + t.startMs * scale, w = std::max(0.5, (t.endMs - t.startMs) * scale);
    const double y = top + t.fromGpu * rowHeight + computeHeight + 1;
    out << "<rect x=\"" << fixed(sx) << "\" y=\"" << y << "\" width=\"" << fixed(w)
        << "\" height=\"" << transferHeight << "\" fill=\"" << kTransferColor << "\"><title>"
        << transferAction(true, t.gradient, t.microbatch, t.fromStage, t.toStage) << " GPU "
        << t.fromGpu << "->" << t.toGpu << " " << fixed(t.startMs, 3) << "-" << fixed(t.endMs, 3)
        << " ms</title></rect>\n";
  }
  // Time axis in ms.
  out << "<line x1=\"" << left << "\" y1=\"" << axisY << "\" x2=\""
      << fixed(left + makespan * scale) << "\" y2=\"" << axisY << "\" stroke=\"black\"/>\n";
  const double step = tickStep(makespan, 10);
  for (int i = 0; i * step <= makespan * (1 + 1e-9); ++i) {
    const double value = i * step, tx = left + value * scale;
    out << "<line x1=\"" << fixed(tx) << "\" y1=\"" << axisY << "\" x2=\"" << fixed(tx)
        << "\" y2=\"" << axisY + 5 << "\" stroke=\"black\"/>\n";
    out << "<text x=\"" << fixed(tx) << "\" y=\"" << axisY + 17 << "\" text-anchor=\"middle\">"
        << tickLabel(value, step) << "</text>\n";
  }
  out << "<text x=\"" << fixed(left + makespan * scale / 2) << "\" y=\"" << axisY + 34
      << "\" text-anchor=\"middle\">time (ms) of one iteration</text>\n";
  out << "</svg>\n";
}

} // namespace partitioner
