//===- Module.cpp - pipe_opt._native: the planners for Python -------------===//
//
// Two entry points, wrapped by python/pipe_opt/plan.py:
//   plan_model(...)    the main job (pipe::driver::planModel, called through
//                      MainJobCall.h: see there why): what
//                      `pipe-opt MODEL --pipeline-stages=N -o DIR` does;
//   plan_problem(...)  the partitioner alone on a problem JSON: what
//                      `pipe-plan problem.json --json plan.json --svg s.svg` does.
// Both release the GIL while they plan; calls from several threads run at once
// (the partitioner lets its CBC solves take turns).
// Bad input or options raise ValueError with the partitioner's or the driver's
// message.
//
//===----------------------------------------------------------------------===//

#include "partitioner/Output.h"
#include "partitioner/Planner.h"
#include "partitioner/Problem.h"
#include "MainJobCall.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <optional>
#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace {

/// What plan_problem returns before it becomes a Python dict.
struct ProblemPlan {
  bool valid = false;
  std::string planJson, table, svg, reason;
};

ProblemPlan planProblem(const std::string &problemJson, const std::string &name,
                        const std::vector<std::string> &algorithms,
                        const std::string &objective, double timeLimitSeconds,
                        long long maxDownsets, bool dagAware, std::optional<int> stages,
                        std::optional<int> microbatches, std::optional<std::string> memory,
                        std::optional<std::string> schedule,
                        std::optional<std::string> recompute, double generalBoundSeconds) {
  using namespace partitioner;
  // The options first, as pipe-plan checks them before it reads the problem.
  PlanOptions options;
  if (algorithms.empty())
    throw py::value_error("algorithms: expected at least one algorithm name");
  const std::vector<AlgorithmInfo> known = listAlgorithms();
  for (const std::string &algorithm : algorithms)
    if (algorithm != "best" && algorithm != "all" &&
        std::none_of(known.begin(), known.end(),
                     [&](const AlgorithmInfo &info) { return info.name == algorithm; }))
      throw py::value_error("unknown algorithm '" + algorithm +
                            "' (pipe_opt.list_algorithms() lists them)");
  options.algorithms = algorithms;
  Expected<Objective> parsedObjective = parseObjective(objective);
  if (!parsedObjective)
    throw py::value_error("objective: " + parsedObjective.error());
  options.objective = *parsedObjective;
  if (!std::isfinite(timeLimitSeconds) || timeLimitSeconds < 0.001 ||
      timeLimitSeconds > 86400) {
    std::ostringstream message;
    message << "time_limit must be in 0.001..86400 seconds, got " << timeLimitSeconds;
    throw py::value_error(message.str());
  }
  options.ilpTimeLimitSeconds = timeLimitSeconds;
  if (!std::isfinite(generalBoundSeconds) || generalBoundSeconds < 0 ||
      generalBoundSeconds > 86400) {
    std::ostringstream message;
    message << "general_bound must be in 0..86400 seconds, got " << generalBoundSeconds;
    throw py::value_error(message.str());
  }
  options.generalBoundSeconds = generalBoundSeconds;
  if (maxDownsets < 0 || maxDownsets > 1000000000)
    throw py::value_error("max_downsets must be in 0..1000000000, got " +
                          std::to_string(maxDownsets));
  options.maxDownsets = static_cast<size_t>(maxDownsets);
  options.dagAware = dagAware;
  if (stages && (*stages < 1 || *stages > kMaxGpus))
    throw py::value_error("stages must be in 1.." + std::to_string(kMaxGpus) + ", got " +
                          std::to_string(*stages));
  if (microbatches && (*microbatches < 1 || *microbatches > kMaxMicrobatches))
    throw py::value_error("microbatches must be in 1.." + std::to_string(kMaxMicrobatches) +
                          ", got " + std::to_string(*microbatches));
  std::optional<double> memoryBytes;
  std::optional<ScheduleKind> scheduleKind;
  if (memory) {
    Expected<double> bytes = parseBytes(*memory);
    if (!bytes)
      throw py::value_error("memory: " + bytes.error());
    memoryBytes = *bytes;
  }
  if (schedule) {
    Expected<ScheduleKind> kind = parseScheduleKind(*schedule);
    if (!kind)
      throw py::value_error("schedule: " + kind.error());
    scheduleKind = *kind;
  }
  std::optional<RecomputePolicy> recomputePolicy;
  if (recompute) {
    Expected<RecomputePolicy> policy = parseRecomputePolicy(*recompute);
    if (!policy)
      throw py::value_error("recompute: " + policy.error());
    recomputePolicy = *policy;
  }

  ProblemPlan result;
  std::string inputError;
  {
    py::gil_scoped_release release;
    // Each step gives its error as a value; the first one is raised.
    [&] {
      std::istringstream in(problemJson);
      Expected<Problem> read = readProblemJson(in, name);
      if (!read) {
        inputError = read.error();
        return;
      }
      Problem &problem = *read;
      if (stages)
        problem.platform.gpus = *stages;
      if (microbatches)
        problem.training.microbatches = *microbatches;
      if (memoryBytes)
        problem.platform.memoryBytesPerGpu = *memoryBytes;
      if (scheduleKind)
        problem.training.schedule = *scheduleKind;
      if (recomputePolicy)
        problem.training.recompute = *recomputePolicy;
      if (Status status = problem.finalize(); !status) {
        inputError = status.error;
        return;
      }
      Expected<PlanningReport> planned = plan(problem, options);
      if (!planned) {
        inputError = planned.error();
        return;
      }
      const PlanningReport &report = *planned;
      std::ostringstream table, planJson, svg;
      writeTable(problem, report, table, /*timings=*/false);
      writePlanJson(problem, report, planJson, /*timings=*/false);
      result.table = table.str();
      result.planJson = planJson.str();
      if (const PlanResult *best = report.best()) {
        writeSvg(problem, *best, svg);
        result.svg = svg.str();
        result.valid = true;
      } else {
        result.reason = noPlanReason(report);
      }
    }();
  }
  if (!inputError.empty())
    throw py::value_error(inputError);
  return result;
}

