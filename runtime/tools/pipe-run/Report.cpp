//===- Report.cpp - measured beside predicted: memory, period, trace -------===//
//
// The memory table compares each category's measured peak with program.json's
// prediction; the period is measured as the plan defines it (forward starts of
// a stage one period apart in the steady state); the trace uses the plan's
// trace layout so both open side by side in Perfetto.
//
//===----------------------------------------------------------------------===//
#include "Report.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>

using json = nlohmann::json;

namespace piperun {

namespace {

const char *const kCategories[PIPE_MEM_CATEGORIES] = {
    "parameters", "gradients", "optimizer", "saved", "comm", "workspace", "constants"};

std::string ratio(double measured, std::optional<double> predicted) {
  if (!predicted || *predicted <= 0)
    return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", measured / *predicted);
  return text;
}

bool isBackward(int32_t kind) {
  return kind == PIPE_ACTION_BACKWARD || kind == PIPE_ACTION_BACKWARD_INPUT;
}

} // namespace

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.2f %s", bytes, units[unit]);
  return text;
}

std::optional<MeasuredPeriod> measurePeriod(const std::vector<RankReport> &reports) {
  // Per (step, stage): forward starts in time order and the first backward's.
  struct Lane {
    std::vector<double> forwards;
    double firstBackward = 1e300;
  };
  std::map<std::pair<int64_t, int32_t>, Lane> lanes;
  int64_t lastStep = 0;
  for (const RankReport &report : reports)
    for (const ActionRecord &a : report.actions) {
      Lane &lane = lanes[{a.step, a.stage}];
      if (a.kind == PIPE_ACTION_FORWARD)
        lane.forwards.push_back(a.startMs);
      else if (isBackward(a.kind))
        lane.firstBackward = std::min(lane.firstBackward, a.startMs);
      lastStep = std::max(lastStep, a.step);
    }
  // The first step also pays for cold caches and first allocations.
  const int64_t firstStep = lastStep > 0 ? 1 : 0;
  double steadySpan = 0, allSpan = 0;
  int64_t steadyGaps = 0, allGaps = 0;
  for (auto &[key, lane] : lanes) {
    if (key.first < firstStep || lane.forwards.size() < 2)
      continue;
    std::sort(lane.forwards.begin(), lane.forwards.end());
    allSpan += lane.forwards.back() - lane.forwards.front();
    allGaps += static_cast<int64_t>(lane.forwards.size()) - 1;
    // Warm-up: forwards before the stage's first backward, but the last of
    // them anchors the steady state; cool-down has no forwards.
    size_t anchor = 0;
    while (anchor + 1 < lane.forwards.size() && lane.forwards[anchor + 1] < lane.firstBackward)
      ++anchor;
    size_t gaps = lane.forwards.size() - 1 - anchor;
    if (gaps > 0) {
      steadySpan += lane.forwards.back() - lane.forwards[anchor];
      steadyGaps += static_cast<int64_t>(gaps);
    }
  }
  if (steadyGaps > 0)
    return MeasuredPeriod{steadySpan / static_cast<double>(steadyGaps), steadyGaps, true};
  if (allGaps > 0)
    return MeasuredPeriod{allSpan / static_cast<double>(allGaps), allGaps, false};
  return std::nullopt;
}

