//===- TestCostAnalysis.cpp - test passes printing cost and memory --------===//
//
// test-print-pipe-cost prints, for every op of every function, the numbers of
// the cost analysis; test-print-pipe-memory prints the memory model. Output
// goes to stdout, one line per op, in program order, then totals.
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Analysis/MemoryModel.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/IR/NNOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include <cstdio>
#include <set>
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pipe;

namespace {

/// Integer-valued counts print without a fraction.
std::string count(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.0f", value);
  return buffer;
}
std::string micros(double seconds) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.3f", seconds * 1e6);
  return buffer;
}

struct TestPrintCostPass : PassWrapper<TestPrintCostPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintCostPass)
  TestPrintCostPass() = default;
  TestPrintCostPass(const TestPrintCostPass &other) : PassWrapper(other) {}
  StringRef getArgument() const final { return "test-print-pipe-cost"; }
  StringRef getDescription() const final {
    return "Print per-op FLOPs, bytes, saved bytes and roofline times";
  }
  Option<std::string> target{*this, "target", llvm::cl::desc("GPU name or JSON file"),
                              llvm::cl::init("h100")};
  Option<std::string> dtype{*this, "dtype", llvm::cl::desc("fp32, tf32, fp16, bf16, fp8"),
                            llvm::cl::init("fp32")};
  Option<bool> fuse{*this, "fuse", llvm::cl::desc("Fuse element-wise ops into producers"),
                    llvm::cl::init(true)};
  Option<std::string> profile{*this, "profile",
                               llvm::cl::desc("Measured times (JSON keyed by node name)"),
                               llvm::cl::init("")};

  void runOnOperation() override {
    std::optional<Profile> measured;
    auto parsed = parseCostSettings(getOperation(), target, dtype, profile, measured);
    if (failed(parsed))
      return signalPassFailure();
    CostSettings settings = *parsed;
    settings.fuseElementwise = fuse;
    llvm::raw_ostream &os = llvm::outs();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      CostAnalysis analysis(fn);
      if (failed(analysis.compute(settings)))
        return signalPassFailure();
      os << "cost @" << fn.getSymName() << " target=" << settings.target.name
         << " dtype=" << toString(settings.dtype) << "\n";
      for (const OpRecord &r : analysis.getRecords()) {
        if (isa<nn::ParamOp, nn::ConstantOp>(r.op))
          continue;
        os << "op '" << r.name << "' " << r.op->getName() << " class="
           << toString(r.cost.kind);
        if (r.isStatic)
          os << " static";
        if (r.cost.kind != KernelClass::Free || r.saved.values.size() || r.needsBackward)
          os << " fwd_flops=" << count(r.cost.forwardFlops)
             << " fwd_bytes=" << count(r.cost.forwardBytes)
             << " bwd_flops=" << count(r.cost.backwardFlops)
             << " bwd_weight_flops=" << count(r.cost.backwardWeightFlops)
             << " bwd_bytes=" << count(r.cost.backwardBytes)
             << " kernels=" << r.cost.forwardKernels << "/" << r.cost.backwardKernels
             << " saved=" << count(r.savedBytes) << " fwd_us=" << micros(r.forwardSeconds)
             << " bwd_us=" << micros(r.backwardSeconds);
        if (r.fusedInto)
          os << " fused_into='" << analysis.lookup(r.fusedInto)->name << "'";
        if (r.fromProfile)
          os << " profiled";
        KernelFamily family = r.cost.effectiveFamily();
        if (family != KernelFamily::None)
          os << " family=" << toString(family);
        if (r.cost.shape.m > 0)
          os << " gemm=" << count(r.cost.shape.batch) << "x" << count(r.cost.shape.m) << "x"
             << count(r.cost.shape.n) << "x" << count(r.cost.shape.k) << "x"
             << count(r.cost.shape.stride);
        os << "\n";
      }
      const CostTotals &t = analysis.getTotals();
      os << "total fwd_flops=" << count(t.forwardFlops)
         << " fwd_gemm_flops=" << count(t.forwardGemmFlops) << " bwd_flops="
         << count(t.backwardFlops) << " fwd_bytes=" << count(t.forwardBytes)
         << " bwd_bytes=" << count(t.backwardBytes) << " saved=" << count(t.savedBytes)
         << " fwd_us=" << micros(t.forwardSeconds) << " bwd_us=" << micros(t.backwardSeconds)
         << " params=" << count(t.trainableParameters) << " buffers="
         << count(t.bufferElements) << "\n";
    }
  }
};

