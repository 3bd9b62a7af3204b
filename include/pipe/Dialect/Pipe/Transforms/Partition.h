//===- Partition.h - partitioning a module into pipeline stages -*- C++ -*-===//
//
// The core of pipe-partition, shared with the main job: builds the chain
// problem through the cost-model adapter, runs the partitioner, and writes the
// stage of every op (`pipe.stage`) and the plan (`pipe.plan`) into the module.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H
#define PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H

#include "partitioner/Planner.h"
#include "partitioner/Problem.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace pipe::pipeline {

struct PartitionOptions {
  /// GPUs in the pipeline (a plan may run several stages on one GPU).
  int stages = 2;
  /// Memory per GPU with its unit ("80GB", "80GiB"); empty means the target's
  /// capacity. A number without a unit is an error.
  std::string memory;
  std::string target = "h100";
  /// Must equal the module's batch dim when given (shapes are bound at import).
  int64_t microBatchSize = 0;
  int microbatches = 32;
  std::string algorithm = "best";
  /// Schedule family; empty lets `best` pick any (1F1B with flush is planned
  /// for, interleaved competes). A named family is the only one that can win.
  std::string schedule;
  std::string dtype = "fp32";
  std::string optimizer = "adam";
  /// Measured per-node times (JSON keyed by ONNX node name), optional.
  std::string profile;
  /// What `best` minimises: "iteration" (one training step of `microbatches`)
  /// or "period" (the steady state).
  std::string objective = "iteration";
  /// Wall-clock limit of each MIP algorithm (ilp, ilp-general), in seconds.
  double timeLimitSeconds = 10;
  /// Called as each algorithm finishes (progress lines).
  std::function<void(const partitioner::PlanResult &)> onResult;
  /// Called with the error when planning fails, to attach notes (the main job
  /// says where the problem was written and how to replay it).
  std::function<void(mlir::Diagnostic &)> explainFailure;
};

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
};

/// The stage of every ONNX node the chosen plan places (plan.json's stage_of).
std::map<std::string, int> stageOfNodes(const PartitionOutcome &outcome);

/// Runs the cost model on the module's function and builds the chain problem
/// (the module is not changed). Errors are emitted on the module.
mlir::FailureOr<PartitionOutcome> buildPartitionProblem(mlir::ModuleOp module,
                                                        const PartitionOptions &options);

/// Runs the partitioner on `outcome.problem`. On success every op of the
/// function has `pipe.stage` (the stage of its layer, from the layer's ops,
/// never from names) and the module has `pipe.plan`; when no plan fits, the
/// error names the stage, the bytes it needs and the limit, and advises.
mlir::LogicalResult planPartition(mlir::ModuleOp module, PartitionOutcome &outcome,
                                  const PartitionOptions &options);

/// buildPartitionProblem then planPartition.
mlir::FailureOr<PartitionOutcome> partitionModule(mlir::ModuleOp module,
                                                  const PartitionOptions &options);

} // namespace pipe::pipeline

#endif // PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H