void printReport(const ProgramInfo &program, const std::vector<RankReport> &reports,
                 int64_t steps) {
  std::printf("\nmemory per rank: measured peak beside the plan's prediction\n");
  for (const RankReport &report : reports) {
    auto predicted = program.predictedMemory.find(report.rank);
    auto predictedOf = [&](const std::string &category) -> std::optional<double> {
      if (predicted == program.predictedMemory.end())
        return std::nullopt;
      auto it = predicted->second.find(category);
      if (it == predicted->second.end())
        return std::nullopt;
      return it->second;
    };
    std::printf("  rank %-3d     %14s %14s %7s\n", report.rank, "measured", "predicted", "ratio");
    auto row = [&](const std::string &category, double measured) {
      std::optional<double> expected = predictedOf(category);
      std::printf("    %-11s %14s %14s %7s\n", category.c_str(), formatBytes(measured).c_str(),
                  expected ? formatBytes(*expected).c_str() : "-",
                  ratio(measured, expected).c_str());
    };
    for (int c = 0; c < PIPE_MEM_CATEGORIES; ++c)
      row(kCategories[c], static_cast<double>(report.peak[static_cast<size_t>(c)]));
    row("total", static_cast<double>(report.peakTotal));
  }

  std::optional<MeasuredPeriod> period = measurePeriod(reports);
  std::printf("\nperiod: ");
  if (period)
    std::printf("measured %.3f ms (%s, %lld forward gaps%s)", period->ms,
                period->steady ? "steady state" : "no steady state: every forward gap",
                static_cast<long long>(period->gaps), steps > 1 ? ", steps after the first" : "");
  else
    std::printf("measured - (needs two forwards of a stage per step)");
  if (program.predictedPeriodMs)
    std::printf(", predicted %.3f ms, ratio %s", *program.predictedPeriodMs,
                period ? ratio(period->ms, program.predictedPeriodMs).c_str() : "-");
  std::printf("\n");

  // Iteration: the mean step time (after the first step) of the slowest rank.
  double iteration = 0;
  for (const RankReport &report : reports) {
    double total = 0;
    int64_t counted = 0;
    for (const StepRecord &step : report.steps)
      if (step.step >= (steps > 1 ? 1 : 0)) {
        total += step.endMs - step.startMs;
        ++counted;
      }
    if (counted > 0)
      iteration = std::max(iteration, total / static_cast<double>(counted));
  }
  if (iteration > 0) {
    std::printf("iteration: measured %.3f ms (mean step of the slowest rank)", iteration);
    if (program.predictedIterationMs)
      std::printf(", predicted %.3f ms, ratio %s", *program.predictedIterationMs,
                  ratio(iteration, program.predictedIterationMs).c_str());
    std::printf("\n");
  }

  for (const RankReport &report : reports) {
    std::vector<NodeTime> nodes = report.nodes;
    if (steps <= 0)
      continue;
    std::sort(nodes.begin(), nodes.end(),
              [](const NodeTime &a, const NodeTime &b) { return a.ms > b.ms; });
    std::printf("rank %d, per step: waiting for peers %.3f ms", report.rank,
                report.waitMs / static_cast<double>(steps));
    if (!nodes.empty())
      std::printf("; slowest nodes");
    for (size_t i = 0; i < nodes.size() && i < 3; ++i)
      std::printf("%s %s %.3f ms", i ? "," : ":", nodes[i].name.c_str(),
                  nodes[i].ms / static_cast<double>(steps));
    std::printf("\n");
  }
}

void writeTrace(const std::string &path, const std::vector<RankReport> &reports) {
  json events = json::array();
  for (const RankReport &report : reports)
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 0},
                      {"tid", report.rank},
                      {"args", {{"name", "GPU " + std::to_string(report.rank)}}}});
  for (const RankReport &report : reports)
    for (const ActionRecord &a : report.actions) {
      const char *category = a.kind == PIPE_ACTION_FORWARD           ? "forward"
                             : a.kind == PIPE_ACTION_BACKWARD_WEIGHT ? "weight-gradient"
                             : a.kind == PIPE_ACTION_REDUCE          ? "reduce"
                             : a.kind == PIPE_ACTION_OPTIMIZER       ? "optimizer"
                                                                     : "backward";
      events.push_back(
          {{"name", actionName(a)},
           {"cat", category},
           {"ph", "X"},
           {"pid", 0},
           {"tid", report.rank},
           {"ts", a.startMs * 1000},
           {"dur", (a.endMs - a.startMs) * 1000},
           {"args", {{"stage", a.stage}, {"microbatch", a.microbatch}, {"step", a.step}}}});
    }
  json document;
  document["traceEvents"] = events;
  document["displayTimeUnit"] = "ms";
  std::ofstream out(path);
  if (!out)
    throw std::runtime_error(path + ": cannot write the trace");
  out << document.dump() << "\n";
}

std::vector<char> encodeReport(const RankReport &report) {
  json steps = json::array(), actions = json::array(), nodes = json::array();
  for (const StepRecord &s : report.steps)
    steps.push_back({s.step, s.startMs, s.endMs, s.hasLoss, s.loss});
  for (const ActionRecord &a : report.actions)
    actions.push_back({a.kind, a.stage, a.microbatch, a.step, a.startMs, a.endMs});
  for (const NodeTime &n : report.nodes)
    nodes.push_back({n.node, n.name, n.ms, n.calls});
  json document = {{"rank", report.rank},
                   {"peak", report.peak},
                   {"peak_total", report.peakTotal},
                   {"wait_ms", report.waitMs},
                   {"steps", steps},
                   {"actions", actions},
                   {"nodes", nodes}};
  std::string text = document.dump();
  return std::vector<char>(text.begin(), text.end());
}

RankReport decodeReport(const std::vector<char> &bytes) {
  json document = json::parse(bytes.begin(), bytes.end());
  RankReport report;
  report.rank = document.at("rank");
  report.peak = document.at("peak").get<std::vector<int64_t>>();
  report.peakTotal = document.at("peak_total");
  report.waitMs = document.at("wait_ms");
  for (const json &s : document.at("steps"))
    report.steps.push_back({s[0], s[1], s[2], s[3], s[4]});
  for (const json &a : document.at("actions"))
    report.actions.push_back({a[0], a[1], a[2], a[3], a[4], a[5]});
  for (const json &n : document.at("nodes"))
    report.nodes.push_back({n[0], n[1], n[2], n[3]});
  return report;
}

} // namespace piperun