py::tuple planModel(const std::string &modelPath, const std::string &outputDir, int stages,
                    long long microBatchSize,
                    const std::vector<std::pair<std::string, std::string>> &options,
                    bool progress) {
  pipe_opt_native::MainJobResult result;
  {
    py::gil_scoped_release release;
    result = pipe_opt_native::runMainJob(modelPath, outputDir, stages,
                                         static_cast<int64_t>(microBatchSize), options,
                                         progress);
  }
  return py::make_tuple(result.status, result.report, result.errors);
}

} // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "pipe-opt's planners (the main job and the partitioner); use pipe_opt.plan_model "
            "and pipe_opt.plan_problem rather than this module";

  m.def(
      "plan_problem",
      [](const std::string &problemJson, const std::string &name,
         const std::vector<std::string> &algorithms, const std::string &objective,
         double timeLimit, long long maxDownsets, bool dag, std::optional<int> stages,
         std::optional<int> microbatches, std::optional<std::string> memory,
         std::optional<std::string> schedule, std::optional<std::string> recompute,
         double generalBound) {
        ProblemPlan plan = planProblem(problemJson, name, algorithms, objective, timeLimit,
                                       maxDownsets, dag, stages, microbatches, memory, schedule,
                                       recompute, generalBound);
        py::dict result;
        result["valid"] = plan.valid;
        result["plan_json"] = plan.planJson;
        result["table"] = plan.table;
        result["svg"] = plan.svg;
        result["reason"] = plan.reason;
        return result;
      },
      py::arg("problem_json"), py::arg("name") = "problem.json",
      py::arg("algorithms") = std::vector<std::string>{"best"},
      py::arg("objective") = "period", py::arg("time_limit") = 10.0,
      py::arg("max_downsets") = 20000, py::arg("dag") = true,
      py::arg("stages") = py::none(), py::arg("microbatches") = py::none(),
      py::arg("memory") = py::none(), py::arg("schedule") = py::none(),
      py::arg("recompute") = py::none(), py::arg("general_bound") = 0.0,
      "Plans a problem JSON (text) as `pipe-plan NAME --json FILE --svg FILE` does. Returns a "
      "dict: valid, plan_json (the bytes pipe-plan --json writes), table (what it prints), svg "
      "(empty when no plan is valid) and reason (why no plan is valid). Raises ValueError for "
      "a bad option or a problem JSON the partitioner refuses.");

  m.def("list_algorithms", [] {
    std::vector<std::pair<std::string, std::string>> algorithms;
    for (const partitioner::AlgorithmInfo &algorithm : partitioner::listAlgorithms())
      algorithms.emplace_back(algorithm.name, algorithm.summary);
    return algorithms;
  }, "The partitioner's algorithms as (name, summary) pairs (pipe-plan --list-algorithms).");

  m.def("plan_model", &planModel, py::arg("model_path"), py::arg("output_dir"),
        py::arg("stages"), py::arg("micro_batch_size") = 0,
        py::arg("options") = std::vector<std::pair<std::string, std::string>>{},
        py::arg("progress") = false,
        "The main job (`pipe-opt MODEL --pipeline-stages=STAGES -o OUTPUT_DIR "
        "[--micro-batch-size=B] [--NAME=VALUE ...]`). options: (NAME, VALUE) pairs, names "
        "without dashes. Returns (status, report, errors): status 0 planned, 1 the model or "
        "planning failed, 2 a usage error; errors holds one diagnostic per line.");

  m.attr("plan_schema_version") = partitioner::kPlanSchemaVersion;
#ifdef PIPE_OPT_VERSION
  m.attr("__version__") = PIPE_OPT_VERSION;
#endif
}
