//===- Partition.cpp - the pipe-partition pass ----------------------------===//
//
// Module -> cost analysis -> chain problem (the cost model's adapter) ->
// partitioner -> `pipe.stage` on every op and `pipe.plan` on the module.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Dialect/Pipe/Transforms/Actions.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "pipe/Analysis/ChainBuilder.h"
#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Analysis/MemoryModel.h"
#include "pipe/Dialect/NN/IR/NNOps.h"

#include "partitioner/Planner.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPEPARTITION
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;

func::FuncOp pipe::pipeline::mainFunction(ModuleOp module) {
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal())
      return func;
  return {};
}

namespace {

/// Writes `pipe.stage` on every op placed by the plan: the stage of the layer
/// that holds it (parameters and constants are copied into each user stage by
/// pipe-split-stages and get none). Nothing here reads names or locations, so
/// the IR may be printed and parsed in any form between the passes.
LogicalResult annotateStages(func::FuncOp func, const PartitionOutcome &outcome) {
  const partitioner::PlanResult &plan = *outcome.report.best();
  const partitioner::Problem &problem = outcome.problem;
  if (outcome.opsOfLayer.size() != problem.layers.size() ||
      plan.allocation.stageOfLayer.size() != problem.layers.size())
    return func.emitError("the plan places ")
           << plan.allocation.stageOfLayer.size() << " layers, the function has "
           << outcome.opsOfLayer.size();
  Builder b(func.getContext());
  llvm::DenseMap<Operation *, int64_t> stageOf;
  for (auto [layer, ops] : llvm::enumerate(outcome.opsOfLayer)) {
    int64_t stage = plan.allocation.stageOfLayer[layer];
    bool placed = false;
    for (Operation *op : ops) {
      if (pipe::isParameterOrConstant(op))
        continue;
      stageOf[op] = stage;
      placed = true;
    }
    if (!placed)
      return func.emitError("layer '")
             << problem.layers[layer].name << "' of the plan has no operation to place";
  }
  for (Operation &op : func.getBody().front().without_terminator()) {
    if (pipe::isParameterOrConstant(&op))
      continue;
    auto it = stageOf.find(&op);
    if (it == stageOf.end())
      return op.emitError("'") << op.getName() << "' is in no layer of the plan";
    op.setAttr(kStageAttr, b.getI64IntegerAttr(it->second));
  }
  return success();
}

/// Bytes as a whole number.
int64_t roundedBytes(double bytes) { return static_cast<int64_t>(std::llround(bytes)); }

PlanAttr planAttribute(MLIRContext *context, const PartitionOutcome &outcome) {
  // The main job calls planPartition outside a pass, on a context that may not
  // have the pipe dialect (and so its attributes) loaded yet.
  context->getOrLoadDialect<PipeDialect>();
  Builder b(context);
  const partitioner::PlanResult &plan = *outcome.report.best();
  SmallVector<Attribute> metrics;
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    const partitioner::GpuMetrics &gpu = plan.gpus[plan.stages[s].gpu];
    std::optional<int64_t> limit;
    if (gpu.memoryLimitBytes < partitioner::kInfinity)
      limit = roundedBytes(gpu.memoryLimitBytes);
    metrics.push_back(StageMetricsAttr::get(context, llvm::APFloat(plan.stages[s].computeMs),
                                            roundedBytes(gpu.memoryBytes), limit));
  }
  SmallVector<int64_t> recompute;
  for (int s = 0; s < plan.allocation.numStages(); ++s)
    if (plan.allocation.recomputes(s))
      recompute.push_back(s);
  return PlanAttr::get(
      context, plan.algorithm, partitioner::toString(plan.scheduleKind), outcome.objective,
      plan.allocation.numStages(), outcome.problem.platform.gpus,
      outcome.problem.training.microbatches, outcome.microBatchSize, outcome.targetName,
      outcome.dtype, outcome.optimizer, outcome.memoryLimit, outcome.linkModel,
      llvm::APFloat(plan.periodMs), llvm::APFloat(plan.iterationMs),
      llvm::APFloat(plan.lowerBoundMs), llvm::APFloat(plan.bubbleFraction),
      b.getDenseI64ArrayAttr(SmallVector<int64_t>(plan.allocation.gpuOfStage.begin(),
                                                  plan.allocation.gpuOfStage.end())),
      b.getArrayAttr(metrics), scheduleOrderAttr(b, plan.schedule),
      static_cast<int64_t>(std::llround(outcome.parameters)),
      static_cast<int64_t>(std::llround(outcome.forwardFlops)),
      recompute.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(recompute),
      outcome.replicas(), partitioner::toString(outcome.replicaLayout()));
}

