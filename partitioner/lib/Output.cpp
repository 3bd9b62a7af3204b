// Table, plan JSON, trace JSON and SVG writers.
#include "partitioner/Output.h"
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

} // namespace

void writeTable(const Problem &problem, const PlanningReport &report, std::ostream &out,
                bool timings) {
  const PlanResult *best = report.best();
  out << "problem: " << problem.name << " | " << problem.layers.size() << " layers, "
      << problem.platform.gpus << " GPUs x " << formatBytes(problem.platform.memoryBytesPerGpu)
      << ", m = " << problem.training.microbatches << ", schedule "
      << toString(problem.training.schedule) << "\n";
  out << "lower bound: " << fixed(report.bounds.bestMs) << " ms (work/P " << fixed(report.bounds.workMs)
      << ", largest layer " << fixed(report.bounds.largestLayerMs) << ", memory "
      << fixed(report.bounds.memoryMs) << ")\n";
  if (report.bounds.memoryInfeasible)
    out << "memory: no plan can fit: " << report.bounds.memoryReason << "\n";
  out << "\n";
  if (best) {
    out << "chosen: " << best->algorithm << " (" << toString(best->scheduleKind) << ")";
    if (!best->notes.empty())
      out << ", " << best->notes;
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
          << std::right << std::setw(11) << fixed(stage.computeMs) << std::setw(8) << stage.inFlight
          << std::setw(22)
          << (formatBytes(gpu.memoryBytes) + " / " + formatBytes(gpu.memoryLimitBytes)) << "\n";
    }
    out << "period " << fixed(best->periodMs) << " ms, iteration (m=" << problem.training.microbatches
        << ") " << fixed(best->iterationMs) << " ms, bubble " << fixed(100 * best->bubbleFraction, 1)
        << " %, gap to bound " << percent(best->gap) << " %\n\n";
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
        << std::right << std::setw(7) << (r.stages.empty() ? std::string("-") : std::to_string(r.stages.size()))
        << std::setw(11) << (r.stages.empty() ? std::string("-") : fixed(r.periodMs))
        << std::setw(12) << (r.stages.empty() ? std::string("-") : fixed(r.iterationMs))
        << std::setw(8) << (r.stages.empty() ? std::string("-") : fixed(100 * r.bubbleFraction, 1) + "%")
        << std::setw(8) << (r.stages.empty() ? std::string("-") : percent(r.gap) + "%");
    double peak = 0;
    for (const auto &g : r.gpus)
      peak = std::max(peak, g.memoryBytes);
    out << std::setw(11) << (r.gpus.empty() ? std::string("-") : formatBytes(peak));
    if (timings)
      out << std::setw(9) << fixed(r.plannerSeconds, 3);
    out << "  "
        << (static_cast<int>(i) == report.chosen ? "best" : r.valid ? "ok" : r.reason) << "\n";
  }
}

std::vector<std::vector<std::string>> loweredActions(const Problem &problem, const PlanResult &plan) {
  const StageGraph graph = buildStageGraph(problem, plan.allocation);
  std::vector<std::vector<std::string>> ranks(plan.schedule.actions.size());
  // Receives are placed right before the first action that needs them; sends right
  // after the action that produces them.
  for (size_t g = 0; g < plan.schedule.actions.size(); ++g)
    for (const Action &a : plan.schedule.actions[g]) {
      const std::string mb = std::to_string(a.microbatch);
      const size_t s = static_cast<size_t>(a.stage);
      if (a.kind == ActionKind::Forward) {
        for (const auto &edge : graph.predecessors[s])
          if (graph.gpu[static_cast<size_t>(edge.stage)] != static_cast<int>(g))
            ranks[g].push_back("RECV_F" + mb + "@s" + std::to_string(edge.stage) + "->s" +
                               std::to_string(a.stage));
      } else if (a.kind != ActionKind::BackwardWeight) {
        for (const auto &edge : graph.successors[s])
          if (graph.gpu[static_cast<size_t>(edge.stage)] != static_cast<int>(g))
            ranks[g].push_back("RECV_B" + mb + "@s" + std::to_string(edge.stage) + "->s" +
                               std::to_string(a.stage));
      }
      ranks[g].push_back(toString(a));
      if (a.kind == ActionKind::Forward) {
        for (const auto &edge : graph.successors[s])
          if (graph.gpu[static_cast<size_t>(edge.stage)] != static_cast<int>(g))
            ranks[g].push_back("SEND_F" + mb + "@s" + std::to_string(a.stage) + "->s" +
                               std::to_string(edge.stage));
      } else if (a.kind != ActionKind::BackwardWeight) {
        for (const auto &edge : graph.predecessors[s])
          if (graph.gpu[static_cast<size_t>(edge.stage)] != static_cast<int>(g))
            ranks[g].push_back("SEND_B" + mb + "@s" + std::to_string(a.stage) + "->s" +
                               std::to_string(edge.stage));
      }
    }
  for (auto &rank : ranks)
    if (!rank.empty())
      rank.push_back("OPTIMIZER_STEP");
  return ranks;
}

