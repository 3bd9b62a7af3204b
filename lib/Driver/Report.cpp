//===- Report.cpp - the main job's report and the plan's settings ---------===//
#include "Report.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "partitioner/Output.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <cstdio>
#include <optional>

using namespace mlir;
using namespace pipe;
using namespace pipe::driver;

/// Why each boundary sits where it is: the plan with the boundary moved one
/// layer either way (partitioner::boundaryMoves, the moves `best` itself tries),
/// evaluated by the same simulator.
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
  const bool byPeriod = report.objective == partitioner::Objective::Period;
  auto change = [](double value, double before) {
    double percent = (value / before - 1) * 100;
    return llvm::formatv("{0}{1:f1}%", percent >= 0 ? "+" : "", percent).str();
  };
  const std::vector<partitioner::BoundaryMove> moves =
      partitioner::boundaryMoves(problem, allocation);
  // Of the layers that can cross a boundary one way (one on a chain, several
  // across parallel branches), the one that gives the best plan by the objective.
  auto describe = [&](int from, int to) -> std::string {
    std::string invalid;
    std::optional<partitioner::PlanResult> chosen;
    int chosenLayer = -1, candidates = 0;
    for (const partitioner::BoundaryMove &move : moves) {
      if (move.fromStage != from || move.toStage != to)
        continue;
      ++candidates;
      auto evaluated = partitioner::evaluateAllocation(problem, partitioner::applyMove(allocation, move),
                                                       best.scheduleKind, report.bounds);
      if (!evaluated) {
        invalid = "not a valid cut: " + evaluated.error();
        continue;
      }
      if (!evaluated->valid) {
        invalid = evaluated->reason;
        continue;
      }
      double value = byPeriod ? evaluated->periodMs : evaluated->iterationMs;
      if (!chosen || value < (byPeriod ? chosen->periodMs : chosen->iterationMs)) {
        chosen = std::move(*evaluated);
        chosenLayer = move.layer;
      }
    }
    if (candidates == 0)
      return "";
    if (!chosen)
      return invalid;
    std::string text = llvm::formatv("period {0:f3} ms ({1}), iteration {2:f3} ms ({3})",
                                     chosen->periodMs, change(chosen->periodMs, best.periodMs),
                                     chosen->iterationMs,
                                     change(chosen->iterationMs, best.iterationMs))
                           .str();
    if (candidates > 1)
      text += llvm::formatv(", moving '{0}' (best of {1} layers)",
                            problem.layers[static_cast<size_t>(chosenLayer)].name, candidates)
                  .str();
    return text;
  };
  for (int s = 0; s + 1 < stages; ++s) {
    int last = -1;
    for (size_t l = 0; l < allocation.stageOfLayer.size(); ++l)
      if (allocation.stageOfLayer[l] == s)
        last = static_cast<int>(l);
    if (last < 0)
      continue;
    os << "  stage " << s << " | " << s + 1 << ": after layer '" << problem.layers[last].name
       << "', " << partitioner::formatBytes(best.stages[s].outBytes, problem.platform.byteUnits)
       << " cross\n";
    std::string earlier = describe(s, s + 1), later = describe(s + 1, s);
    if (!earlier.empty())
      os << "    one layer earlier: " << earlier << "\n";
    if (!later.empty())
      os << "    one layer later:   " << later << "\n";
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
  // --gpus: problem.json holds all of them and the step's micro-batches; once a
  // split is chosen, `gpus` and `microbatches` above are one replica's.
  if (options.plan.gpus > 0)
    settings["gpus_option"] = options.plan.gpus;
  const partitioner::ReplicaPlan *split = outcome.replicaSplit();
  if (split || options.plan.gpus == 0)
    settings["replicas"] = outcome.replicas();
  if (split) {
    settings["gpus_in_all"] = split->replicas * split->stages;
    settings["microbatches_per_step"] = split->replicas * outcome.problem.training.microbatches;
    settings["replica_layout"] = partitioner::toString(split->layout);
    settings["stages_chosen"] = options.plan.stages == 0;
  }
  return settings;
}

/// A split's longest gradient all-reduce over its GPUs (0 when it has none).
static double longestAllReduceMs(const partitioner::ReplicaPlan &split) {
  return split.allReduceMs.empty()
             ? 0.0
             : *std::max_element(split.allReduceMs.begin(), split.allReduceMs.end());
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
  const partitioner::ReplicaPlan *split = outcome.replicaSplit();
  if (!split) {
    os << "GPUs:         " << problem.platform.gpus << " (--pipeline-stages); the plan runs "
       << partitioner::describeStages(problem, best) << "\n";
  } else {
    const int gpus = split->replicas * split->stages;
    const char *why =
        options.plan.stages == 0 ? "the split with the shortest iteration" : "--pipeline-stages";
    os << "GPUs:         " << gpus << " (--gpus) as " << split->replicas << " x " << split->stages
       << ": ";
    if (split->replicas == 1)
      os << "one " << split->stages << "-GPU pipeline, no data-parallel replicas (" << why
         << "); the plan runs ";
    else
      os << split->replicas << " data-parallel replicas of a " << split->stages
         << "-GPU pipeline (" << why << "), placed " << partitioner::toString(split->layout)
         << "; each replica trains " << problem.training.microbatches << " of the step's "
         << split->replicas * problem.training.microbatches
         << " micro-batches; the figures below are one replica's, whose plan runs ";
    os << partitioner::describeStages(problem, best) << "\n";
    if (split->replicas > 1)
      os << llvm::formatv("replicas:     gradient all-reduce up to {0:f3} ms a GPU (its {1} "
                          "replicas, {2} node(s) x {3} GPU(s), after its last backward): iteration "
                          "{4:f3} ms, one replica's {5:f3} ms\n",
                          longestAllReduceMs(*split), split->replicas, split->group.nodes, split->group.perNode,
                          split->iterationMs, split->pipelineIterationMs);
    for (const partitioner::ReplicaPlan &tried : outcome.replicaSplits->candidates) {
      os << "              " << partitioner::describeSplit(tried) << ": ";
      if (tried.valid)
        os << llvm::formatv("iteration {0:f3} ms (pipeline {1:f3} ms, all-reduce up to {2:f3} ms)",
                            tried.iterationMs, tried.pipelineIterationMs,
                            longestAllReduceMs(tried));
      else
        os << tried.reason;
      os << (&tried == split ? "  <- chosen" : "") << "\n";
    }
  }
  os << "objective:    "
     << (split ? std::string("the iteration time of a step, each replica's micro-batches and "
                             "its gradient all-reduces (the one objective with --gpus)")
         : outcome.objective == "period"
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
  std::string command =
      llvm::formatv("pipe-plan {0} --algo {1} --objective {2} --time-limit {3}", problemPath,
                    algorithms, options.plan.objective, formatSeconds(options.plan.timeLimit))
          .str();
  if (options.plan.generalBound > 0)
    command += " --general-bound " + formatSeconds(options.plan.generalBound);
  if (!options.plan.schedule.empty())
    command += " --require-schedule";
  if (options.plan.gpus > 0)
    command += " --gpus " + std::to_string(options.plan.gpus) + " --stages " +
               (options.plan.stages > 0 ? std::to_string(options.plan.stages) : "auto") +
               (options.plan.replicaLayout != "auto" ? " --layout " + options.plan.replicaLayout
                                                     : std::string());
  return command;
}