std::string describeLinks(const partitioner::Platform &platform) {
  auto link = [](const partitioner::LinkSpec &spec) {
    char text[96];
    if (spec.bandwidthBytesPerSecond == partitioner::kInfinity)
      std::snprintf(text, sizeof text, "unbounded + %g us", spec.latencyMs * 1e3);
    else
      std::snprintf(text, sizeof text, "%g GB/s + %g us", spec.bandwidthBytesPerSecond / 1e9,
                    spec.latencyMs * 1e3);
    return std::string(text);
  };
  return llvm::formatv("intra-node {0}, inter-node {1}, {2} GPUs per node",
                       link(platform.intraNode), link(platform.interNode), platform.gpusPerNode)
      .str();
}

/// What to try when no plan of `problem` fits (`bounds` its planning's):
/// concrete numbers where the model gives them.
void adviseOnInfeasibility(const partitioner::Problem &problem,
                           const partitioner::LowerBounds &bounds, int64_t microBatchSize,
                           StringRef dtype, Diagnostic &diag) {
  const double limit = problem.platform.memoryBytesPerGpu;
  const partitioner::ByteUnits units = problem.platform.byteUnits;
  double state = 0, saved = 0;
  for (const partitioner::Layer &layer : problem.layers) {
    state += problem.training.stateMultiplier * layer.parameterBytes;
    saved += layer.savedBytes;
  }
  for (const partitioner::SharedSaved &value : problem.sharedSaved)
    saved += value.bytes;
  for (const partitioner::SharedParameter &value : problem.sharedParameters)
    state += problem.training.stateMultiplier * value.bytes;
  // The memory-aware DP on more GPUs: the smallest count (up to 8x) that fits.
  int fitting = 0;
  double fittingPeriod = 0;
  std::string tried;
  for (int gpus = problem.platform.gpus * 2; gpus <= problem.platform.gpus * 8 && !fitting;
       gpus *= 2) {
    tried += (tried.empty()                       ? ""
              : gpus == problem.platform.gpus * 8 ? " or "
                                                  : ", ") +
             std::to_string(gpus);
    partitioner::Problem larger = problem;
    larger.platform.gpus = gpus;
    partitioner::PlanOptions options;
    options.algorithms = {"madpipe"};
    auto report = partitioner::plan(larger, options);
    if (const partitioner::PlanResult *best = report ? report->best() : nullptr) {
      fitting = gpus;
      fittingPeriod = best->periodMs;
    }
  }
  const int64_t forState = static_cast<int64_t>(std::ceil(state / limit));
  if (fitting)
    diag.attachNote() << "advice: more GPUs: " << fitting << " GPUs fit (madpipe, period "
                      << llvm::formatv("{0:f3}", fittingPeriod) << " ms)";
  else if (forState > problem.platform.gpus * 8)
    diag.attachNote() << "advice: more GPUs: parameters and optimizer state alone need "
                      << partitioner::formatBytes(state, units) << ", at least " << forState
                      << " GPUs of " << partitioner::formatBytes(limit, units);
  else if (bounds.memoryInfeasible)
    diag.attachNote() << "advice: more GPUs do not help (madpipe finds no plan on " << tried
                      << " GPUs either): " << bounds.memoryReason;
  else
    diag.attachNote() << "advice: more GPUs: madpipe finds no plan on " << tried
                      << " GPUs either; shrink the activations";
  if (microBatchSize > 1)
    diag.attachNote() << "advice: a smaller --micro-batch-size (now " << microBatchSize
                      << "): activations saved for the backward pass are "
                      << partitioner::formatBytes(saved, units)
                      << " per micro-batch and scale with it";
  if (dtype == "fp32" || dtype == "tf32")
    diag.attachNote() << "advice: --dtype=bf16 halves the saved activations ("
                      << partitioner::formatBytes(saved, units) << " -> "
                      << partitioner::formatBytes(saved / 2, units)
                      << " per micro-batch); the parameter state stays (bf16 weights and "
                         "gradients plus an fp32 master copy)";
  if (problem.training.recompute != partitioner::RecomputePolicy::None)
    return;
  // Recomputation on the same GPUs: stages keep only what they receive.
  partitioner::Problem recomputing = problem;
  recomputing.training.recompute = partitioner::RecomputePolicy::Auto;
  partitioner::PlanOptions options;
  options.algorithms = {"madpipe"};
  auto report = partitioner::plan(recomputing, options);
  if (const partitioner::PlanResult *best = report ? report->best() : nullptr) {
    int recomputed = 0;
    for (int s = 0; s < best->allocation.numStages(); ++s)
      recomputed += best->allocation.recomputes(s);
    diag.attachNote() << "advice: --recompute=auto fits on " << problem.platform.gpus
                      << " GPUs (madpipe, period " << llvm::formatv("{0:f3}", best->periodMs)
                      << " ms, " << recomputed << " of " << best->allocation.numStages()
                      << " stages run their forward again in the backward)";
  } else {
    diag.attachNote() << "advice: --recompute=auto does not fit on " << problem.platform.gpus
                      << " GPUs either (recomputation trades activations only)";
  }
}

