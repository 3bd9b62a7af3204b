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

#include <map>
#include <string>

namespace pipe::pipeline {

struct PartitionOptions {
  int stages = 2;
  /// Memory per GPU ("80GB", "16GiB"); empty means the target's capacity.
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
};

struct PartitionOutcome {
  partitioner::Problem problem;
  partitioner::PlanningReport report;
  /// Model totals for the plan JSON (`model.parameters`, `model.forward_flops`).
  double parameters = 0, forwardFlops = 0;
  std::string targetName;
};

/// The stage of every ONNX node the chosen plan places (plan.json's stage_of).
std::map<std::string, int> stageOfNodes(const PartitionOutcome &outcome);

/// Partitions the single function of `module`. On success every op of it has
/// `pipe.stage` and the module has `pipe.plan`; when no plan fits, the error
/// names the stage, the bytes it needs and the limit.
mlir::FailureOr<PartitionOutcome> partitionModule(mlir::ModuleOp module,
                                                  const PartitionOptions &options);

} // namespace pipe::pipeline

#endif // PIPE_DIALECT_PIPE_TRANSFORMS_PARTITION_H
