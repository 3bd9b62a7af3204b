//===- pipe-opt.cpp - the pipe-opt driver ---------------------------------===//
//
// mlir-opt for pipe-opt's dialects and passes, which also reads ONNX models:
// a .onnx or .onnxtext input is imported (and shape-inferred) before the
// requested passes run; any other input is parsed as MLIR.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Import/Onnx/OnnxImporter.h"
#include "pipe/InitAll.h"
#include "partitioner/Planner.h"

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
static llvm::cl::OptionCategory
    planCategory("Main job: planning settings (pipe-plan-pipeline's options)");
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
static llvm::cl::opt<int> replicaCount(
    "replicas",
    llvm::cl::desc("Train R data-parallel copies of the planned pipeline on R x N GPUs "
                   "(--gpus=R*N): --microbatches is the step's, each replica trains 1/R of "
                   "them, and pipe-run runs all R (default 1)"),
    llvm::cl::value_desc("R"), llvm::cl::init(1), llvm::cl::cat(jobCategory));
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

static llvm::cl::opt<bool>
    noCodegen("no-codegen",
              llvm::cl::desc("Plan only: no backward programs, no rankK.cpp/program.json "
                             "(the same as --train=false)"),
              llvm::cl::init(false), llvm::cl::cat(jobCategory));
static llvm::cl::opt<bool> allowInferenceExport(
    "allow-inference-export",
    llvm::cl::desc("Plan a model exported for inference (BatchNorm in inference mode, weights "
                   "folded or renamed, tied weights stored twice) instead of refusing it"),
    llvm::cl::init(false), llvm::cl::cat(jobCategory));
static llvm::cl::opt<bool> disableDropout(
    "disable-dropout",
    llvm::cl::desc("Train without dropout (the identity), e.g. to compare with a reference"),
    llvm::cl::init(false), llvm::cl::cat(jobCategory));

/// The main job's planning and training options are pipe-plan-pipeline's (declared
/// once, with the pass): each is offered here as `--NAME=VALUE` under the same
/// name and description, and what the user gives is parsed by the pass.
class PlanOptionFlags {
  static llvm::StringRef valueKind(pipe::pipeline::PlanOptionInfo::Kind kind) {
    switch (kind) {
    case pipe::pipeline::PlanOptionInfo::Integer: return "integer";
    case pipe::pipeline::PlanOptionInfo::Number: return "number";
    case pipe::pipeline::PlanOptionInfo::Flag: return "true|false";
    case pipe::pipeline::PlanOptionInfo::String: break;
    }
    return "string";
  }

public:
  void registerFlags() {
    for (pipe::pipeline::PlanOptionInfo &info : pipe::pipeline::planOptionInfo()) {
      // --pipeline-stages names the GPUs on this command line.
      if (info.name == "stages")
        continue;
      std::string description = info.description;
      if (!info.defaultValue.empty() && !llvm::StringRef(description).contains("default"))
        description += " (default: " + info.defaultValue + ")";
      descriptions.push_back(std::make_unique<std::string>(std::move(description)));
      names.push_back(std::make_unique<std::string>(info.name));
      auto flag = std::make_unique<llvm::cl::opt<std::string>>(
          llvm::StringRef(*names.back()), llvm::cl::desc(*descriptions.back()),
          llvm::cl::cat(planCategory),
          info.flag() ? llvm::cl::ValueOptional : llvm::cl::ValueRequired,
          llvm::cl::value_desc(valueKind(info.kind)));
      flags.push_back({std::move(flag), info.flag()});
    }
  }

  /// (name, value) of each flag given, for pipe-plan-pipeline.
  std::vector<std::pair<std::string, std::string>> given() const {
    std::vector<std::pair<std::string, std::string>> values;
    for (const auto &[flag, isFlag] : flags) {
      if (!flag->getNumOccurrences())
        continue;
      std::string value = flag->getValue();
      if (isFlag && value.empty())
        value = "true";
      values.emplace_back(flag->ArgStr.str(), std::move(value));
    }
    return values;
  }

private:
  std::vector<std::unique_ptr<std::string>> names, descriptions;
  std::vector<std::pair<std::unique_ptr<llvm::cl::opt<std::string>>, bool>> flags;
};
static PlanOptionFlags planFlags;

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

/// Whether the command line asks for the main job (--pipeline-stages or --gpus).
static bool mainJob = false;

