//===- MainJobOptionsFuzzer.cpp - libFuzzer harness: main-job options -----===//
//
// The options of `pipe-opt model.onnx --pipeline-stages=N` as the main job
// reads them: lines `key=value` (stages, microbatches, micro_batch_size,
// memory, target, schedule, algo, dtype, optimizer) plus `target_json=` and
// `profile_json=` whose value is the content of a --target / --profile file.
// Each input partitions a small imported MLP (cost model, partitioner, stage
// annotation); it must plan or fail with an error diagnostic. Stage and
// micro-batch counts beyond a fuzzing-sized problem are checked by the
// partitioner's limits but not planned.
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/CostInterface.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;

namespace {
const char *const kModel = R"(<
  ir_version: 8,
  opset_import: ["" : 17]
>
mlp (float[N, 16] x) => (float[N, 4] y)
<float[16, 32] w1 = {)";

/// A 16 -> 32 -> 32 -> 4 MLP with GELU-free layers (MatMul, Add, Relu).
std::string modelText() {
  std::string text = kModel;
  auto values = [](int count) {
    std::string list;
    for (int i = 0; i < count; ++i)
      list += (i ? ", " : "") + std::to_string((i % 7) * 0.125);
    return list;
  };
  text += values(16 * 32) + "}, float[32] b1 = {" + values(32) + "}, float[32, 32] w2 = {" +
          values(32 * 32) + "}, float[32, 4] w3 = {" + values(32 * 4) + "}>\n";
  text += R"({
  h1 = MatMul(x, w1)
  a1 = Add(h1, b1)
  r1 = Relu(a1)
  h2 = MatMul(r1, w2)
  r2 = Relu(h2)
  y = MatMul(r2, w3)
}
)";
  return text;
}

/// Writes `content` to a per-process file and returns its path.
std::string scratchFile(const char *name, llvm::StringRef content) {
  std::string path = "/tmp/pipe-fuzz-" + std::to_string(llvm::sys::Process::getProcessId()) + "-" + name;
  std::error_code ec;
  llvm::raw_fd_ostream out(path, ec);
  out << content;
  return path;
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    registry.insert<pipe::nn::NNDialect, pipe::pipeline::PipeDialect, func::FuncDialect>();
    pipe::registerCostModelInterfaces(registry);
    auto *c = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  ScopedDiagnosticHandler quiet(context, [](Diagnostic &) { return success(); });
  static OwningOpRef<ModuleOp> base = [] {
    pipe::onnx_import::ImportOptions import;
    import.microBatchSize = 2;
    auto module = pipe::onnx_import::importOnnxBuffer(modelText(), "mlp.onnxtext", context,
                                                      import);
    if (!module) {
      llvm::errs() << "the harness's model does not import\n";
      std::abort();
    }
    return module;
  }();

  pipe::pipeline::PipePartitionOptions options;
  options.stages = 2;
  options.microbatches = 4;
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    std::pair<llvm::StringRef, llvm::StringRef> field = line.split('=');
    llvm::StringRef key = field.first, value = field.second;
    auto integer = [&](auto &field) {
      long long parsed;
      if (!value.getAsInteger(10, parsed))
        field = static_cast<std::remove_reference_t<decltype(field)>>(parsed);
    };
    if (key == "stages")
      integer(options.stages);
    else if (key == "microbatches")
      integer(options.microbatches);
    else if (key == "micro_batch_size")
      integer(options.microBatchSize);
    else if (key == "memory")
      options.memory = value.str();
    else if (key == "target")
      options.target = value.str();
    else if (key == "schedule")
      options.schedule = value.str();
    else if (key == "algo")
      options.algo = value.str();
    else if (key == "dtype")
      options.dtype = value.str();
    else if (key == "optimizer")
      options.optimizer = value.str();
    else if (key == "target_json")
      options.target = scratchFile("target.json", value);
    else if (key == "profile_json")
      options.profile = scratchFile("profile.json", value);
  }
  // Planning is exercised on small pipelines; larger counts only meet the limits.
  if (options.stages > 8 ||
      (options.microbatches > 64 && options.microbatches <= partitioner::kMaxMicrobatches))
    return 0;
  OwningOpRef<ModuleOp> module = cast<ModuleOp>((*base)->clone());
  auto outcome = pipe::pipeline::buildPartitionProblem(*module, options);
  if (succeeded(outcome))
    (void)pipe::pipeline::planPartition(*module, *outcome, options);
  return 0;
}
