//===- MainJob.cpp - `pipe-opt model.onnx --pipeline-stages=N` ------------===//
//
// The planning pipeline (pipe-plan-pipeline's passes, built by buildPlanPipeline) on the
// imported module, observed through pipe-partition's hooks: progress lines,
// problem.json before planning (what the user replays when planning fails),
// the outcome for the report. Then the report (Report.cpp), the training
// programs (TrainingProgram.cpp) and the output directory
// (OutputDirectory.cpp). The partitioner's own writers produce plan.json, the
// trace and the SVG, so pipe-plan and pipe-opt describe a plan the same way.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"

#include "OutputDirectory.h"
#include "Report.h"

#include "pipe/Analysis/ChainBuilder.h"
#include "pipe/Conversion/PipeToEmitC/PipeToEmitC.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Driver/TrainingProgram.h"
#include "pipe/Import/Onnx/OnnxImporter.h"
#include "pipe/Import/Onnx/OnnxWriteBack.h"

#include "partitioner/Output.h"

#include "mlir/IR/Builders.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <future>
#include <optional>
#include <sstream>

using namespace mlir;
using namespace pipe;
using namespace pipe::driver;

namespace {
class Progress {
public:
  explicit Progress(bool enabled) : enabled(enabled), start(clock::now()) {}
  void step(const llvm::Twine &what) {
    if (enabled)
      llvm::errs() << llvm::format("[pipe-opt %6.2fs] ", seconds()) << what << "\n";
  }
  double seconds() const {
    return std::chrono::duration<double>(clock::now() - start).count();
  }

private:
  using clock = std::chrono::steady_clock;
  bool enabled;
  clock::time_point start;
};

/// The pass manager verified the module after its last pass, and nothing has
/// changed it since (the lowering works on a copy): printing does not verify it
/// again (on a 60,000-node chain, twice 60,000 ops).
OpPrintingFlags verifiedIR() {
  OpPrintingFlags flags;
  flags.assumeVerified();
  return flags;
}

/// Each stage alone in a module: it parses and prints back the same.
std::string stageModuleText(pipeline::StageOp stage) {
  OwningOpRef<ModuleOp> holder = ModuleOp::create(stage.getLoc());
  OpBuilder builder(holder->getBodyRegion());
  builder.clone(*stage);
  std::string text;
  llvm::raw_string_ostream os(text);
  holder->print(os, verifiedIR());
  os << "\n";
  return text;
}

/// The texts of pipeline.mlir and of each stage*.mlir.
struct IrFiles {
  std::string pipeline;
  std::vector<std::pair<std::string, std::string>> stages;
};

IrFiles printIrFiles(ModuleOp module) {
  IrFiles files;
  llvm::raw_string_ostream os(files.pipeline);
  module.print(os, verifiedIR());
  os << "\n";
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>())
    for (auto stage : pipelineOp.getBody().getOps<pipeline::StageOp>())
      files.stages.emplace_back(("stage" + llvm::Twine(stage.getIndex()) + ".mlir").str(),
                                stageModuleText(stage));
  return files;
}

/// A model exported for inference plans another network than the one trained:
/// refused, or with --allow-inference-export planned with a warning. Each sign
/// is a note, then how to export for training.
LogicalResult checkTrainingExport(ModuleOp module, const MainJobOptions &options) {
  std::string error;
  std::vector<std::string> signs = onnx_import::inferenceExportSigns(options.modelPath, error);
  if (signs.empty())
    return success(); // a model that cannot be read again fails later, with its reason
  auto report = [&](InFlightDiagnostic diag) {
    for (const std::string &sign : signs)
      diag.attachNote() << sign;
    diag.attachNote() << "export it for training with pipe_opt.export_for_pipeline(model, "
                         "example_inputs, path), or torch.onnx.export(..., "
                         "training=torch.onnx.TrainingMode.TRAINING, "
                         "do_constant_folding=False)";
    return diag;
  };
  llvm::StringRef model = llvm::sys::path::filename(options.modelPath);
  if (options.allowInferenceExport) {
    (void)report(module.emitWarning()
                 << model << " looks exported for inference; planned anyway "
                 << "(--allow-inference-export), as the network it describes");
    return success();
  }
  return report(module.emitError()
                << model << " looks exported for inference, not for training: planning it "
                << "would plan another network than the one you train "
                << "(--allow-inference-export plans it anyway)");
}

