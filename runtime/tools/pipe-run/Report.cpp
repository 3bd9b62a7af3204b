//===- Report.cpp - measured beside predicted: memory, period, trace -------===//
//
// The memory table compares each category's measured peak with program.json's
// prediction; the period is measured as the plan defines it (forward starts of
// a stage one period apart in the steady state, an action starting when its
// inputs are in); the trace uses the plan's
// trace layout so both open side by side in Perfetto. The printed report and
// measured.json render one RunSummary; the profile is the compiler's
// --profile format, per micro-batch.
//
//===----------------------------------------------------------------------===//
#include "Report.h"

#include "Files.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
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
  // Per (step, stage): forward starts in time order and the first backward's. An
  // action starts, as the plan has it, when its inputs are in: after the time it
  // waited in receives (its action began before them).
  struct Lane {
    std::vector<double> forwards;
    double firstBackward = 1e300;
  };
  std::map<std::pair<int64_t, int32_t>, Lane> lanes;
  int64_t lastStep = 0;
  for (const RankReport &report : reports)
    for (const ActionRecord &a : report.actions) {
      Lane &lane = lanes[{a.step, a.stage}];
      const double start = a.startMs + a.waitMs;
      if (a.kind == PIPE_ACTION_FORWARD)
        lane.forwards.push_back(start);
      else if (isBackward(a.kind))
        lane.firstBackward = std::min(lane.firstBackward, start);
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
    // The steady state: the forwards after the stage's first backward, one
    // backward and one forward apart. The gap from the last warm-up forward
    // holds the pipeline's fill (the first backward waits for the last stage).
    auto first = std::upper_bound(lane.forwards.begin(), lane.forwards.end(), lane.firstBackward);
    const auto gaps = std::distance(first, lane.forwards.end()) - 1;
    if (gaps > 0) {
      steadySpan += lane.forwards.back() - *first;
      steadyGaps += static_cast<int64_t>(gaps);
    }
  }
  if (steadyGaps > 0)
    return MeasuredPeriod{steadySpan / static_cast<double>(steadyGaps), steadyGaps, true};
  if (allGaps > 0)
    return MeasuredPeriod{allSpan / static_cast<double>(allGaps), allGaps, false};
  return std::nullopt;
}

int64_t firstMeasuredStep(int64_t steps) { return steps > 1 ? 1 : 0; }

/// The mean of `value` over the rank's measured steps (none: nullopt).
std::optional<double> meanOverMeasuredSteps(const RankReport &report, int64_t steps,
                                            double (*value)(const StepRecord &)) {
  double total = 0;
  int64_t counted = 0;
  for (const StepRecord &step : report.steps)
    if (step.step >= firstMeasuredStep(steps)) {
      total += value(step);
      ++counted;
    }
  if (counted == 0)
    return std::nullopt;
  return total / static_cast<double>(counted);
}