/// One pipeline on the problem's GPUs: the report goes into the outcome; when
/// nothing fits, the error lists each algorithm's reason and advises.
LogicalResult planOnePipeline(ModuleOp module, func::FuncOp func, PartitionOutcome &outcome,
                              const PipePartitionOptions &options,
                              const partitioner::PlanOptions &planOptions,
                              llvm::function_ref<void(InFlightDiagnostic &)> explain) {
  auto report = partitioner::plan(outcome.problem, planOptions);
  if (!report) {
    auto diag = module.emitError(report.error());
    explain(diag);
    return diag;
  }
  outcome.report = std::move(*report);
  if (!outcome.report.best()) {
    auto diag = func.emitError("no plan fits ") << options.stages << " GPUs";
    for (const partitioner::PlanResult &result : outcome.report.results)
      diag.attachNote() << result.algorithm << ": " << result.reason;
    adviseOnInfeasibility(outcome.problem, outcome.report.bounds, outcome.microBatchSize,
                          outcome.dtype, *diag.getUnderlyingDiagnostic());
    explain(diag);
    return diag;
  }
  return success();
}

/// The GPUs split into replicas x stages, each split laid out pipeline-major
/// and stage-major (pipe-run places its ranks as program.json's layout says):
/// the chosen split's replica becomes the outcome's problem and report; every
/// split stays in `replicaSplits`.
LogicalResult planReplicaSplits(func::FuncOp func, PartitionOutcome &outcome,
                                const PipePartitionOptions &options,
                                const partitioner::PlanOptions &planOptions,
                                const PartitionHooks &hooks,
                                llvm::function_ref<void(InFlightDiagnostic &)> explain) {
  std::vector<int> stageCounts;
  if (options.stages > 0)
    stageCounts.push_back(options.stages);
  std::vector<partitioner::ReplicaLayout> layouts{partitioner::ReplicaLayout::PipelineMajor,
                                                  partitioner::ReplicaLayout::StageMajor};
  if (options.replicaLayout != "auto") {
    auto layout = partitioner::parseReplicaLayout(options.replicaLayout);
    if (!layout)
      return func.emitError("replica-layout: ") << layout.error();
    layouts = {*layout};
  }
  auto splits = partitioner::planReplicas(outcome.problem, stageCounts, planOptions, layouts,
                                          hooks.onSplit);
  if (!splits) {
    auto diag = func.emitError(splits.error());
    explain(diag);
    return diag;
  }
  outcome.replicaSplits = std::move(*splits);
  outcome.objective = partitioner::toString(partitioner::Objective::IterationTime);
  partitioner::ReplicaReport &report = *outcome.replicaSplits;
  if (report.chosen < 0) {
    auto diag = func.emitError("no split of the ")
                << report.gpus << " GPUs into replicas of a pipeline has a plan";
    for (const partitioner::ReplicaPlan &split : report.candidates)
      diag.attachNote() << partitioner::describeSplit(split) << ": " << split.reason;
    // Advice as for one pipeline, on the planned split with the most stages
    // (the one that spreads the memory widest): its figures are a replica's.
    const partitioner::ReplicaPlan *deepest = nullptr;
    for (const partitioner::ReplicaPlan &split : report.candidates)
      if (!split.pipeline.results.empty() && (!deepest || split.stages > deepest->stages))
        deepest = &split;
    if (deepest) {
      diag.attachNote() << "advice for the pipeline of " << partitioner::describeSplit(*deepest)
                        << " (the split with the most stages), in GPUs per replica:";
      adviseOnInfeasibility(deepest->pipelineProblem, deepest->pipeline.bounds,
                            outcome.microBatchSize, outcome.dtype,
                            *diag.getUnderlyingDiagnostic());
    }
    explain(diag);
    return diag;
  }
  partitioner::ReplicaPlan &chosen = report.candidates[static_cast<size_t>(report.chosen)];
  outcome.problem = std::move(chosen.pipelineProblem);
  outcome.report = std::move(chosen.pipeline);
  // The splits keep their figures; their problems and plans would only hold memory.
  for (partitioner::ReplicaPlan &split : report.candidates) {
    split.pipelineProblem = partitioner::Problem{};
    split.pipeline = partitioner::PlanningReport{};
  }
  return success();
}
} // namespace