void writePlanJson(const Problem &problem, const PlanningReport &report, std::ostream &out,
                   bool timings) {
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
  document["problem"] = problem.name;
  document["lower_bounds_ms"] = {{"work", report.bounds.workMs},
                                 {"largest_layer", report.bounds.largestLayerMs},
                                 {"memory", report.bounds.memoryMs},
                                 {"best", report.bounds.bestMs}};
  if (report.bounds.memoryInfeasible)
    document["memory_infeasible"] = report.bounds.memoryReason;
  document["tried"] = tried;
  const PlanResult *best = report.best();
  if (!best) {
    document["error"] = noPlanReason(report);
    out << document.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
    return;
  }
  document["algorithm"] = best->algorithm;
  document["schedule"] = toString(best->scheduleKind);
  document["microbatches"] = problem.training.microbatches;
  document["gpus"] = problem.platform.gpus;
  document["stages"] = best->stages.size();
  document["period_ms"] = best->periodMs;
  document["iteration_ms"] = best->iterationMs;
  document["bubble_fraction"] = best->bubbleFraction;
  document["lower_bound_ms"] = best->lowerBoundMs;
  document["gap"] = best->gap;
  document["crossing_bytes"] = best->crossingBytes;
  if (!best->notes.empty())
    document["notes"] = best->notes;
  json stageOf = json::object();
  for (size_t l = 0; l < problem.layers.size(); ++l)
    for (const std::string &node : problem.layers[l].nodeIds)
      stageOf[node] = best->allocation.stageOfLayer[l];
  document["stage_of"] = stageOf;
  document["gpu_of_stage"] = best->allocation.gpuOfStage;
  // What evaluateAllocation needs beyond the placement, so the plan replays exactly.
  if (!best->allocation.inFlightLimit.empty() || best->allocation.targetPeriodMs > 0) {
    json allocation = json::object();
    if (!best->allocation.inFlightLimit.empty())
      allocation["in_flight_limit"] = best->allocation.inFlightLimit;
    if (best->allocation.targetPeriodMs > 0)
      allocation["target_period_ms"] = best->allocation.targetPeriodMs;
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
    item["in_flight"] = stage.inFlight;
    item["in_bytes"] = stage.inBytes;
    item["out_bytes"] = stage.outBytes;
    item["memory_bytes"] = gpu.memoryBytes;
    item["memory_limit_bytes"] = jsonNumber(gpu.memoryLimitBytes);
    item["memory_breakdown"] = {{"state", gpu.breakdown.stateBytes},
                                {"extra_weight_versions", gpu.breakdown.extraWeightBytes},
                                {"communication_buffers", gpu.breakdown.bufferBytes},
                                {"activations_peak", gpu.breakdown.activationPeakBytes}};
    metrics.push_back(item);
  }
  document["stage_metrics"] = metrics;
  document["actions"] = loweredActions(problem, *best);
  out << document.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
}

void writeTraceJson(const Problem &problem, const PlanResult &plan, std::ostream &out) {
  json events = json::array();
  for (int g = 0; g < problem.platform.gpus; ++g)
    events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", g},
                      {"args", {{"name", "GPU " + std::to_string(g)}}}});
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
    events.push_back({{"name", std::string(t.gradient ? "grad " : "act ") + "mb" +
                                   std::to_string(t.microbatch) + " s" + std::to_string(t.fromStage) +
                                   "->s" + std::to_string(t.toStage)},
                      {"cat", "transfer"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", t.fromGpu * 1000 + t.toGpu},
                      {"ts", t.startMs * 1000},
                      {"dur", (t.endMs - t.startMs) * 1000},
                      {"args", {{"bytes", t.bytes}}}});
  json document;
  document["traceEvents"] = events;
  document["displayTimeUnit"] = "ms";
  out << document.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
}

void writeSvg(const Problem &problem, const PlanResult &plan, std::ostream &out) {
  const int gpus = problem.platform.gpus;
  const double width = 1200, rowHeight = 24, left = 70, top = 30;
  const double makespan = std::max(plan.simulation.iterationMs, 1e-9);
  const double scale = (width - left - 10) / makespan;
  const double height = top + gpus * rowHeight + 30;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"monospace\" font-size=\"10\">\n";
  out << "<text x=\"4\" y=\"16\" font-size=\"12\">" << plan.algorithm << " / "
      << toString(plan.scheduleKind) << ": period " << fixed(plan.periodMs) << " ms, iteration "
      << fixed(plan.iterationMs) << " ms, bubble " << fixed(100 * plan.bubbleFraction, 1)
      << " %</text>\n";
  for (int g = 0; g < gpus; ++g)
    out << "<text x=\"4\" y=\"" << top + g * rowHeight + 15 << "\">GPU " << g << "</text>\n";
  for (const TimedAction &t : plan.simulation.timeline) {
    const char *color = t.action.kind == ActionKind::Forward          ? "#4e79a7"
                        : t.action.kind == ActionKind::BackwardWeight ? "#59a14f"
                                                                      : "#e15759";
    const double x = left + t.startMs * scale, w = std::max(0.5, (t.endMs - t.startMs) * scale);
    const double y = top + t.gpu * rowHeight;
    out << "<rect x=\"" << fixed(x, 2) << "\" y=\"" << y << "\" width=\"" << fixed(w, 2)
        << "\" height=\"" << rowHeight - 4 << "\" fill=\"" << color
        << "\" stroke=\"white\" stroke-width=\"0.5\"><title>" << toString(t.action) << " "
        << fixed(t.startMs, 3) << "-" << fixed(t.endMs, 3) << " ms</title></rect>\n";
    if (w > 14)
      out << "<text x=\"" << fixed(x + 2, 2) << "\" y=\"" << y + 14 << "\" fill=\"white\">"
          << t.action.microbatch << "</text>\n";
  }
  out << "<text x=\"" << left << "\" y=\"" << height - 8 << "\">0 ms</text>\n";
  out << "<text x=\"" << width - 90 << "\" y=\"" << height - 8 << "\">" << fixed(makespan)
      << " ms</text>\n";
  out << "</svg>\n";
}

} // namespace partitioner
