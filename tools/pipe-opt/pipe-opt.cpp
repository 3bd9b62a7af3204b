//===- pipe-opt.cpp - the pipe-opt driver ---------------------------------===//
//
// mlir-opt for pipe-opt's dialects and passes, which also reads ONNX models:
// a .onnx or .onnxtext input is imported (and shape-inferred) before the
// requested passes run; any other input is parsed as MLIR.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"
#include "pipe/Import/Onnx/OnnxImporter.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/InitAll.h"

#include "partitioner/Problem.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace pipe::test {
void registerTestAnalysisPasses(); // test/lib/Analysis
} // namespace pipe::test

// pipe-opt's own options come first in --help, with their defaults; the
// options of MLIR and LLVM stay in --help-hidden (--help-list-hidden). --help
// lists categories by name, which is why these names start as they do.
static llvm::cl::OptionCategory
    jobCategory("Main job (pipe-opt MODEL.onnx --pipeline-stages=N --micro-batch-size=B -o DIR)");
static llvm::cl::OptionCategory planCategory("Main job: planning settings");
static llvm::cl::OptionCategory importCategory("ONNX import");
static llvm::cl::OptionCategory
    mlirCategory("Passes on MLIR input (pipe-opt INPUT.mlir --pass-pipeline=...)");
static llvm::cl::OptionCategory
    toolCategory("Tool (--help-hidden lists every MLIR and LLVM option)");

static llvm::cl::opt<std::string> inputFilename(llvm::cl::Positional,
                                                llvm::cl::desc("<model.onnx | input.mlir>"),
                                                llvm::cl::init("-"));
static llvm::cl::opt<std::string> outputFilename(
    "o",
    llvm::cl::desc("Main job: the output directory, replaced as a whole (default: out); "
                   "otherwise the output file (default: stdout)"),
    llvm::cl::value_desc("path"), llvm::cl::init("-"), llvm::cl::cat(jobCategory));
static llvm::cl::opt<int> pipelineStages(
    "pipeline-stages",
    llvm::cl::desc("Plan pipelined training on N GPUs and write the outputs (a plan may run "
                   "several stages on one GPU; the report says how many)"),
    llvm::cl::value_desc("N"), llvm::cl::init(0), llvm::cl::cat(jobCategory));
static llvm::cl::opt<int64_t> microBatchSize(
    "micro-batch-size",
    llvm::cl::desc("Samples per micro-batch, bound to the symbolic batch dim of the inputs "
                   "(required when the batch is symbolic)"),
    llvm::cl::value_desc("B"), llvm::cl::init(0), llvm::cl::cat(jobCategory));