std::map<std::string, int> pipe::pipeline::stageOfNodes(const PartitionOutcome &outcome) {
  std::map<std::string, int> stageOf;
  const partitioner::PlanResult *best = outcome.report.best();
  if (!best)
    return stageOf;
  for (size_t l = 0; l < outcome.problem.layers.size(); ++l)
    for (const std::string &id : outcome.problem.layers[l].nodeIds)
      stageOf[id] = best->allocation.stageOfLayer[l];
  return stageOf;
}

FailureOr<PartitionOutcome>
pipe::pipeline::buildPartitionProblem(ModuleOp module, const PipePartitionOptions &options) {
  func::FuncOp func = mainFunction(module);
  if (!func)
    return module.emitError("pipe-partition needs a function with a body");
  if (options.gpus < 0 || options.gpus > partitioner::kMaxGpus)
    return module.emitError("gpus must be in 0..")
           << partitioner::kMaxGpus << " (0: one pipeline), got " << options.gpus;
  if (options.gpus == 0 && options.stages < 1)
    return module.emitError("the number of GPUs must be at least 1, got ") << options.stages;
  if (options.gpus > 0 &&
      (options.stages < 0 || (options.stages > 0 && options.gpus % options.stages != 0)))
    return module.emitError("stages must divide gpus into replicas (or be 0 to choose), got ")
           << options.stages << " stages of " << options.gpus << " GPUs";
  PartitionOutcome outcome;
  if (func.getNumArguments() > 0)
    if (auto type = dyn_cast<RankedTensorType>(func.getArgument(0).getType()))
      if (type.getRank() > 0 && !type.isDynamicDim(0))
        outcome.microBatchSize = type.getDimSize(0);
  if (options.microBatchSize > 0 && outcome.microBatchSize != options.microBatchSize)
    return func.emitError("the model's batch dim is ")
           << outcome.microBatchSize << ", not micro-batch-size " << options.microBatchSize
           << " (a symbolic batch is bound at import with --micro-batch-size; a model "
              "exported with a fixed batch plans at that batch)";
  std::optional<pipe::Profile> profile;
  auto settings =
      pipe::parseCostSettings(module, options.target, options.dtype, options.profile, profile);
  if (failed(settings))
    return failure();
  auto policy = pipe::parseTrainingPolicy(module, options.optimizer, settings->dtype);
  if (failed(policy))
    return failure();

  outcome.targetName = settings->target.name;
  outcome.dtype = pipe::toString(settings->dtype).str();
  outcome.optimizer = pipe::toString(policy->optimizer).str();
  outcome.timeLimitSeconds = options.timeLimit;
  auto analysed = pipe::AnalysedFunction::of(func);
  if (failed(analysed))
    return failure();
  pipe::CostAnalysis analysis(analysed->func);
  if (failed(analysis.compute(*settings)))
    return failure();
  outcome.parameters = analysis.getTotals().trainableParameters;
  outcome.forwardFlops = analysis.getTotals().forwardFlops;

  auto objective = partitioner::parseObjective(options.objective);
  if (!objective)
    return module.emitError(objective.error());
  outcome.objective = partitioner::toString(*objective);
  double memory = settings->target.memoryBytes;
  partitioner::ByteUnits units = partitioner::ByteUnits::Binary; // targets are in GiB
  if (!options.memory.empty()) {
    auto parsed = partitioner::parseMemorySize(options.memory);
    if (!parsed)
      return module.emitError(parsed.error());
    memory = *parsed;
    units = partitioner::byteUnitsOf(options.memory);
    outcome.memoryLimit = options.memory;
  } else {
    outcome.memoryLimit = partitioner::formatBytes(memory, units);
    outcome.memoryFromTarget = true;
  }
  auto schedule =
      partitioner::parseScheduleKind(options.schedule.empty() ? "1f1b" : options.schedule);
  if (!schedule)
    return module.emitError(schedule.error());
  std::vector<pipe::LayerGroup> groups = pipe::groupModelLayers(analysis, *analysed);
  outcome.opsOfLayer = pipe::originalOpsOfLayers(groups, *analysed);
  auto problem = pipe::buildChainProblem(analysis, groups, *policy);
  if (failed(problem))
    return failure();
  outcome.problem = std::move(*problem);
  outcome.problem.platform.gpus = options.gpus > 0 ? options.gpus : options.stages;
  outcome.problem.platform.memoryBytesPerGpu = memory;
  outcome.problem.platform.byteUnits = units;
  outcome.problem.training.microbatches = options.microbatches;
  outcome.problem.training.schedule = *schedule;
  auto recompute = partitioner::parseRecomputePolicy(options.recompute);
  if (!recompute)
    return module.emitError(recompute.error());
  outcome.problem.training.recompute = *recompute;
  // The programs run on a runtime whose sends never block: a plan must fit the
  // messages its timeline holds, not only its two buffers per cut tensor.
  outcome.problem.training.messagesFromTimeline = true;
  if (partitioner::Status status = outcome.problem.finalize(); !status)
    return module.emitError(status.error);
  outcome.linkModel = describeLinks(outcome.problem.platform);
  return outcome;
}

