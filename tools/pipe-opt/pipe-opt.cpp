//===- pipe-opt.cpp - the pipe-opt driver ---------------------------------===//
//
// mlir-opt for pipe-opt's dialects and passes, which also reads ONNX models:
// a .onnx or .onnxtext input is imported (and shape-inferred) before the
// requested passes run; any other input is parsed as MLIR.
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/CostInterface.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"
#include "pipe/Driver/MainJob.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "partitioner/Problem.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace pipe::test {
void registerTestAnalysisPasses(); // test/lib/Analysis
} // namespace pipe::test

static llvm::cl::OptionCategory importCategory("ONNX import options");
static llvm::cl::opt<int64_t> microBatchSize(
    "micro-batch-size", llvm::cl::desc("Size bound to the leading (batch) dim of inputs"),
    llvm::cl::init(0), llvm::cl::cat(importCategory));
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

static llvm::cl::OptionCategory jobCategory("Main job options (ONNX input)");
static llvm::cl::opt<int> pipelineStages(
    "pipeline-stages",
    llvm::cl::desc("Plan pipelined training on N stages and write the outputs (-o DIR)"),
    llvm::cl::init(0), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobTarget("target", llvm::cl::desc("GPU (h100, a100-80gb, ...) or a target JSON file"),
                                            llvm::cl::init("h100"), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobMemory("memory", llvm::cl::desc("Memory per GPU, e.g. 80GB (default: the target's)"),
                                            llvm::cl::init(""), llvm::cl::cat(jobCategory));
static llvm::cl::opt<int> jobMicrobatches("microbatches", llvm::cl::desc("Micro-batches per iteration"),
                                          llvm::cl::init(32), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobSchedule(
    "schedule",
    llvm::cl::desc("gpipe, 1f1b, interleaved, 1f1b-stash, zb-h1, periodic (default: the best "
                   "of 1f1b and interleaved)"),
    llvm::cl::init(""), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobAlgorithm("algo", llvm::cl::desc("Partitioning algorithm (default: best)"),
                                               llvm::cl::init("best"), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobDtype("dtype", llvm::cl::desc("Compute dtype: fp32, tf32, bf16, fp16, fp8"),
                                           llvm::cl::init("fp32"), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobOptimizer("optimizer", llvm::cl::desc("sgd, momentum or adam"),
                                               llvm::cl::init("adam"), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> jobProfile("profile", llvm::cl::desc("Measured per-node times (JSON keyed by ONNX node name)"),
                                             llvm::cl::init(""), llvm::cl::cat(jobCategory));
static llvm::cl::opt<std::string> writeOnnxPlan(
    "write-onnx-plan", llvm::cl::desc("Also write the model with each node's stage as node metadata"),
    llvm::cl::init(""), llvm::cl::cat(jobCategory));
static llvm::cl::opt<bool> noProgress("no-progress", llvm::cl::desc("No progress lines on stderr"),
                                      llvm::cl::init(false), llvm::cl::cat(jobCategory));

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
  if (microBatchSize > 0)
    options.microBatchSize = microBatchSize;
  else if (pipelineStages > 0)
    options.microBatchSize = 1; // The main job plans per micro-batch; 1 unless told.
  options.inferShapes = !noShapeInference;
  return success();
}

static LogicalResult runOnOnnx(llvm::StringRef inputFilename, llvm::StringRef outputFilename,
                               DialectRegistry &registry) {
  pipe::onnx_import::ImportOptions options;
  if (failed(parseDimBindings(options)))
    return failure();
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  MLIRContext context(registry);
  // ONNX users get one line per problem, located at the node; the IR dump
  // that MLIR attaches by default would be noise to them.
  context.printOpOnDiagnostic(false);
  ScopedDiagnosticHandler handler(&context, [](Diagnostic &diag) {
    printDiagnostic(diag, llvm::errs());
    return success();
  });
  auto module = pipe::onnx_import::importOnnxFile(inputFilename, &context, options);
  if (!module)
    return failure();
  if (pipelineStages > 0) {
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
    job.modelPath = inputFilename.str();
    job.outputDir = outputFilename == "-" ? "out" : outputFilename.str();
    job.onnxWithPlan = writeOnnxPlan;
    job.progress = !noProgress;
    return pipe::driver::runMainJob(*module, job, llvm::outs());
  }
  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)) || failed(config.setupPassPipeline(pm)))
    return failure();
  pm.enableVerifier(config.shouldVerifyPasses());
  if (failed(pm.run(*module)))
    return failure();
  std::string error;
  auto output = openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "pipe-opt: error: " << error << "\n";
    return failure();
  }
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return success();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllPasses();
  registry.insert<pipe::nn::NNDialect>();
  pipe::nn::registerNNPasses();
  registry.insert<pipe::pipeline::PipeDialect>();
  pipe::pipeline::registerPipePasses();
  pipe::registerCostModelInterfaces(registry);
  pipe::test::registerTestAnalysisPasses();

  auto [inputFilename, outputFilename] =
      registerAndParseCLIOptions(argc, argv, "pipe-opt: pipeline-parallel training planner\n",
                                 registry);
  if (printOnnxOps) {
    for (const std::string &op : pipe::onnx_import::supportedOnnxOps())
      llvm::outs() << op << "\n";
    return 0;
  }
  if (pipelineStages < 0) {
    llvm::errs() << "pipe-opt: error: --pipeline-stages must be positive, got " << pipelineStages
                 << "\n";
    return 1;
  }
  if (pipe::onnx_import::isOnnxFile(inputFilename))
    return failed(runOnOnnx(inputFilename, outputFilename, registry)) ? 1 : 0;
  if (pipelineStages > 0) {
    llvm::errs() << "pipe-opt: error: --pipeline-stages runs the main job on an ONNX model "
                    "(.onnx, .onnxtext); on MLIR input use "
                    "--pass-pipeline='builtin.module(pipe-partition{stages=N},pipe-split-stages,"
                    "pipe-schedule)'\n";
    return 1;
  }
  return asMainReturnCode(MlirOptMain(argc, argv, inputFilename, outputFilename, registry));
}
