//===- Partition.h - partitioning a module into pipeline stages -*- C++ -*-===//
//
// The core of pipe-partition, shared with the main job: builds the chain
// problem through the cost-model adapter, runs the partitioner, and writes the
// stage of every op (`pipe.stage`) and the plan (`pipe.plan`) into the module.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H
#define PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H

#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "partitioner/Planner.h"
#include "partitioner/Problem.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pipe::pipeline {


/// What the partitioner was given and what it chose, with the assumptions the
/// plan rests on (recorded in pipe.plan, the report, plan.json, problem.json).
struct PartitionOutcome {
  partitioner::Problem problem;
  partitioner::PlanningReport report;
  /// Layer l of `problem` is these ops (parameters and constants included).
  std::vector<std::vector<mlir::Operation *>> opsOfLayer;
  /// Model totals for the plan JSON (`model.parameters`, `model.forward_flops`).
  double parameters = 0, forwardFlops = 0;
  std::string targetName;
  /// The batch dim of the model's first input (0 when it has none).
  int64_t microBatchSize = 0;
  std::string dtype, optimizer, objective;
  /// The memory limit as given ("80GB"), or the target's ("80 GiB").
  std::string memoryLimit;
  bool memoryFromTarget = false;
  /// The link model: bandwidths and latencies inside and between nodes.
  std::string linkModel;
  double timeLimitSeconds = 10;
  /// With `gpus` (data-parallel replicas): every split of the GPUs into
  /// replicas x stages that was tried, with its figures only: the chosen one's
  /// pipeline problem and planning report were moved into `problem` and
  /// `report` (one replica: its stages' GPUs, its share of the micro-batches),
  /// and the others' dropped (so the partitioner's replica writers, which read
  /// them, do not apply to this report).
  std::optional<partitioner::ReplicaReport> replicaSplits;
  /// The chosen split, or null for one pipeline.
  const partitioner::ReplicaPlan *replicaSplit() const {
    return replicaSplits ? replicaSplits->best() : nullptr;
  }
  /// Copies of the planned pipeline that train together (1: one pipeline).
  int replicas() const { return replicaSplit() ? replicaSplit()->replicas : 1; }
  /// How they sit on the GPUs (pipeline-major for one pipeline).
  partitioner::ReplicaLayout replicaLayout() const {
    return replicaSplit() ? replicaSplit()->layout : partitioner::ReplicaLayout::PipelineMajor;
  }
};

/// What the main job observes while pipe-partition runs (progress lines,
/// problem.json before planning, the outcome for the report). Each may be
/// empty; pipe-partition run by name has none.
struct PartitionHooks {
  /// Called with the problem before planning; a failure stops the pass.
  std::function<mlir::LogicalResult(const PartitionOutcome &)> onProblem;
  /// Called as each algorithm finishes.
  std::function<void(const partitioner::PlanResult &)> onResult;
  /// With gpus: called as each split of the GPUs into replicas x stages is
  /// planned (or skipped by its bound).
  std::function<void(const partitioner::ReplicaPlan &)> onSplit;
  /// Called with the error when planning fails, to attach notes (the main job
  /// says where the problem was written and how to replay it).
  std::function<void(mlir::Diagnostic &)> explainFailure;
  /// Called once the plan is on the module (every op has its pipe.stage).
  std::function<mlir::LogicalResult(mlir::ModuleOp, PartitionOutcome &)> onPlanned;
};

/// The stage of every ONNX node the chosen plan places (plan.json's stage_of).
std::map<std::string, int> stageOfNodes(const PartitionOutcome &outcome);

/// Runs the cost model on the module's function and builds the chain problem
/// (the module is not changed). Errors are emitted on the module.
mlir::FailureOr<PartitionOutcome> buildPartitionProblem(mlir::ModuleOp module,
                                                        const PipePartitionOptions &options);

/// Runs the partitioner on `outcome.problem`. On success every op of the
/// function has `pipe.stage` (the stage of its layer, from the layer's ops,
/// never from names) and the module has `pipe.plan`; when no plan fits, the
/// error names the stage, the bytes it needs and the limit, and advises.
mlir::LogicalResult planPartition(mlir::ModuleOp module, PartitionOutcome &outcome,
                                  const PipePartitionOptions &options,
                                  const PartitionHooks &hooks = {});

/// pipe-partition with hooks: buildPartitionProblem, hooks.onProblem,
/// planPartition, hooks.onPlanned.
std::unique_ptr<mlir::Pass> createPipePartition(const PipePartitionOptions &options,
                                                PartitionHooks hooks);

/// The options of each pass of the planning pipeline, taken from pipe-plan-pipeline's.
PipePartitionOptions partitionOptions(const PipePlanPipelineOptions &options);
PipeDifferentiateOptions differentiateOptions(const PipePlanPipelineOptions &options);

/// Adds the planning pipeline (pipe-plan-pipeline's passes) to `pm`, which runs on
/// builtin.module; `hooks` go to pipe-partition.
void buildPlanPipeline(mlir::OpPassManager &pm, const PipePlanPipelineOptions &options,
                       PartitionHooks hooks = {});

/// pipe-plan-pipeline's options from (name, value) pairs, the names as the command
/// line spells them ("time-limit"); the rest keep their defaults. An unknown
/// name or a bad value gives failure and one line in `error`.
mlir::FailureOr<PipePlanPipelineOptions>
parsePlanOptions(llvm::ArrayRef<std::pair<std::string, std::string>> values, std::string &error);

/// One option of pipe-plan-pipeline, as a command line shows it.
struct PlanOptionInfo {
  std::string name;         ///< "memory", "time-limit"
  std::string description;  ///< its help text
  std::string defaultValue; ///< "0.9", "adam" ("" for none)
  enum Kind { String, Integer, Number, Flag } kind = String;
  bool flag() const { return kind == Flag; } ///< a bool: `--NAME` alone means true
};
/// Every option of pipe-plan-pipeline, in declaration order.
std::vector<PlanOptionInfo> planOptionInfo();

} // namespace pipe::pipeline

#endif // PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H