namespace {

std::optional<double> predictedMemoryOf(const ProgramInfo &program, int rank,
                                        const std::string &category) {
  auto predicted = program.predictedMemory.find(rank);
  if (predicted == program.predictedMemory.end())
    return std::nullopt;
  auto it = predicted->second.find(category);
  if (it == predicted->second.end())
    return std::nullopt;
  return it->second;
}

RankSummary summarizeRank(const ProgramInfo &program, const RankReport &report,
                          const RunFacts &facts) {
  const int64_t steps = facts.steps;
  RankSummary rank;
  rank.rank = report.rank;
  for (int c = 0; c < PIPE_MEM_CATEGORIES; ++c)
    rank.memory.push_back({kCategories[c], static_cast<double>(report.peak[static_cast<size_t>(c)]),
                           predictedMemoryOf(program, report.rank, kCategories[c])});
  rank.memory.push_back({"total", static_cast<double>(report.peakTotal),
                         predictedMemoryOf(program, report.rank, "total")});
  // The gradient all-reduce's messages are COMM on the CPU backend (host
  // staging a device does not charge): the rank holds the larger of them and
  // the pipeline's messages, which have left before it starts.
  if (auto messages = program.predictedAllReduceMessageBytes.find(report.rank);
      facts.backend == "cpu" && facts.replicas > 1 &&
      messages != program.predictedAllReduceMessageBytes.end()) {
    MemoryRow &comm = rank.memory[PIPE_MEM_COMM];
    MemoryRow &total = rank.memory.back();
    if (comm.predictedBytes && *comm.predictedBytes < messages->second) {
      if (total.predictedBytes)
        *total.predictedBytes += messages->second - *comm.predictedBytes;
      comm.predictedBytes = messages->second;
    }
  }
  if (steps <= 0)
    return rank;
  rank.waitMsPerStep = report.waitMs / static_cast<double>(steps);
  rank.allReduceMsPerStep = meanOverMeasuredSteps(report, steps, [](const StepRecord &step) {
                              return step.allReduceMs;
                            }).value_or(0);
  if (auto predicted = program.predictedAllReduceMs.find(report.rank);
      predicted != program.predictedAllReduceMs.end())
    rank.predictedAllReduceMs = predicted->second;
  std::vector<NodeTime> nodes = report.nodes;
  std::sort(nodes.begin(), nodes.end(),
            [](const NodeTime &a, const NodeTime &b) { return a.ms > b.ms; });
  for (size_t i = 0; i < nodes.size() && i < 3; ++i)
    rank.slowestNodes.emplace_back(nodes[i].name, nodes[i].ms / static_cast<double>(steps));
  return rank;
}

/// The mean step time (after the first step) of the slowest rank.
std::optional<double> measureIteration(const std::vector<RankReport> &reports, int64_t steps) {
  double iteration = 0;
  for (const RankReport &report : reports)
    if (auto mean = meanOverMeasuredSteps(
            report, steps, [](const StepRecord &step) { return step.endMs - step.startMs; }))
      iteration = std::max(iteration, *mean);
  if (iteration > 0)
    return iteration;
  return std::nullopt;
}

/// Per step, the sum of the losses the ranks computed (one rank per replica in
/// practice) over the replicas: each replica's loss is the mean over its
/// micro-batches, so this is the step's mean.
std::vector<std::optional<double>> lossesOf(const std::vector<RankReport> &reports,
                                            int64_t steps, int replicas) {
  std::vector<std::optional<double>> losses(static_cast<size_t>(std::max<int64_t>(steps, 0)));
  for (const RankReport &report : reports)
    for (const StepRecord &step : report.steps)
      if (step.hasLoss && step.step >= 0 && step.step < steps) {
        std::optional<double> &loss = losses[static_cast<size_t>(step.step)];
        loss = loss.value_or(0) + step.loss;
      }
  for (std::optional<double> &loss : losses)
    if (loss)
      *loss /= replicas;
  return losses;
}

json orNull(const std::optional<double> &value) { return value ? json(*value) : json(nullptr); }

/// Bytes as a JSON integer when whole (they always are; program.json's are read as numbers).
json bytesJson(const std::optional<double> &bytes) {
  if (!bytes)
    return nullptr;
  if (*bytes == std::floor(*bytes) && std::fabs(*bytes) < 9e15)
    return static_cast<int64_t>(*bytes);
  return *bytes;
}

} // namespace

RunSummary summarize(const ProgramInfo &program, const std::vector<RankReport> &reports,
                     const RunFacts &facts) {
  RunSummary summary;
  summary.facts = facts;
  summary.losses = lossesOf(reports, facts.steps, std::max(1, facts.replicas));
  // Memory, period and iteration: replica 0 stands for all (they run one program).
  std::vector<RankReport> first;
  for (const RankReport &report : reports)
    if (report.replica == 0)
      first.push_back(report);
  for (const RankReport &report : first)
    summary.ranks.push_back(summarizeRank(program, report, facts));
  summary.period = measurePeriod(first);
  summary.predictedPeriodMs = program.predictedPeriodMs;
  summary.predictedTarget = program.predictedTarget;
  summary.iterationMs = measureIteration(reports, facts.steps);
  summary.predictedIterationMs = program.predictedIterationMs;
  return summary;
}