/// --disable-dropout: every Dropout becomes the identity.
LogicalResult removeDropout(ModuleOp module) {
  WalkResult walk = module.walk([&](nn::DropoutOp dropout) {
    if (dropout.getMask() && !dropout.getMask().use_empty()) {
      dropout.emitError("--disable-dropout cannot remove a dropout whose mask is used");
      return WalkResult::interrupt();
    }
    dropout.getOutput().replaceAllUsesWith(dropout.getInput());
    dropout.erase();
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}
} // namespace

std::string pipe::driver::toolVersion() {
  return std::string("pipe-opt ") + PIPE_OPT_VERSION + " (MLIR " + LLVM_VERSION_STRING + ")";
}

void pipe::driver::printDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
  Location loc = diag.getLocation();
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    os << file.getFilename().getValue() << ": ";
  if (auto name = loc->findInstanceOf<NameLoc>()) {
    std::string node = name.getName().str();
    for (char &c : node)
      if (static_cast<unsigned char>(c) < 0x20)
        c = '?';
    os << "node '" << node << "': ";
  }
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error: os << "error: "; break;
  case DiagnosticSeverity::Warning: os << "warning: "; break;
  case DiagnosticSeverity::Remark: os << "remark: "; break;
  case DiagnosticSeverity::Note: os << "note: "; break;
  }
  // One line, whatever bytes a corrupt model put into its names.
  std::string message = diag.str();
  for (char &c : message)
    if (static_cast<unsigned char>(c) < 0x20)
      c = ' ';
  os << message << "\n";
  for (Diagnostic &note : diag.getNotes())
    printDiagnostic(note, os);
}

OwningOpRef<ModuleOp> pipe::driver::loadMainJobInput(llvm::StringRef path, MLIRContext *context,
                                                     const onnx_import::ImportOptions &import,
                                                     std::string &modelPath) {
  if (onnx_import::isOnnxFile(path)) {
    modelPath = path.str();
    return onnx_import::importOnnxFile(path, context, import);
  }
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(path, context);
  if (!module)
    return nullptr;
  auto *nn = context->getOrLoadDialect<nn::NNDialect>();
  StringAttr modelFile = nn->getModelFileAttrHelper().getAttr(*module);
  if (!modelFile) {
    emitError(module->getLoc())
        << "the module names no model file (nn.model_file): the main job reads the "
           "parameters from the ONNX model; write the module with pipe-opt MODEL.onnx -o "
        << llvm::sys::path::filename(path);
    return nullptr;
  }
  modelPath = modelFile.str();
  return module;
}

