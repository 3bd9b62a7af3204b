//===- PlanModel.cpp - the main job as a library call ---------------------===//
#include "pipe/Driver/PlanModel.h"

#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Driver/MainJob.h"
#include "pipe/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pipe::driver;

PlanModelResult pipe::driver::planModel(const PlanModelRequest &request) {
  PlanModelResult result;
  llvm::raw_string_ostream errors(result.errors);
  auto usageError = [&](const llvm::Twine &message) {
    errors << "pipe-opt: error: " << message << "\n";
    result.status = 2;
    return result;
  };
  // The pipeline's options, and the one driver option a library call takes.
  std::vector<std::pair<std::string, std::string>> planOptions;
  bool allowInferenceExport = false;
  for (const auto &[name, value] : request.options) {
    if (name == "stages" || name == "micro-batch-size")
      return usageError("'" + name + "' is an argument of its own, not an option");
    if (name != "allow-inference-export") {
      planOptions.emplace_back(name, value);
      continue;
    }
    if (value != "true" && value != "false")
      return usageError("--allow-inference-export expects true or false, got '" + value + "'");
    allowInferenceExport = value == "true";
  }
  std::string error;
  auto plan = pipeline::parsePlanOptions(planOptions, error);
  if (failed(plan))
    return usageError(error);
  MainJobOptions job;
  job.plan = std::move(*plan);
  job.plan.stages = request.stages;
  if (request.microBatchSize < 0)
    return usageError("micro_batch_size must be at least 1, got " +
                      llvm::Twine(request.microBatchSize));
  job.plan.microBatchSize = request.microBatchSize;
  job.outputDir = request.outputDir;
  job.progress = request.progress;
  job.allowInferenceExport = allowInferenceExport;
  if (failed(checkMainJobOptions(job, error)))
    return usageError(error);

  DialectRegistry registry;
  pipe::registerAllDialects(registry);
  MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    printDiagnostic(diag, errors);
    return success();
  });
  onnx_import::ImportOptions import;
  if (request.microBatchSize > 0)
    import.microBatchSize = request.microBatchSize;
  OwningOpRef<ModuleOp> module =
      loadMainJobInput(request.modelPath, &context, import, job.modelPath);
  llvm::raw_string_ostream report(result.report);
  result.status = module && succeeded(runMainJob(*module, job, report)) ? 0 : 1;
  return result;
}
