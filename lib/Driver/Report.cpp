//===- Report.cpp - the main job's report and the plan's settings ---------===//
#include "Report.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "partitioner/Output.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <cstdio>

using namespace mlir;
using namespace pipe;
using namespace pipe::driver;

/// Why each boundary sits where it is: the plan with the boundary moved one
/// layer either way, evaluated by the same simulator.
void pipe::driver::explainBoundaries(const partitioner::Problem &problem,
                                     const partitioner::PlanningReport &report,
                                     llvm::raw_ostream &os) {
  const partitioner::PlanResult &best = *report.best();
  const partitioner::Allocation &allocation = best.allocation;
  int stages = allocation.numStages();
  if (stages < 2)
    return;
  os << "\nWhy each boundary sits where it does (the same plan with the boundary moved one "
        "layer):\n";
  auto describe = [&](partitioner::Allocation moved) -> std::string {
    auto evaluated =
        partitioner::evaluateAllocation(problem, moved, best.scheduleKind, report.bounds);
    if (!evaluated)
      return "not a valid cut: " + evaluated.error();
    const partitioner::PlanResult &result = *evaluated;
    if (!result.valid)
      return result.reason;
    double change = (result.periodMs / best.periodMs - 1) * 100;
    return llvm::formatv("period {0:f3} ms ({1}{2:f1}%)", result.periodMs,
                         change >= 0 ? "+" : "", change)
        .str();
  };
  for (int s = 0; s + 1 < stages; ++s) {
    int last = -1, first = -1, inS = 0, inNext = 0;
    for (size_t l = 0; l < allocation.stageOfLayer.size(); ++l) {
      if (allocation.stageOfLayer[l] == s) {
        last = static_cast<int>(l);
        ++inS;
      } else if (allocation.stageOfLayer[l] == s + 1) {
        if (first < 0)
          first = static_cast<int>(l);
        ++inNext;
      }
    }
    if (last < 0 || first < 0)
      continue;
    os << "  stage " << s << " | " << s + 1 << ": after layer '" << problem.layers[last].name
       << "', " << partitioner::formatBytes(best.stages[s].outBytes, problem.platform.byteUnits)
       << " cross\n";
    if (inS > 1) {
      partitioner::Allocation earlier = allocation;
      earlier.stageOfLayer[last] = s + 1;
      os << "    one layer earlier: " << describe(earlier) << "\n";
    }
    if (inNext > 1) {
      partitioner::Allocation later = allocation;
      later.stageOfLayer[first] = s;
      os << "    one layer later:   " << describe(later) << "\n";
    }
  }
}

/// Operations, parameters (owned) of each stage, from the split pipeline.
void pipe::driver::stageSummary(pipeline::PipelineOp pipelineOp, llvm::raw_ostream &os) {
  os << "\nStages (IR):\n";
  for (auto stage : pipelineOp.getBody().getOps<pipeline::StageOp>()) {
    int64_t ops = 0, sends = 0, recvs = 0;
    double parameters = 0;
    stage.walk([&](Operation *op) {
      if (isa<pipeline::SendOp>(op))
        ++sends;
      else if (isa<pipeline::RecvOp>(op))
        ++recvs;
      else if (auto param = dyn_cast<pipeline::ParamOp>(op)) {
        if (param.getOwner() == stage.getIndex() && param.getTrainable())
          parameters += cast<ShapedType>(param.getType()).getNumElements();
      } else if (isa<nn::NNDialect>(op->getDialect()) &&
                 !op->hasTrait<OpTrait::ConstantLike>())
        ++ops;
    });
    os << llvm::formatv("  stage {0}: {1} ops, {2:f2} M parameters, {3} sends, {4} receives\n",
                        stage.getIndex(), ops, parameters / 1e6, sends, recvs);
  }
}