LogicalResult pipe::driver::runMainJob(ModuleOp module, const MainJobOptions &options,
                                       llvm::raw_ostream &reportStream) {
  const pipeline::PipePlanPipelineOptions &plan = options.plan;
  if (failed(checkTrainingExport(module, options)))
    return failure();
  Progress progress(options.progress);
  OutputDirectory outputs(options.outputDir);
  if (failed(outputs.prepare(module)))
    return failure();
  if (!options.dropout && failed(removeDropout(module)))
    return failure();

  // What the hooks see of the pipeline as it runs.
  std::optional<pipeline::PartitionOutcome> outcome;
  bool problemWritten = false;
  const std::string replay = replayCommand(outputs.pathOf("problem.json"), options);
  pipeline::PartitionHooks hooks;
  hooks.onProblem = [&](const pipeline::PartitionOutcome &built) -> LogicalResult {
    const partitioner::Problem &problem = built.problem;
    // The settings go in as a field of the document the partitioner writes (not
    // by parsing its text again: 10 MB on a 60,000-node chain).
    std::ostringstream problemText;
    partitioner::writeProblemJson(
        problem, problemText,
        {{"settings", settingsJson(built, options)
                          .dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)}});
    if (failed(outputs.write(module, "problem.json", problemText.str())))
      return failure();
    problemWritten = true;
    progress.step(llvm::formatv("chain of {0} layers; planning on {1} GPUs{5} with {2} (each MIP "
                                "stops after {3} s{4})",
                                problem.layers.size(), problem.platform.gpus, plan.algo,
                                formatSeconds(plan.timeLimit),
                                plan.generalBound > 0
                                    ? "; then up to " + formatSeconds(plan.generalBound) +
                                          " s proving a bound over every general allocation"
                                    : std::string(),
                                plan.gpus == 0 ? std::string()
                                : plan.stages > 0
                                    ? " as " + std::to_string(plan.gpus / plan.stages) +
                                          " replicas of " + std::to_string(plan.stages) + " stages"
                                    : " as replicas x stages (each split that divides them)"));
    return success();
  };
  hooks.onResult = [&](const partitioner::PlanResult &result) {
    std::string status = result.valid ? llvm::formatv("iteration {0:f3} ms, period {1:f3} ms",
                                                      result.iterationMs, result.periodMs)
                                            .str()
                                      : result.reason;
    progress.step(
        llvm::formatv("  {0}: {1} ({2:f2} s)", result.algorithm, status, result.plannerSeconds));
  };
  hooks.onSplit = [&](const partitioner::ReplicaPlan &split) {
    progress.step(llvm::formatv(
        "{0}: {1} ({2:f2} s)", partitioner::describeSplit(split),
        split.valid ? llvm::formatv("iteration {0:f3} ms with the all-reduces", split.iterationMs)
                          .str()
                    : split.reason,
        split.plannerSeconds));
  };
  hooks.explainFailure = [&](Diagnostic &diag) {
    diag.attachNote() << "the problem is in " << outputs.pathOf("problem.json")
                      << "; replay the planning with: " << replay;
  };
  hooks.onPlanned = [&](ModuleOp, pipeline::PartitionOutcome &result) -> LogicalResult {
    const partitioner::PlanResult &best = *result.report.best();
    if (const partitioner::ReplicaPlan *split = result.replicaSplit())
      progress.step(llvm::formatv("chose {0}: iteration {1:f3} ms with the gradient "
                                  "all-reduces",
                                  partitioner::describeSplit(*split), split->iterationMs));
    progress.step(llvm::formatv("chose {0} by {1}: iteration {2:f3} ms, period {3:f3} ms; {4}",
                                best.algorithm, result.objective, best.iterationMs,
                                best.periodMs, partitioner::describeStages(result.problem, best)));
    outcome = std::move(result);
    return success();
  };

  progress.step("cost model on " + plan.target + " at " + plan.dtype);
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pipeline::buildPlanPipeline(pm, plan, std::move(hooks));
  if (failed(pm.run(module))) {
    // When planning itself failed, the problem is kept for the replay the
    // error advises; a later failure leaves the old outputs.
    if (problemWritten && !outcome)
      (void)outputs.commit(module);
    return failure();
  }
  const partitioner::Problem &problem = outcome->problem;
  const partitioner::PlanResult &best = *outcome->report.best();
  progress.step(plan.train ? "split into stages with send/recv on every cut; schedule attached; "
                             "backward programs built"
                           : "split into stages with send/recv on every cut; schedule attached");
  // The IR files are printed on another thread while the programs are lowered:
  // the lowering reads the module and builds only in its own copy, in dialects
  // loaded before the printer starts (a context without threads prints them
  // when they are needed).
  if (plan.train)
    loadPipeToEmitCDialects(module.getContext());
  std::future<IrFiles> irFiles =
      std::async(module.getContext()->isMultithreadingEnabled() ? std::launch::async
                                                                : std::launch::deferred,
                 [module]() { return printIrFiles(module); });
  std::map<std::string, std::string> programFiles;
  if (plan.train) {
    auto built = buildTrainingProgram(module, *outcome, options.modelPath, plan.optimizer);
    if (failed(built))
      return failure();
    programFiles = std::move(*built);
    progress.step("lowered to " + llvm::Twine(programFiles.size() - 1) +
                  " per-rank C++ programs (rankK.cpp) and program.json");
  }

  std::string report;
  llvm::raw_string_ostream os(report);
  writeHeader(*outcome, options, os);
  std::ostringstream table;
  partitioner::writeTable(problem, outcome->report, table, /*timings=*/false);
  os << table.str();
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>())
    stageSummary(pipelineOp, os);
  explainBoundaries(problem, outcome->report, os);
  if (!programFiles.empty())
    os << llvm::formatv("\ntraining step: loss {0}, optimizer {1} (lr {2}); rank0.cpp .. "
                        "rank{3}.cpp and program.json written beside this report; train with "
                        "pipe-run on this directory\n",
                        plan.loss, plan.optimizer, pipeline::formatDouble(plan.lr),
                        programFiles.size() - 2);
  else
    os << "\nno training programs (--train=false or --no-codegen)\n";
  os.flush();
  reportStream << report;
  reportStream.flush();

  std::ostringstream planJson, trace, svg;
  partitioner::writePlanJson(problem, outcome->report, planJson, /*timings=*/false);
  partitioner::writeTraceJson(problem, best, trace);
  partitioner::writeSvg(problem, best, svg);
  // Keys in sorted maps, as the partitioner writes them: an order-keeping object
  // looks its keys up one by one, and stage_of has one per node (60,000 on a large
  // chain: seconds to parse).
  nlohmann::json planOut = nlohmann::json::parse(planJson.str());
  planOut["settings"] = nlohmann::json(settingsJson(*outcome, options));
  planOut["model"] = {{"name", llvm::sys::path::stem(options.modelPath).str()},
                      {"parameters", outcome->parameters},
                      {"forward_flops", outcome->forwardFlops},
                      {"target", outcome->targetName}};
  IrFiles ir = irFiles.get();
  // Names are UTF-8 (the importer checks); a model path may not be: replace.
  std::string planText =
      planOut.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (failed(outputs.write(module, "plan.json", planText)) ||
      failed(outputs.write(module, "schedule.trace.json", trace.str())) ||
      failed(outputs.write(module, "schedule.svg", svg.str())) ||
      failed(outputs.write(module, "report.txt", report)) ||
      failed(outputs.write(module, "pipeline.mlir", ir.pipeline)))
    return failure();
  for (const auto &[name, text] : ir.stages)
    if (failed(outputs.write(module, name, text)))
      return failure();
  for (const auto &[name, text] : programFiles)
    if (failed(outputs.write(module, name, text)))
      return failure();
  if (!options.onnxWithPlan.empty()) {
    if (llvm::StringRef(options.modelPath).ends_with(".onnxtext"))
      return module.emitError("--write-onnx-plan needs a binary .onnx model");
    nlohmann::ordered_json summary = {{"algorithm", best.algorithm},
                                      {"schedule", partitioner::toString(best.scheduleKind)},
                                      {"stages", best.allocation.numStages()},
                                      {"period_ms", best.periodMs},
                                      // With replicas: with the gradient all-reduces,
                                      // as program.json predicts it.
                                      {"iteration_ms", outcome->replicaSplit()
                                                           ? outcome->replicaSplit()->iterationMs
                                                           : best.iterationMs},
                                      {"replicas", outcome->replicas()},
                                      {"replica_layout",
                                       partitioner::toString(outcome->replicaLayout())},
                                      {"tool_version", toolVersion()}};
    std::string error;
    if (failed(onnx_import::writeOnnxWithStages(options.modelPath, options.onnxWithPlan,
                                                pipeline::stageOfNodes(*outcome), summary.dump(),
                                                error)))
      return module.emitError(error);
  }
  if (failed(outputs.commit(module)))
    return failure();
  progress.step("wrote " + outputs.getPath() +
                "/ (plan.json, problem.json, report.txt, "
                "schedule.trace.json, schedule.svg, pipeline.mlir, stage*.mlir" +
                (programFiles.empty() ? ")" : ", rank*.cpp, program.json); train it with: "
                                              "pipe-run " + outputs.getPath()));
  return success();
}
