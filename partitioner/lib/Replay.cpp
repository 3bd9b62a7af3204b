// Replays a plan JSON on its problem through evaluateAllocation, the path every
// algorithm's plan takes, and compares the figures.
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Replicas.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include "partitioner/Bounds.h"
#include "partitioner/Error.h"

#include "JsonFields.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <sstream>

namespace partitioner {

namespace {
bool same(double a, double b) {
  return std::fabs(a - b) <= 1e-9 * std::max(std::fabs(a), std::fabs(b)) + 1e-12;
}

ReplayCheck replayDocument(const Problem &problem, const nlohmann::json &document);

/// A plan of r replicas (writeReplicaPlanJson): its pipeline replayed on one
/// replica's problem, then the all-reduces added and the iteration compared.
ReplayCheck replayReplicas(const Problem &problem, const nlohmann::json &document) {
  const JsonFields split(document.at("data_parallel"), "the plan JSON: data_parallel");
  const int gpus = static_cast<int>(split.integer("gpus", 0, 1, kMaxGpus));
  if (gpus != problem.platform.gpus)
    throw Error("the plan splits " + std::to_string(gpus) + " GPUs, the problem has " +
                std::to_string(problem.platform.gpus) + " (give --gpus " + std::to_string(gpus) +
                ")");
  ReplicaPlan replica;
  replica.stages = static_cast<int>(split.integer("stages", 0, 1, gpus));
  replica.replicas = gpus / replica.stages;
  replica.layout = orThrow(parseReplicaLayout(split.string("layout", "")));
  replica.gpusPerNode = problem.platform.gpusPerNode;
  const Problem pipeline = orThrow(replicaPipelineProblem(problem, replica.stages, replica.layout));
  nlohmann::json pipelineDocument = document;
  pipelineDocument.erase("data_parallel");
  ReplayCheck check = replayDocument(pipeline, pipelineDocument);
  const double iterationMs = allReduceFigures(pipeline, check.replayed, replica).iterationMs;
  const double reported = split.number("iteration_ms", 0);
  if (!same(iterationMs, reported)) {
    std::ostringstream line;
    line.precision(10);
    line << "data_parallel iteration_ms: replay gives " << iterationMs
         << ", the plan reports " << reported;
    check.mismatches.push_back(line.str());
  }
  return check;
}

ReplayCheck replayDocument(const Problem &problem, const nlohmann::json &document) {
  const JsonFields plan = JsonFields::document(document, "the plan JSON");
  if (plan.has("error"))
    throw Error("the plan JSON holds no plan: " + plan.string("error", ""));
  if (plan.has("data_parallel"))
    return replayReplicas(problem, document);
  for (const char *key : {"schedule", "stage_of", "gpu_of_stage", "period_ms", "iteration_ms",
                          "stage_metrics"})
    if (!plan.has(key))
      throw Error(std::string("the plan JSON has no '") + key + "'");
  const int64_t maxStage = static_cast<int64_t>(problem.layers.size()) - 1;
  const std::vector<int64_t> gpuOfStage =
      plan.integers("gpu_of_stage", 0, problem.platform.gpus - 1);
  if (gpuOfStage.empty())
    throw Error("the plan JSON has no stages (gpu_of_stage is empty)");
  if (static_cast<int64_t>(gpuOfStage.size()) > maxStage + 1)
    throw Error("the plan JSON has " + std::to_string(gpuOfStage.size()) + " stages for " +
                std::to_string(problem.layers.size()) + " layers");
  if (plan.has("stages") &&
      plan.integer("stages", 0, 1, maxStage + 1) != static_cast<int64_t>(gpuOfStage.size()))
    throw Error("the plan JSON's 'stages' differs from the length of gpu_of_stage");
  const JsonFields stageOf(plan.at("stage_of"), "the plan JSON: stage_of");
  Allocation allocation;
  for (const Layer &layer : problem.layers) {
    int stage = -1;
    for (const std::string &node : layer.nodeIds) {
      if (!stageOf.has(node))
        throw Error("the plan does not place node '" + node + "' (layer " + layer.name + ")");
      int s = static_cast<int>(JsonFields::integerValue(
          stageOf.at(node), stageOf.field(node), 0,
          static_cast<int64_t>(gpuOfStage.size()) - 1));
      if (stage >= 0 && s != stage)
        throw Error("layer " + layer.name + " has nodes on stages " + std::to_string(stage) +
                    " and " + std::to_string(s));
      stage = s;
    }
    allocation.stageOfLayer.push_back(stage);
  }
  for (int64_t gpu : gpuOfStage)
    allocation.gpuOfStage.push_back(static_cast<int>(gpu));
  if (plan.has("allocation")) {
    const JsonFields extra(plan.at("allocation"), "the plan JSON: allocation",
                           {"in_flight_limit", "target_period_ms", "recompute_stages",
                            "stage_orders"});
    if (extra.has("stage_orders"))
      for (const std::string &text : extra.strings("stage_orders"))
        allocation.stageOrders.push_back(orThrow(parseStageOrder(text)));
    if (extra.has("in_flight_limit"))
      for (int64_t limit : extra.integers("in_flight_limit", 0, kMaxMicrobatches))
        allocation.inFlightLimit.push_back(static_cast<int>(limit));
    allocation.targetPeriodMs = extra.number("target_period_ms", 0);
    if (extra.has("recompute_stages")) {
      allocation.recompute.assign(gpuOfStage.size(), false);
      for (int64_t stage : extra.integers("recompute_stages", 0,
                                          static_cast<int64_t>(gpuOfStage.size()) - 1))
        allocation.recompute[static_cast<size_t>(stage)] = true;
    }
  }
  validateAllocation(problem, allocation);
  const double reportedPeriod = plan.number("period_ms", 0);
  const double reportedIteration = plan.number("iteration_ms", 0);
  const nlohmann::json &metrics = plan.array("stage_metrics");
  std::vector<double> reportedMemory, reportedTime;
  for (size_t s = 0; s < metrics.size(); ++s) {
    const JsonFields item(metrics[s], "the plan JSON: stage_metrics[" + std::to_string(s) + "]");
    reportedMemory.push_back(item.number("memory_bytes", 0));
    reportedTime.push_back(item.number("time_ms", 0));
  }
  ScheduleKind kind = orThrow(parseScheduleKind(plan.string("schedule", "")));
  ReplayCheck check;
  check.replayed = evaluateOrThrow(problem, allocation, kind, computeLowerBounds(problem));
  recordMessages(problem, check.replayed);
  const PlanResult &r = check.replayed;
  auto compare = [&](const std::string &what, double replayed, double reported) {
    if (!same(replayed, reported)) {
      std::ostringstream line;
      line.precision(10);
      line << what << ": replay gives " << replayed << ", the plan reports " << reported;
      check.mismatches.push_back(line.str());
    }
  };
  compare("period_ms", r.periodMs, reportedPeriod);
  compare("iteration_ms", r.iterationMs, reportedIteration);
  if (reportedMemory.size() != r.stages.size()) {
    check.mismatches.push_back("the plan reports " + std::to_string(reportedMemory.size()) +
                               " stages, the replay has " + std::to_string(r.stages.size()));
    return check;
  }
  for (size_t s = 0; s < r.stages.size(); ++s) {
    const GpuMetrics &gpu = r.gpus[static_cast<size_t>(r.stages[s].gpu)];
    compare("stage " + std::to_string(s) + " memory_bytes", gpu.memoryBytes, reportedMemory[s]);
    compare("stage " + std::to_string(s) + " time_ms", r.stages[s].computeMs, reportedTime[s]);
  }
  if (!r.valid)
    check.mismatches.push_back("the replayed plan is not valid: " + r.reason);
  return check;
}
} // namespace

namespace {
ReplayCheck replayOrThrow(const Problem &problem, const std::string &planJson) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(planJson);
  } catch (const nlohmann::json::exception &e) {
    throw Error(std::string("the plan is not JSON: ") + e.what());
  }
  try {
    return replayDocument(problem, document);
  } catch (const nlohmann::json::exception &e) {
    // JsonFields checks every type first; this is a last line of defence.
    throw Error(std::string("the plan JSON: ") + e.what());
  }
}
} // namespace

Expected<ReplayCheck> replayPlan(const Problem &problem, const std::string &planJson) {
  return catchErrors([&] { return replayOrThrow(problem, planJson); });
}

} // namespace partitioner