/// The assumptions of the plan, for plan.json and problem.json.
nlohmann::ordered_json pipe::driver::settingsJson(const pipeline::PartitionOutcome &outcome,
                                                  const MainJobOptions &options) {
  const partitioner::Platform &platform = outcome.problem.platform;
  auto link = [](const partitioner::LinkSpec &spec) {
    nlohmann::ordered_json json;
    if (spec.bandwidthBytesPerSecond == partitioner::kInfinity)
      json["bandwidth_bytes_per_s"] = "inf";
    else
      json["bandwidth_bytes_per_s"] = spec.bandwidthBytesPerSecond;
    json["latency_ms"] = spec.latencyMs;
    return json;
  };
  nlohmann::ordered_json settings;
  settings["tool_version"] = toolVersion();
  settings["model"] = llvm::sys::path::filename(options.modelPath).str();
  settings["target"] = outcome.targetName;
  settings["dtype"] = outcome.dtype;
  settings["optimizer"] = outcome.optimizer;
  settings["micro_batch_size"] = outcome.microBatchSize;
  settings["micro_batch_size_given"] = options.microBatchSizeGiven();
  settings["microbatches"] = outcome.problem.training.microbatches;
  settings["gpus"] = platform.gpus;
  settings["memory_limit"] = outcome.memoryLimit;
  settings["memory_limit_from_target"] = outcome.memoryFromTarget;
  if (platform.memoryBytesPerGpu < partitioner::kInfinity)
    settings["memory_limit_bytes"] = platform.memoryBytesPerGpu;
  settings["link_model"] = {{"gpus_per_node", platform.gpusPerNode},
                            {"intra_node", link(platform.intraNode)},
                            {"inter_node", link(platform.interNode)}};
  settings["objective"] = outcome.objective;
  settings["algorithm"] = options.plan.algo;
  settings["schedule"] =
      options.plan.schedule.empty() ? "any (1f1b or interleaved)" : options.plan.schedule;
  settings["time_limit_s"] = outcome.timeLimitSeconds;
  settings["recompute"] = partitioner::toString(outcome.problem.training.recompute);
  return settings;
}

/// The report's header: what was planned, under which assumptions.
void pipe::driver::writeHeader(const pipeline::PartitionOutcome &outcome,
                               const MainJobOptions &options, llvm::raw_ostream &os) {
  const partitioner::Problem &problem = outcome.problem;
  const partitioner::PlanResult &best = *outcome.report.best();
  os << "pipe-opt plan for " << llvm::sys::path::filename(options.modelPath) << "\n";
  os << "tool:         " << toolVersion() << "\n";
  os << llvm::formatv("model:        {0:f2} M parameters, {1:f2} GFLOP forward per micro-batch\n",
                      outcome.parameters / 1e6, outcome.forwardFlops / 1e9);
  os << "target:       " << outcome.targetName << ", dtype " << outcome.dtype << ", optimizer "
     << outcome.optimizer << "\n";
  os << "micro-batch:  size " << outcome.microBatchSize
     << (options.microBatchSizeGiven() ? " (--micro-batch-size)"
                                     : " (the model's batch dim, fixed or bound with --dim)")
     << ", " << problem.training.microbatches << " micro-batches per iteration\n";
  os << "memory limit: " << outcome.memoryLimit << " per GPU"
     << (outcome.memoryFromTarget ? " (the target's; --memory to change)" : " (--memory)") << "\n";
  os << "links:        " << outcome.linkModel << "\n";
  os << "GPUs:         " << problem.platform.gpus << " (--pipeline-stages); the plan runs "
     << partitioner::describeStages(problem, best) << "\n";
  os << "objective:    "
     << (outcome.objective == "period"
             ? std::string("the steady-state period (--objective=period)")
             : "the iteration time of " + std::to_string(problem.training.microbatches) +
                   " micro-batches, what a training step costs (--objective=period for "
                   "the steady state)")
     << "\n";
  os << llvm::formatv("chosen:       {0} ({1}): iteration {2:f3} ms, period {3:f3} ms\n\n",
                      best.algorithm, partitioner::toString(best.scheduleKind), best.iterationMs,
                      best.periodMs);
}

/// "10", "2.5": a number of seconds as a user writes it.
std::string pipe::driver::formatSeconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// How to plan the written problem again with the partitioner alone.
std::string pipe::driver::replayCommand(const std::string &problemPath,
                                        const MainJobOptions &options) {
  std::string algorithms = options.plan.algo;
  if (algorithms == "best")
    algorithms += ",madpipe-span";
  return llvm::formatv("pipe-plan {0} --algo {1} --objective {2} --time-limit {3}", problemPath,
                       algorithms, options.plan.objective,
                       formatSeconds(options.plan.timeLimit))
      .str();
}