/// The main job's options: the driver's own, and pipe-plan-pipeline's as given.
/// Gives failure after printing one line (a usage error: exit status 2).
static LogicalResult parseJobOptions(pipe::driver::MainJobOptions &job,
                                     pipe::onnx_import::ImportOptions &import) {
  auto usageError = [](const llvm::Twine &message) {
    llvm::errs() << "pipe-opt: error: " << message << "\n";
    return failure();
  };
  std::vector<std::pair<std::string, std::string>> given = planFlags.given();
  std::string error;
  auto plan = pipe::pipeline::parsePlanOptions(given, error);
  if (failed(plan))
    return usageError(error);
  job.plan = std::move(*plan);
  job.plan.stages = pipelineStages;
  if (noCodegen)
    job.plan.train = false;
  job.modelPath = inputFilename.getValue();
  job.outputDir = outputFilename == "-" ? "out" : outputFilename.getValue();
  job.onnxWithPlan = writeOnnxPlan;
  job.progress = !noProgress;
  job.dropout = !disableDropout;
  job.allowInferenceExport = allowInferenceExport;

  // 0 is the option's "not given"; given explicitly it would plan empty tensors.
  const bool batchGiven = llvm::any_of(given, [](const auto &option) {
    return option.first == "micro-batch-size";
  });
  if (batchGiven && job.plan.microBatchSize < 1)
    return usageError("--micro-batch-size must be at least 1, got " +
                      llvm::Twine(job.plan.microBatchSize));
  const bool gpusGiven = llvm::any_of(given, [](const auto &option) {
    return option.first == "gpus";
  });
  if (replicaCount.getNumOccurrences() > 0 && gpusGiven)
    return usageError("--replicas=R is --gpus=R*N: give one of them");
  if (pipelineStages.getNumOccurrences() == 0 && replicaCount.getNumOccurrences() > 0)
    return usageError("--replicas is an option of the main job: give --pipeline-stages=N too");
  if (pipelineStages.getNumOccurrences() == 0 && !gpusGiven)
    for (const auto &[name, value] : given)
      if (name != "micro-batch-size")
        return usageError("--" + name + " is an option of the main job: give " +
                          "--pipeline-stages=N (or --gpus=G) too");
  if (replicaCount.getNumOccurrences() > 0) {
    if (replicaCount < 1 || replicaCount > partitioner::kMaxGpus)
      return usageError("--replicas must be in 1.." + llvm::Twine(partitioner::kMaxGpus) +
                        ", got " + llvm::Twine(replicaCount));
    if (pipelineStages >= 1 &&
        static_cast<int64_t>(replicaCount) * pipelineStages > partitioner::kMaxGpus)
      return usageError("--replicas=" + llvm::Twine(replicaCount) + " of --pipeline-stages=" +
                        llvm::Twine(pipelineStages) + " make more than " +
                        llvm::Twine(partitioner::kMaxGpus) + " GPUs");
    // One replica is one pipeline.
    if (pipelineStages >= 1 && replicaCount > 1)
      job.plan.gpus = replicaCount * pipelineStages;
  }
  mainJob = pipelineStages.getNumOccurrences() > 0 || gpusGiven;
  if (mainJob && failed(pipe::driver::checkMainJobOptions(job, error)))
    return usageError(error);

  for (const std::string &binding : dimBindings) {
    auto [name, value] = llvm::StringRef(binding).split('=');
    int64_t size;
    if (name.empty() || value.getAsInteger(10, size) || size < 1)
      return usageError("--dim expects NAME=VALUE with VALUE >= 1, got '" + binding + "'");
    import.dims[name] = size;
  }
  // No default: a symbolic batch dim without --micro-batch-size is an import
  // error that names the input and the option, rather than a silent 1.
  if (job.plan.microBatchSize > 0)
    import.microBatchSize = job.plan.microBatchSize;
  import.inferShapes = !noShapeInference;
  return success();
}

/// An ONNX model (imported), or for the main job an MLIR module: one that
/// `pipe-opt model.onnx -o model.mlir` wrote, whose `nn.model_file` names the
/// model its parameters are read from.
static LogicalResult runOnModel(DialectRegistry &registry,
                                const pipe::onnx_import::ImportOptions &options,
                                pipe::driver::MainJobOptions job) {
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  MLIRContext context(registry);
  // ONNX users get one line per problem, located at the node; the IR dump
  // that MLIR attaches by default would be noise to them.
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    pipe::driver::printDiagnostic(diag, llvm::errs());
    return success();
  });
  if (mainJob) {
    OwningOpRef<ModuleOp> module =
        pipe::driver::loadMainJobInput(inputFilename, &context, options, job.modelPath);
    return module ? pipe::driver::runMainJob(*module, job, llvm::outs()) : failure();
  }
  OwningOpRef<ModuleOp> module =
      pipe::onnx_import::isOnnxFile(inputFilename)
          ? pipe::onnx_import::importOnnxFile(inputFilename, &context, options)
          : parseSourceFile<ModuleOp>(inputFilename, &context);
  if (!module)
    return failure();
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
  partitioner::reuseFreedMemory();
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  pipe::registerAllDialectsAndPasses(registry);
  pipe::test::registerTestAnalysisPasses();

  (void)registerCLIOptions("pipe-opt", registry);
  planFlags.registerFlags();
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
  pipe::driver::MainJobOptions job;
  if (failed(parseJobOptions(job, importOptions)))
    return 2;
  if (pipe::onnx_import::isOnnxFile(inputFilename) || mainJob) {
    const bool ok = succeeded(runOnModel(registry, importOptions, std::move(job)));
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