static llvm::cl::opt<int>
    jobMicrobatches("microbatches", llvm::cl::desc("Micro-batches per iteration (default: 32)"),
                    llvm::cl::value_desc("M"), llvm::cl::init(32), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    jobTarget("target",
              llvm::cl::desc("GPU: h100, a100-80gb, ... or a target JSON file (default: h100)"),
              llvm::cl::init("h100"), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string> jobMemory(
    "memory",
    llvm::cl::desc("Memory per GPU with its unit, e.g. 80GB or 80GiB (default: the target's)"),
    llvm::cl::value_desc("size"), llvm::cl::init(""), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    jobDtype("dtype", llvm::cl::desc("Compute dtype: fp32, tf32, bf16, fp16, fp8 (default: fp32)"),
             llvm::cl::init("fp32"), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    jobOptimizer("optimizer", llvm::cl::desc("sgd, momentum, adam or adamw (default: adam)"),
                 llvm::cl::init("adam"), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string> jobSchedule(
    "schedule",
    llvm::cl::desc("gpipe, 1f1b, interleaved, 1f1b-stash, zb-h1, periodic (default: the best "
                   "of 1f1b and interleaved)"),
    llvm::cl::init(""), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    jobAlgorithm("algo", llvm::cl::desc("Partitioning algorithm, or best / all (default: best)"),
                 llvm::cl::init("best"), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string> jobObjective(
    "objective",
    llvm::cl::desc("What best minimises: iteration (the time of one training step of M "
                   "micro-batches) or period (the steady state) (default: iteration)"),
    llvm::cl::init("iteration"), llvm::cl::cat(planCategory));
static llvm::cl::opt<double>
    jobTimeLimit("time-limit",
                 llvm::cl::desc("Wall-clock seconds each MIP algorithm (ilp, ilp-general) may take "
                                "(default: 10)"),
                 llvm::cl::value_desc("seconds"), llvm::cl::init(10), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    jobProfile("profile", llvm::cl::desc("Measured per-node times (JSON keyed by ONNX node name)"),
               llvm::cl::value_desc("file"), llvm::cl::init(""), llvm::cl::cat(planCategory));
static llvm::cl::opt<std::string>
    writeOnnxPlan("write-onnx-plan",
                  llvm::cl::desc("Also write the model with each node's stage as node metadata"),
                  llvm::cl::value_desc("file"), llvm::cl::init(""), llvm::cl::cat(jobCategory));
static llvm::cl::opt<bool> noProgress("no-progress", llvm::cl::desc("No progress lines on stderr"),
                                      llvm::cl::init(false), llvm::cl::cat(jobCategory));

static llvm::cl::list<std::string>
    dimBindings("dim", llvm::cl::desc("Bind a symbolic input dim: --dim NAME=VALUE"),
                llvm::cl::cat(importCategory));
static llvm::cl::opt<bool>
    noShapeInference("no-shape-inference",
                     llvm::cl::desc("Import without inferring shapes or folding"),
                     llvm::cl::init(false), llvm::cl::cat(importCategory));
static llvm::cl::opt<bool>
    printOnnxOps("print-onnx-ops", llvm::cl::desc("Print the supported ONNX op types and exit"),
                 llvm::cl::init(false), llvm::cl::cat(importCategory));

static llvm::cl::OptionCategory trainCategory("Main job: training step (rankK.cpp)");
static llvm::cl::opt<bool>
    noCodegen("no-codegen",
              llvm::cl::desc("Plan only: no backward programs, no rankK.cpp/program.json"),
              llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> disableDropout(
    "disable-dropout",
    llvm::cl::desc("Train without dropout (the identity), e.g. to compare with a reference"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string>
    jobLoss("loss",
            llvm::cl::desc("Training loss on model output 0: cross-entropy, mse or none "
                           "(default: cross-entropy)"),
            llvm::cl::init("cross-entropy"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobLr("lr", llvm::cl::desc("Learning rate (default: 0.001)"),
                                   llvm::cl::init(1e-3), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobMomentum("momentum",
                                         llvm::cl::desc("SGD momentum (default: 0.9)"),
                                         llvm::cl::init(0.9), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobBeta1("beta1", llvm::cl::desc("Adam beta1 (default: 0.9)"),
                                      llvm::cl::init(0.9), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobBeta2("beta2", llvm::cl::desc("Adam beta2 (default: 0.999)"),
                                      llvm::cl::init(0.999), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobEps("eps", llvm::cl::desc("Adam epsilon (default: 1e-8)"),
                                    llvm::cl::init(1e-8), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> jobWeightDecay("weight-decay",
                                            llvm::cl::desc("Weight decay (default: 0)"),
                                            llvm::cl::init(0.0), llvm::cl::cat(trainCategory));

/// Keeps pipe-opt's own options and a few MLIR ones in --help; every other
/// option moves to --help-hidden. The generic options (--help, --version)
/// are listed after pipe-opt's.
static void arrangeHelp() {
  const llvm::StringRef mlirVisible[] = {"pass-pipeline",      "split-input-file",
                                         "verify-diagnostics", "mlir-print-debuginfo",
                                         "show-dialects",      "list-passes"};
  const llvm::StringRef toolVisible[] = {"help", "help-list", "version"};
  for (auto &[name, option] : llvm::cl::getRegisteredOptions()) {
    if (llvm::is_contained(option->Categories, &jobCategory) ||
        llvm::is_contained(option->Categories, &planCategory) ||
        llvm::is_contained(option->Categories, &trainCategory) ||
        llvm::is_contained(option->Categories, &importCategory))
      continue;
    if (llvm::is_contained(mlirVisible, name)) {
      option->Categories.assign({&mlirCategory});
      continue;
    }
    if (llvm::is_contained(toolVisible, name)) {
      option->Categories.assign({&toolCategory});
      continue;
    }
    if (option->getOptionHiddenFlag() == llvm::cl::NotHidden)
      option->setHiddenFlag(llvm::cl::Hidden);
  }
}

/// One line per diagnostic: `model.onnx: node 'name': error: message`.
static void printDiagnostic(Diagnostic &diag, llvm::raw_ostream &os) {
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

static LogicalResult parseDimBindings(pipe::onnx_import::ImportOptions &options) {
  for (const std::string &binding : dimBindings) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size < 1) {
      llvm::errs() << "pipe-opt: error: --dim expects NAME=VALUE with VALUE >= 1, got '"
                   << binding << "'\n";
      return failure();
    }
    options.dims[name] = size;
  }
  // 0 is the option's "not given"; given explicitly it would plan empty tensors.
  if (microBatchSize < 0 || (microBatchSize.getNumOccurrences() && microBatchSize < 1)) {
    llvm::errs() << "pipe-opt: error: --micro-batch-size must be at least 1, got "
                 << microBatchSize << "\n";
    return failure();
  }
  if (pipelineStages > 0 &&
      (jobMicrobatches < 1 || jobMicrobatches > partitioner::kMaxMicrobatches)) {
    llvm::errs() << "pipe-opt: error: --microbatches must be in 1.."
                 << partitioner::kMaxMicrobatches << ", got " << jobMicrobatches << "\n";
    return failure();
  }
  if (pipelineStages > partitioner::kMaxGpus) {
    llvm::errs() << "pipe-opt: error: --pipeline-stages must be at most "
                 << partitioner::kMaxGpus << ", got " << pipelineStages << "\n";
    return failure();
  }
  // No default: a symbolic batch dim without --micro-batch-size is an import
  // error that names the input and the option, rather than a silent 1.
  if (microBatchSize > 0)
    options.microBatchSize = microBatchSize;
  options.inferShapes = !noShapeInference;
  return success();
}

/// The main job's options as given on the command line.
static pipe::driver::MainJobOptions mainJobOptions() {
  pipe::driver::MainJobOptions job;
  job.partition.stages = pipelineStages;
  job.partition.target = jobTarget;
  job.partition.memory = jobMemory;
  // Only a size the user gave is checked against the model: a model with a
  // fixed batch plans at that batch.
  job.partition.microBatchSize = microBatchSize;
  job.partition.microbatches = jobMicrobatches;
  job.partition.schedule = jobSchedule;
  job.partition.algorithm = jobAlgorithm;
  job.partition.dtype = jobDtype;
  job.partition.optimizer = jobOptimizer;
  job.partition.profile = jobProfile;
  job.partition.objective = jobObjective;
  job.partition.timeLimitSeconds = jobTimeLimit;
  job.modelPath = inputFilename.getValue();
  job.outputDir = outputFilename == "-" ? "out" : outputFilename.getValue();
  job.onnxWithPlan = writeOnnxPlan;
  job.progress = !noProgress;
  job.training.codegen = !noCodegen;
  job.training.dropout = !disableDropout;
  job.training.loss = jobLoss;
  job.training.lr = jobLr;
  job.training.momentum = jobMomentum;
  job.training.beta1 = jobBeta1;
  job.training.beta2 = jobBeta2;
  job.training.eps = jobEps;
  job.training.weightDecay = jobWeightDecay;
  job.microBatchSizeGiven = microBatchSize > 0;
  return job;
}

/// Usage errors: option values out of range or unknown, checked before any
/// input is read. Prints one line and gives failure (pipe-opt exits 2).
static LogicalResult checkUsage(pipe::onnx_import::ImportOptions &importOptions) {
  if (pipelineStages.getNumOccurrences() > 0 && pipelineStages < 1) {
    llvm::errs() << "pipe-opt: error: --pipeline-stages is the number of GPUs, at least 1; got "
                 << pipelineStages << "\n";
    return failure();
  }
  // NaN fails every comparison; infinity is no limit a solver can take.
  if (!(jobTimeLimit > 0 && jobTimeLimit <= 86400)) {
    llvm::errs() << "pipe-opt: error: --time-limit must be a number of seconds in (0, 86400], got "
                 << jobTimeLimit << "\n";
    return failure();
  }
  if (failed(parseDimBindings(importOptions)))
    return failure();
  if (pipelineStages > 0) {
    std::string error;
    if (failed(pipe::driver::checkMainJobOptions(mainJobOptions(), error))) {
      llvm::errs() << "pipe-opt: error: " << error << "\n";
      return failure();
    }
  }
  return success();
}

/// An ONNX model (imported), or for the main job an MLIR module: one that
/// `pipe-opt model.onnx -o model.mlir` wrote, whose `nn.model_file` names the
/// model its parameters are read from.
static LogicalResult runOnModel(DialectRegistry &registry,
                                const pipe::onnx_import::ImportOptions &options) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  MLIRContext context(registry);
  // ONNX users get one line per problem, located at the node; the IR dump
  // that MLIR attaches by default would be noise to them.
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    printDiagnostic(diag, llvm::errs());
    return success();
  });
  const bool onnx = pipe::onnx_import::isOnnxFile(inputFilename);
  OwningOpRef<ModuleOp> module =
      onnx ? pipe::onnx_import::importOnnxFile(inputFilename, &context, options)
           : parseSourceFile<ModuleOp>(inputFilename, &context);
  if (!module)
    return failure();
  if (pipelineStages > 0) {
    pipe::driver::MainJobOptions job = mainJobOptions();
    if (!onnx) {
      auto *nn = context.getOrLoadDialect<pipe::nn::NNDialect>();
      StringAttr modelFile = nn->getModelFileAttrHelper().getAttr(*module);
      if (!modelFile)
        return emitError(module->getLoc())
               << "the module names no model file (nn.model_file): the main job reads the "
                  "parameters from the ONNX model; write the module with pipe-opt MODEL.onnx "
                  "-o " << llvm::sys::path::filename(inputFilename.getValue());
      job.modelPath = modelFile.str();
    }
    return pipe::driver::runMainJob(*module, job, llvm::outs());
  }
  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)) || failed(config.setupPassPipeline(pm)))
    return failure();
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(pm.run(*module)))
    return failure();
  // Written to a temporary file beside -o and renamed over it: a failed run
  // leaves the previous file, never a part of the new one.
  if (llvm::Error error = llvm::writeToOutput(outputFilename, [&](llvm::raw_ostream &os) {
        module->print(os);
        os << "\n";
        return llvm::Error::success();
      })) {
    llvm::errs() << "pipe-opt: error: " << llvm::toString(std::move(error)) << "\n";
    return failure();
  }
  return success();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  pipe::registerAllDialectsAndPasses(registry);
  pipe::test::registerTestAnalysisPasses();

  (void)registerCLIOptions("pipe-opt", registry);
  arrangeHelp();
  llvm::cl::SetVersionPrinter(
      [](llvm::raw_ostream &os) { os << pipe::driver::toolVersion() << "\n"; });
  // Exit statuses (docs/reliability.md): 2 for usage errors (LLVM's option
  // parser and the checks below, before any input is read), 1 for every other
  // error.
  if (!llvm::cl::ParseCommandLineOptions(
          argc, argv,
          "pipe-opt: plans pipelined model-parallel training from an ONNX model; on MLIR "
          "input, mlir-opt with pipe-opt's dialects and passes\n",
          &llvm::errs()))
    return 2;
  if (printOnnxOps) {
    for (const std::string &op : pipe::onnx_import::supportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  pipe::onnx_import::ImportOptions importOptions;
  if (failed(checkUsage(importOptions)))
    return 2;
  if (pipe::onnx_import::isOnnxFile(inputFilename) || pipelineStages > 0) {
    const bool ok = succeeded(runOnModel(registry, importOptions));
    // The report (or the module) on standard output is part of the result: a
    // failed write is an error, reported here rather than by LLVM at exit.
    llvm::outs().flush();
    if (llvm::outs().has_error()) {
      llvm::outs().clear_error();
      llvm::errs() << "pipe-opt: error: cannot write to standard output\n";
      return 1;
    }
    return ok ? 0 : 1;
  }
  return asMainReturnCode(
      MlirOptMain(argc, argv, inputFilename.getValue(), outputFilename.getValue(), registry));
}
