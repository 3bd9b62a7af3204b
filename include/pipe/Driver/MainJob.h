//===- MainJob.h - `pipe-opt model.onnx --pipeline-stages=N` ----*- C++ -*-===//
//
// The main job on an imported module: the planning pipeline (pipe-plan-pipeline's
// passes, observed through hooks), then the report and the output directory
// (per-stage MLIR, plan.json, problem.json, trace, SVG, report, the per-rank
// training programs), optionally the model with each node's stage.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DRIVER_MAINJOB_H
#define PIPE_DRIVER_MAINJOB_H

#include "pipe/Dialect/Pipe/Transforms/Passes.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace pipe::driver {

/// "pipe-opt 0.1.0 (MLIR 22.1.8)": the tool's version and the MLIR it was built with.
std::string toolVersion();

struct MainJobOptions {
  /// The planning pipeline's options (pipe-plan-pipeline's: stages, memory, target,
  /// schedule, loss, optimizer settings, ...), as `--NAME=VALUE` gives them.
  pipeline::PipePlanPipelineOptions plan;
  /// false: Dropout is the identity (deterministic checks against a reference).
  bool dropout = true;
  std::string modelPath;    ///< the ONNX file the module was imported from
  std::string outputDir;    ///< where the outputs go
  std::string onnxWithPlan; ///< if set, write the model with per-node stages here
  bool progress = true;     ///< progress lines on stderr
  /// Plan a model exported for inference (eval mode, constant folding) with a
  /// warning, instead of refusing it.
  bool allowInferenceExport = false;
  /// Whether the user gave the micro-batch size (the report says so).
  bool microBatchSizeGiven() const { return plan.microBatchSize > 0; }
};

/// Checks every option value the job takes (GPUs, micro-batches, time limit,
/// target, dtype, optimizer, memory, schedule, objective, algorithm, loss,
/// optimizer settings) without a model. On failure `error` is one line naming
/// the option; pipe-opt exits 2.
mlir::LogicalResult checkMainJobOptions(const MainJobOptions &options, std::string &error);

/// Runs the job; the report goes to `report` (and to outputDir/report.txt).
/// The output directory is replaced as a whole: everything is written to a
/// directory beside it, which then takes its place, so a failed run leaves the
/// old outputs or the new ones, never a mix. When planning fails after the
/// problem is built, the directory holds problem.json and the error says how to
/// replay it with pipe-plan. Errors are emitted as diagnostics and give failure.
mlir::LogicalResult runMainJob(mlir::ModuleOp module, const MainJobOptions &options,
                               llvm::raw_ostream &report);

/// The main job's input: an ONNX model, imported with `import`, or an MLIR
/// module that `pipe-opt MODEL.onnx -o model.mlir` wrote, whose
/// `nn.model_file` names the model its parameters are read from. Sets
/// `modelPath` to that ONNX model. Errors are diagnostics; null on failure.
mlir::OwningOpRef<mlir::ModuleOp> loadMainJobInput(llvm::StringRef path,
                                                   mlir::MLIRContext *context,
                                                   const onnx_import::ImportOptions &import,
                                                   std::string &modelPath);

/// One line per diagnostic, as pipe-opt prints them to ONNX users:
/// `model.onnx: node 'name': error: message`, then its notes.
void printDiagnostic(mlir::Diagnostic &diag, llvm::raw_ostream &os);

} // namespace pipe::driver

#endif // PIPE_DRIVER_MAINJOB_H