LogicalResult pipe::pipeline::planPartition(ModuleOp module, PartitionOutcome &outcome,
                                            const PipePartitionOptions &options,
                                            const PartitionHooks &hooks) {
  func::FuncOp func = mainFunction(module);
  if (!func)
    return module.emitError("pipe-partition needs a function with a body");
  auto explain = [&](InFlightDiagnostic &diag) {
    if (hooks.explainFailure)
      hooks.explainFailure(*diag.getUnderlyingDiagnostic());
  };
  partitioner::PlanOptions planOptions;
  planOptions.algorithms = {options.algo};
  // The simulator judges every plan, so the compiler also tries madpipe with
  // the in-flight counts of the 1F1B order it actually runs (docs/partitioner.md).
  if (options.algo == "best")
    planOptions.algorithms.push_back("madpipe-span");
  planOptions.requireSchedule = !options.schedule.empty();
  auto objective = partitioner::parseObjective(options.objective);
  if (!objective)
    return module.emitError(objective.error());
  planOptions.objective = *objective;
  planOptions.ilpTimeLimitSeconds = options.timeLimit;
  planOptions.generalBoundSeconds = options.generalBound;
  planOptions.onResult = hooks.onResult;
  const LogicalResult planned =
      options.gpus > 0 ? planReplicaSplits(func, outcome, options, planOptions, hooks, explain)
                       : planOnePipeline(module, func, outcome, options, planOptions, explain);
  if (failed(planned) || failed(annotateStages(func, outcome)))
    return failure();
  setModulePlan(module, planAttribute(module.getContext(), outcome));
  return success();
}

namespace {
struct PipePartitionPass : pipe::pipeline::impl::PipePartitionBase<PipePartitionPass> {
  using Base::Base;
  PipePartitionPass(const PipePartitionOptions &options, PartitionHooks hooks)
      : Base(options), hooks(std::move(hooks)) {}

  void runOnOperation() override {
    ModuleOp module = getOperation();
    PipePartitionOptions options;
    options.stages = stages;
    options.gpus = gpus;
    options.replicaLayout = replicaLayout;
    options.memory = memory;
    options.target = target;
    options.microBatchSize = microBatchSize;
    options.microbatches = microbatches;
    options.algo = algo;
    options.schedule = schedule;
    options.dtype = dtype;
    options.optimizer = optimizer;
    options.profile = profile;
    options.objective = objective;
    options.timeLimit = timeLimit;
    options.generalBound = generalBound;
    options.recompute = recompute;
    auto outcome = buildPartitionProblem(module, options);
    if (failed(outcome) || (hooks.onProblem && failed(hooks.onProblem(*outcome))) ||
        failed(planPartition(module, *outcome, options, hooks)) ||
        (hooks.onPlanned && failed(hooks.onPlanned(module, *outcome))))
      signalPassFailure();
  }

  PartitionHooks hooks;
};
} // namespace

std::unique_ptr<Pass> pipe::pipeline::createPipePartition(const PipePartitionOptions &options,
                                                          PartitionHooks hooks) {
  return std::make_unique<PipePartitionPass>(options, std::move(hooks));
}
