// Replays a plan JSON on its problem through evaluateAllocation, the path every
// algorithm's plan takes, and compares the figures.
#include "partitioner/Replay.h"

#include "partitioner/Bounds.h"
#include "partitioner/Error.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace partitioner {

namespace {
bool same(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-12;
}
} // namespace

ReplayCheck replayPlan(const Problem &problem, const std::string &planJson) {
  nlohmann::json plan;
  try {
    plan = nlohmann::json::parse(planJson);
  } catch (const nlohmann::json::exception &e) {
    throw Error(std::string("the plan is not JSON: ") + e.what());
  }
  if (plan.contains("error"))
    throw Error("the plan JSON holds no plan: " + plan["error"].get<std::string>());
  for (const char *key : {"schedule", "stage_of", "gpu_of_stage", "period_ms", "iteration_ms",
                          "stage_metrics"})
    if (!plan.contains(key))
      throw Error(std::string("the plan JSON has no '") + key + "'");
  Allocation allocation;
  const auto &stageOf = plan["stage_of"];
  for (const Layer &layer : problem.layers) {
    int stage = -1;
    for (const std::string &node : layer.nodeIds) {
      if (!stageOf.contains(node))
        throw Error("the plan does not place node '" + node + "' (layer " + layer.name + ")");
      int s = stageOf[node].get<int>();
      if (stage >= 0 && s != stage)
        throw Error("layer " + layer.name + " has nodes on stages " + std::to_string(stage) +
                    " and " + std::to_string(s));
      stage = s;
    }
    allocation.stageOfLayer.push_back(stage);
  }
  allocation.gpuOfStage = plan["gpu_of_stage"].get<std::vector<int>>();
  if (plan.contains("allocation")) {
    const auto &extra = plan["allocation"];
    if (extra.contains("in_flight_limit"))
      allocation.inFlightLimit = extra["in_flight_limit"].get<std::vector<int>>();
    if (extra.contains("target_period_ms"))
      allocation.targetPeriodMs = extra["target_period_ms"].get<double>();
  }
  validateAllocation(problem, allocation);
  ScheduleKind kind = parseScheduleKind(plan["schedule"].get<std::string>());
  ReplayCheck check;
  check.replayed = evaluateAllocation(problem, allocation, kind, computeLowerBounds(problem));
  const PlanResult &r = check.replayed;
  auto compare = [&](const std::string &what, double replayed, double reported) {
    if (!same(replayed, reported)) {
      std::ostringstream line;
      line.precision(10);
      line << what << ": replay gives " << replayed << ", the plan reports " << reported;
      check.mismatches.push_back(line.str());
    }
  };
  compare("period_ms", r.periodMs, plan["period_ms"].get<double>());
  compare("iteration_ms", r.iterationMs, plan["iteration_ms"].get<double>());
  const auto &metrics = plan["stage_metrics"];
  if (metrics.size() != r.stages.size()) {
    check.mismatches.push_back("the plan reports " + std::to_string(metrics.size()) +
                               " stages, the replay has " + std::to_string(r.stages.size()));
    return check;
  }
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const GpuMetrics &gpu = r.gpus[static_cast<size_t>(r.stages[s].gpu)];
    compare("stage " + std::to_string(s) + " memory_bytes", gpu.memoryBytes,
            metrics[s]["memory_bytes"].get<double>());
    compare("stage " + std::to_string(s) + " time_ms", r.stages[s].computeMs,
            metrics[s]["time_ms"].get<double>());
  }
  if (!r.valid)
    check.mismatches.push_back("the replayed plan is not valid: " + r.reason);
  return check;
}

} // namespace partitioner