void printReport(const RunSummary &summary) {
  std::printf("\nmemory per rank: measured peak beside the plan's prediction\n");
  for (const RankSummary &rank : summary.ranks) {
    std::printf("  rank %-3d     %14s %14s %7s\n", rank.rank, "measured", "predicted", "ratio");
    for (const MemoryRow &row : rank.memory)
      std::printf("    %-11s %14s %14s %7s\n", row.category.c_str(),
                  formatBytes(row.measuredBytes).c_str(),
                  row.predictedBytes ? formatBytes(*row.predictedBytes).c_str() : "-",
                  ratio(row.measuredBytes, row.predictedBytes).c_str());
  }

  const std::optional<MeasuredPeriod> &period = summary.period;
  std::printf("\nperiod: ");
  if (period)
    std::printf("measured %.3f ms (%s, %lld forward gaps%s)", period->ms,
                period->steady ? "steady state" : "no steady state: every forward gap",
                static_cast<long long>(period->gaps),
                summary.facts.steps > 1 ? ", steps after the first" : "");
  else
    std::printf("measured - (needs two forwards of a stage per step)");
  if (summary.predictedPeriodMs)
    std::printf(", predicted %.3f ms, ratio %s", *summary.predictedPeriodMs,
                period ? ratio(period->ms, summary.predictedPeriodMs).c_str() : "-");
  std::printf("\n");
  if (!summary.predictedTarget.empty())
    std::printf("(the predicted times are those of the plan's target, %s; docs/runtime.md, "
                "\"The measured profile\", says how to plan for this machine)\n",
                summary.predictedTarget.c_str());

  if (summary.iterationMs) {
    std::printf("iteration: measured %.3f ms (mean step of the slowest rank)", *summary.iterationMs);
    if (summary.predictedIterationMs)
      std::printf(", predicted %.3f ms, ratio %s", *summary.predictedIterationMs,
                  ratio(*summary.iterationMs, summary.predictedIterationMs).c_str());
    std::printf("\n");
  }

  if (summary.facts.steps <= 0)
    return;
  if (summary.facts.replicas > 1) {
    std::printf("gradient all-reduce over the %d replicas, per step (replica 0's ranks; a ring "
                "over each rank's replicas)\n",
                summary.facts.replicas);
    for (const RankSummary &rank : summary.ranks) {
      std::printf("  rank %d: measured %.3f ms", rank.rank, rank.allReduceMsPerStep);
      if (rank.predictedAllReduceMs)
        std::printf(", predicted %.3f ms, ratio %s", *rank.predictedAllReduceMs,
                    ratio(rank.allReduceMsPerStep, rank.predictedAllReduceMs).c_str());
      std::printf("\n");
    }
  }
  for (const RankSummary &rank : summary.ranks) {
    std::printf("rank %d, per step: waiting for peers %.3f ms", rank.rank, rank.waitMsPerStep);
    if (!rank.slowestNodes.empty())
      std::printf("; slowest nodes");
    for (size_t i = 0; i < rank.slowestNodes.size(); ++i)
      std::printf("%s %s %.3f ms", i ? "," : ":", rank.slowestNodes[i].first.c_str(),
                  rank.slowestNodes[i].second);
    std::printf("\n");
  }
}

json summaryJson(const RunSummary &summary) {
  json ranks = json::array();
  for (const RankSummary &rank : summary.ranks) {
    json memory = json::object();
    for (const MemoryRow &row : rank.memory)
      memory[row.category] = {{"measured_bytes", bytesJson(row.measuredBytes)},
                              {"predicted_bytes", bytesJson(row.predictedBytes)}};
    ranks.push_back({{"rank", rank.rank},
                     {"memory", memory},
                     {"wait_ms_per_step", rank.waitMsPerStep},
                     {"all_reduce_ms_per_step",
                      {{"measured", rank.allReduceMsPerStep},
                       {"predicted", orNull(rank.predictedAllReduceMs)}}}});
  }
  json losses = json::array();
  for (const std::optional<double> &loss : summary.losses)
    losses.push_back(orNull(loss));
  return {{"schema_version", 1},
          {"transport", summary.facts.transport},
          {"target", summary.predictedTarget.empty() ? json(nullptr)
                                                     : json(summary.predictedTarget)},
          {"threads_per_rank", summary.facts.threadsPerRank},
          {"blas_kernels", summary.facts.blasKernels},
          {"backend", summary.facts.backend},
          {"replicas", summary.facts.replicas},
          {"steps", summary.facts.steps},
          {"ranks", ranks},
          {"period_ms",
           {{"measured", summary.period ? json(summary.period->ms) : json(nullptr)},
            {"predicted", orNull(summary.predictedPeriodMs)}}},
          {"iteration_ms",
           {{"measured", orNull(summary.iterationMs)},
            {"predicted", orNull(summary.predictedIterationMs)}}},
          {"loss", losses}};
}

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double stepValue(const std::vector<double> &series, int64_t step) {
  return static_cast<size_t>(step) < series.size() ? series[static_cast<size_t>(step)] : 0.0;
}

} // namespace

