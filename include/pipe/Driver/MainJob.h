//===- MainJob.h - `pipe-opt model.onnx --pipeline-stages=N` ----*- C++ -*-===//
//
// The main job on an imported module: partition, split into stages, schedule,
// print the report and write the output directory (per-stage MLIR, plan.json,
// trace, SVG, report), optionally the model with each node's stage.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DRIVER_MAINJOB_H
#define PIPE_DRIVER_MAINJOB_H

#include "pipe/Dialect/Pipe/Transforms/Partition.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

namespace pipe::driver {

/// The training step the per-rank programs run (pipe-attach-loss and
/// pipe-differentiate options; the optimizer is the partition's).
struct TrainingOptions {
  bool codegen = true; ///< differentiate and write rankK.cpp + program.json
  bool dropout = true; ///< false: Dropout is the identity (deterministic checks)
  std::string loss = "cross-entropy";
  double lr = 1e-3, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0;
};
/// "pipe-opt 0.1.0 (MLIR 22.1.8)": the tool's version and the MLIR it was built with.
std::string toolVersion();

struct MainJobOptions {
  pipeline::PartitionOptions partition;
  TrainingOptions training;
  std::string modelPath;   ///< the ONNX file the module was imported from
  std::string outputDir;   ///< where the outputs go
  std::string onnxWithPlan; ///< if set, write the model with per-node stages here
  bool progress = true;    ///< progress lines on stderr
  /// Whether the user gave the micro-batch size (the report says so).
  bool microBatchSizeGiven = false;
};

/// Checks every option value the job takes (target, dtype, optimizer, memory,
/// schedule, objective, algorithm, loss, optimizer settings) without a model.
/// On failure `error` is one line naming the option; pipe-opt exits 2.
mlir::LogicalResult checkMainJobOptions(const MainJobOptions &options, std::string &error);

/// Runs the job; the report goes to `report` (and to outputDir/report.txt).
/// The output directory is replaced as a whole: everything is written to a
/// directory beside it, which then takes its place, so a failed run leaves the
/// old outputs or the new ones, never a mix. When planning fails after the
/// problem is built, the directory holds problem.json and the error says how to
/// replay it with pipe-plan. Errors are emitted as diagnostics and give failure.
mlir::LogicalResult runMainJob(mlir::ModuleOp module, const MainJobOptions &options,
                               llvm::raw_ostream &report);

/// Writes a copy of the ONNX model at `input` to `output` with each node's
/// stage as node metadata (`metadata_props`, key `pipe.stage`; ONNX IR 10
/// field, ignored by older readers) and the plan summary as model metadata.
mlir::LogicalResult writeOnnxWithStages(llvm::StringRef input, llvm::StringRef output,
                                        const std::map<std::string, int> &stageOf,
                                        llvm::StringRef planSummary, std::string &error);

} // namespace pipe::driver

#endif // PIPE_DRIVER_MAINJOB_H
