//===- TestChainBuilder.cpp - test pass printing the partitioning problem -===//
//
// test-print-pipe-chain prints the layers and cut tensors that the adapter
// builds from the analysed function, or the problem JSON (`json=1`).
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/ChainBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/raw_ostream.h"
#include <cstdio>

using namespace mlir;
using namespace pipe;

namespace {
std::string number(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.6g", value);
  return buffer;
}

struct TestPrintChainPass : PassWrapper<TestPrintChainPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintChainPass)
  TestPrintChainPass() = default;
  TestPrintChainPass(const TestPrintChainPass &other) : PassWrapper(other) {}
  StringRef getArgument() const final { return "test-print-pipe-chain"; }
  StringRef getDescription() const final {
    return "Print the layers and cut tensors of the partitioning problem";
  }
  Option<std::string> target{*this, "target", llvm::cl::desc("GPU name or JSON file"),
                              llvm::cl::init("h100")};
  Option<std::string> dtype{*this, "dtype", llvm::cl::desc("fp32, tf32, fp16, bf16, fp8"),
                            llvm::cl::init("fp32")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd, momentum, adam"),
                                llvm::cl::init("adam")};
  Option<bool> json{*this, "json", llvm::cl::desc("Print the problem JSON"),
                    llvm::cl::init(false)};

  void runOnOperation() override {
    std::optional<Profile> noProfile;
    auto parsed = parseCostSettings(getOperation(), target, dtype, "", noProfile);
    if (failed(parsed))
      return signalPassFailure();
    CostSettings settings = *parsed;
    auto parsedPolicy = parseTrainingPolicy(getOperation(), optimizer, settings.dtype);
    if (failed(parsedPolicy))
      return signalPassFailure();
    TrainingPolicy policy = *parsedPolicy;
    llvm::raw_ostream &os = llvm::outs();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      // As pipe-partition reads it: a composite op is one layer of its cells.
      auto analysed = AnalysedFunction::of(fn);
      if (failed(analysed))
        return signalPassFailure();
      CostAnalysis analysis(analysed->func);
      if (failed(analysis.compute(settings)))
        return signalPassFailure();
      const std::vector<LayerGroup> groups = groupModelLayers(analysis, *analysed);
      auto built = buildChainProblem(analysis, groups, policy);
      if (failed(built))
        return signalPassFailure();
      partitioner::Problem &problem = *built;
      if (json) {
        writeProblemJson(problem, os);
        continue;
      }
      os << "chain @" << fn.getSymName() << " layers=" << problem.layers.size()
         << " tensors=" << problem.tensors.size()
         << " state_multiplier=" << number(problem.training.stateMultiplier) << "\n";
      for (auto [i, layer] : llvm::enumerate(problem.layers)) {
        os << "layer " << i << " '" << layer.name << "' nodes=";
        llvm::interleave(layer.nodeIds, os, ",");
        os << " params=" << number(layer.parameterBytes)
           << " saved=" << number(layer.savedBytes)
           << " out=" << number(layer.outputBytes) << "\n";
      }
      for (const partitioner::Tensor &tensor : problem.tensors) {
        os << "tensor " << tensor.producer << " -> ";
        llvm::interleave(tensor.consumers, os, ",");
        os << " bytes=" << number(tensor.bytes) << "\n";
      }
      for (const partitioner::SharedSaved &value : problem.sharedSaved) {
        os << "shared saved ";
        llvm::interleave(value.layers, os, ",");
        os << " bytes=" << number(value.bytes) << "\n";
      }
      for (const partitioner::SharedParameter &value : problem.sharedParameters) {
        os << "shared parameter ";
        llvm::interleave(value.layers, os, ",");
        os << " bytes=" << number(value.bytes) << "\n";
      }
      // What each layer holds for the others (part of its workspace).
      std::vector<std::vector<Operation *>> layerOps;
      for (const LayerGroup &group : groups)
        layerOps.push_back(group.ops);
      const LayerCarriedBytes carried = computeLayerCarriedBytes(analysis, layerOps);
      for (size_t i = 0; i < layerOps.size(); ++i)
        if (carried.forward[i] > 0 || carried.backward[i] > 0)
          os << "carried layer " << i << " forward=" << number(carried.forward[i])
             << " backward=" << number(carried.backward[i]) << "\n";
    }
  }
};
} // namespace

namespace pipe::test {
void registerTestChainPass() { PassRegistration<TestPrintChainPass>(); }
} // namespace pipe::test