std::map<std::string, NodeProfile> measureProfile(const std::vector<RankReport> &reports,
                                                  int microbatches, int64_t steps) {
  // Per name, the ranks' NodeTimes (a node normally runs on one rank).
  std::map<std::string, std::vector<const NodeTime *>> byName;
  // Nodes timed only outside forward and backward actions are not in it.
  for (const RankReport &report : reports)
    for (const NodeTime &node : report.nodes)
      if (node.declared && (!node.forwardMs.empty() || !node.backwardMs.empty()))
        byName[node.name].push_back(&node);
  std::map<std::string, NodeProfile> profile;
  const int64_t first = firstMeasuredStep(steps);
  if (steps <= first || microbatches <= 0)
    return profile;
  for (const auto &[name, copies] : byName) {
    // Per measured step: the mean over the copies of one micro-batch's time.
    std::vector<double> forward, backward;
    const double share = static_cast<double>(microbatches) * static_cast<double>(copies.size());
    for (int64_t step = first; step < steps; ++step) {
      double f = 0, b = 0;
      for (const NodeTime *copy : copies) {
        f += stepValue(copy->forwardMs, step);
        b += stepValue(copy->backwardMs, step);
      }
      // Waits come off a node's time on another clock reading: never below 0.
      forward.push_back(std::max(0.0, f / share));
      backward.push_back(std::max(0.0, b / share));
    }
    profile[name] = {median(forward), median(backward)};
  }
  return profile;
}

json profileJson(const std::map<std::string, NodeProfile> &profile, const ProgramInfo &program,
                 const RunFacts &facts) {
  json ops = json::object();
  for (const auto &[name, times] : profile)
    ops[name] = {{"forward_ms", times.forwardMs}, {"backward_ms", times.backwardMs}};
  json meta = {{"source", "pipe-run"},
               {"ranks", program.ranks},
               {"microbatches", program.microbatches},
               {"steps", facts.steps},
               {"steps_measured", std::max<int64_t>(0, facts.steps - firstMeasuredStep(facts.steps))},
               {"statistic", "median"},
               {"transport", facts.transport},
               {"threads_per_rank", facts.threadsPerRank},
               {"blas_kernels", facts.blasKernels},
               {"backend", facts.backend}};
  return {{"meta", meta}, {"ops", ops}};
}

void writeJson(const std::string &path, const json &document, const std::string &what) {
  // Names come from the model: an invalid UTF-8 byte becomes U+FFFD.
  writeFileAtomically(path, document.dump(2, ' ', false, json::error_handler_t::replace) + "\n",
                      what);
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
           {"args",
            {{"stage", a.stage},
             {"microbatch", a.microbatch},
             {"step", a.step},
             {"wait_ms", a.waitMs}}}});
    }
  json document;
  document["traceEvents"] = events;
  document["displayTimeUnit"] = "ms";
  writeFileAtomically(path, document.dump(-1, ' ', false, json::error_handler_t::replace) + "\n",
                      "trace");
}

std::vector<char> encodeReport(const RankReport &report) {
  json steps = json::array(), actions = json::array(), nodes = json::array();
  for (const StepRecord &s : report.steps)
    steps.push_back({s.step, s.startMs, s.endMs, s.hasLoss, s.loss, s.allReduceMs});
  for (const ActionRecord &a : report.actions)
    actions.push_back({a.kind, a.stage, a.microbatch, a.step, a.startMs, a.endMs, a.waitMs});
  for (const NodeTime &n : report.nodes)
    nodes.push_back({n.node, n.name, n.ms, n.calls, n.declared, n.forwardMs, n.backwardMs});
  json document = {{"rank", report.rank},
                   {"replica", report.replica},
                   {"peak", report.peak},
                   {"peak_total", report.peakTotal},
                   {"wait_ms", report.waitMs},
                   {"steps", steps},
                   {"actions", actions},
                   {"nodes", nodes},
                   {"native_kernel_calls", report.nativeKernelCalls},
                   {"library_conv_calls", report.libraryConvCalls},
                   {"staged_kernel_calls", report.stagedKernelCalls}};
  std::string text = document.dump();
  return std::vector<char>(text.begin(), text.end());
}

RankReport decodeReport(const std::vector<char> &bytes) {
  json document = json::parse(bytes.begin(), bytes.end());
  RankReport report;
  report.rank = document.at("rank");
  report.replica = document.at("replica");
  report.peak = document.at("peak").get<std::vector<int64_t>>();
  report.peakTotal = document.at("peak_total");
  report.waitMs = document.at("wait_ms");
  for (const json &s : document.at("steps"))
    report.steps.push_back({s[0], s[1], s[2], s[3], s[4], s[5]});
  for (const json &a : document.at("actions"))
    report.actions.push_back({a[0], a[1], a[2], a[3], a[4], a[5], a[6]});
  for (const json &n : document.at("nodes"))
    report.nodes.push_back({n.at(0), n.at(1), n.at(2), n.at(3), n.at(4),
                            n.at(5).get<std::vector<double>>(), n.at(6).get<std::vector<double>>()});
  report.nativeKernelCalls = document.at("native_kernel_calls");
  report.libraryConvCalls = document.at("library_conv_calls");
  report.stagedKernelCalls =
      document.at("staged_kernel_calls").get<std::map<std::string, int64_t>>();
  return report;
}

} // namespace piperun