struct TestPrintMemoryPass : PassWrapper<TestPrintMemoryPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestPrintMemoryPass)
  TestPrintMemoryPass() = default;
  TestPrintMemoryPass(const TestPrintMemoryPass &other) : PassWrapper(other) {}
  StringRef getArgument() const final { return "test-print-pipe-memory"; }
  StringRef getDescription() const final {
    return "Print saved activations, parameter state and transient peaks";
  }
  Option<std::string> dtype{*this, "dtype", llvm::cl::desc("fp32, tf32, fp16, bf16, fp8"),
                            llvm::cl::init("fp32")};
  Option<std::string> optimizer{*this, "optimizer", llvm::cl::desc("sgd, momentum, adam"),
                                llvm::cl::init("adam")};

  void runOnOperation() override {
    std::optional<Profile> noProfile;
    auto settings = parseCostSettings(getOperation(), /*target=*/"", dtype, "", noProfile);
    if (failed(settings))
      return signalPassFailure();
    auto parsedPolicy = parseTrainingPolicy(getOperation(), optimizer, settings->dtype);
    if (failed(parsedPolicy))
      return signalPassFailure();
    TrainingPolicy policy = *parsedPolicy;
    llvm::raw_ostream &os = llvm::outs();
    for (auto fn : getOperation().getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      CostAnalysis analysis(fn);
      if (failed(analysis.compute(*settings)))
        return signalPassFailure();
      os << "memory @" << fn.getSymName() << " dtype=" << toString(policy.dtype)
         << " optimizer=" << toString(policy.optimizer) << "\n";
      for (const OpRecord &r : analysis.getRecords()) {
        if (r.saved.values.empty() && r.saved.extraBytes == 0)
          continue;
        os << "saved '" << r.name << "' " << r.op->getName() << " bytes="
           << count(r.savedBytes) << " keeps=";
        llvm::interleave(
            r.saved.values, os,
            [&](Value v) {
              if (auto res = dyn_cast<OpResult>(v); res && res.getOwner() == r.op)
                os << "result" << res.getResultNumber();
              else
                for (OpOperand &use : v.getUses())
                  if (use.getOwner() == r.op) {
                    os << "operand" << use.getOperandNumber();
                    break;
                  }
              if (analysis.isStatic(v))
                os << "(param)";
            },
            ",");
        if (r.saved.extraBytes > 0)
          os << (r.saved.values.empty() ? "" : ",") << "extra:" << count(r.saved.extraBytes);
        os << "\n";
      }
      // What each rule allocates for itself, and which gradients it allocates.
      for (const OpRecord &r : analysis.getRecords()) {
        RuleMemory rule = measureGradientRule(analysis, r.op);
        std::set<unsigned> allocated;
        for (const RuleMemory::Given &g : rule.given)
          if (g.freshBytes > 0)
            allocated.insert(g.operand);
        if (allocated.empty() && rule.temporaryBytes == 0)
          continue;
        os << "rule '" << r.name << "' " << r.op->getName()
           << " temporaries=" << count(rule.temporaryBytes) << " allocates=";
        SmallVector<std::string> fresh;
        for (unsigned i : allocated)
          fresh.push_back("operand" + std::to_string(i));
        llvm::interleave(fresh, os, ",");
        os << "\n";
      }
      StageMemory m = computeFunctionMemory(analysis, policy);
      const ParameterMemory &p = m.parameters;
      os << "params trainable=" << count(p.trainableParameters)
         << " buffers=" << count(p.bufferElements) << " weights=" << count(p.weightBytes)
         << " grads=" << count(p.gradientBytes) << " master=" << count(p.masterBytes)
         << " optimizer=" << count(p.optimizerBytes) << " buffer_bytes="
         << count(p.bufferBytes) << " total=" << count(p.total()) << "\n";
      os << "activations saved=" << count(m.savedBytes)
         << " fwd_peak=" << count(m.forwardPeakBytes)
         << " bwd_peak=" << count(m.backwardPeakBytes) << "\n";
    }
  }
};

} // namespace

namespace pipe::test {
#ifdef PIPE_HAVE_PARTITIONER
void registerTestChainPass(); // TestChainBuilder.cpp
#endif

void registerTestSavedValuesPass(); // TestSavedValues.cpp

void registerTestAnalysisPasses() {
  registerTestSavedValuesPass();
  PassRegistration<TestPrintCostPass>();
  PassRegistration<TestPrintMemoryPass>();
#ifdef PIPE_HAVE_PARTITIONER
  registerTestChainPass();
#endif
}
} // namespace pipe::test
