//===- TestSavedValues.cpp - the program keeps what the memory model charges -===//
//
// test-check-saved-values runs after pipe-differentiate. For every stage it
// compares the values the forward keeps for its backward (the `saved`
// operands of its pipe.return) with the memory model's saved-for-backward set
// of the stage's forward ops (CostOpInterface::getSavedForBackward, parameter
// and constant values excluded, each value once), value by value and in
// bytes, and prints one line per stage. A difference is an error naming the
// op and the value, so the memory prediction and the program cannot drift
// apart.
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Analysis/CostInterface.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace pipe;
using namespace pipe::pipeline;

namespace {
struct TestCheckSavedValuesPass
    : PassWrapper<TestCheckSavedValuesPass, OperationPass<ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(TestCheckSavedValuesPass)
  StringRef getArgument() const final { return "test-check-saved-values"; }
  StringRef getDescription() const final {
    return "Check that each stage keeps exactly the memory model's saved values";
  }

  LogicalResult checkStage(StageOp stage, llvm::raw_ostream &os) {
    Block &forward = stage.getBody().front();
    auto ret = cast<ReturnOp>(forward.getTerminator());
    if (stage.getBackward().empty())
      return stage.emitOpError("has no backward region (run pipe-differentiate first)");

    // Received activations whose gradient the backward sends back start the
    // flow; the loss, activations whose gradient comes back and (without a
    // loss) the model outputs end it.
    llvm::DenseSet<std::pair<int64_t, int64_t>> gradientSent, gradientReceived;
    stage.getBackward().walk([&](Operation *op) {
      if (auto send = dyn_cast<SendOp>(op); send && send.getKind() == pipe::pipeline::TransferKind::gradient)
        gradientSent.insert({send.getPeer(), send.getTag()});
      if (auto recv = dyn_cast<RecvOp>(op); recv && recv.getKind() == pipe::pipeline::TransferKind::gradient)
        gradientReceived.insert({recv.getPeer(), recv.getTag()});
    });
    auto pipeline = stage->getParentOfType<PipelineOp>();
    bool hasLoss = pipeline && pipeline.getTrainingAttr() &&
                   pipeline.getTrainingAttr().getLoss() != LossKind::none;
    auto needsGrad = computeGradientFlow(
        forward,
        [&](Value v) {
          if (auto param = v.getDefiningOp<ParamOp>())
            return param.getTrainable();
          auto recv = v.getDefiningOp<RecvOp>();
          return recv && gradientSent.contains({recv.getPeer(), recv.getTag()});
        },
        [&](Value v) {
          for (Operation *user : v.getUsers()) {
            if (isa<LossOp>(user) || (!hasLoss && user == ret.getOperation() &&
                                      llvm::is_contained(ret.getValues(), v)))
              return true;
            if (auto send = dyn_cast<SendOp>(user);
                send && send.getKind() == pipe::pipeline::TransferKind::activation &&
                gradientReceived.contains({send.getPeer(), send.getTag()}))
              return true;
          }
          return false;
        });
    llvm::DenseSet<Value> staticValues;
    for (Operation &op : forward) {
      bool isStatic = isa<ParamOp>(op) || op.hasTrait<OpTrait::ConstantLike>() ||
                      (op.getNumOperands() > 0 && !isa<RecvOp, SendOp, LossOp>(op) &&
                       llvm::all_of(op.getOperands(),
                                    [&](Value v) { return staticValues.contains(v); }));
      if (isStatic)
        staticValues.insert(op.getResults().begin(), op.getResults().end());
    }

    constexpr unsigned floatBytes = 4; // the programs compute in fp32
    CostQuery sizes;
    sizes.floatBytes = floatBytes;
    llvm::SetVector<Value> expected;
    llvm::DenseMap<Value, Operation *> keptBy;
    double extraBytes = 0;
    for (Operation &op : forward) {
      auto cost = dyn_cast<CostOpInterface>(&op);
      if (!cost)
        continue;
      CostQuery query;
      query.floatBytes = floatBytes;
      query.operandNeedsGrad.resize(op.getNumOperands());
      query.operandIsStatic.resize(op.getNumOperands());
      // As the memory model: no backward for an op whose results get no gradient.
      const bool resultGetsGrad =
          op.getNumResults() == 0 ||
          llvm::any_of(op.getResults(), [&](Value r) { return needsGrad.contains(r); });
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        if (resultGetsGrad && needsGrad.contains(v))
          query.operandNeedsGrad.set(i);
        if (staticValues.contains(v))
          query.operandIsStatic.set(i);
      }
      SavedForBackward saved = cost.getSavedForBackward(query);
      extraBytes += saved.extraBytes;
      for (Value v : saved.values)
        if (!staticValues.contains(v) && expected.insert(v))
          keptBy[v] = &op;
    }

    llvm::SetVector<Value> actual(ret.getSaved().begin(), ret.getSaved().end());
    double expectedBytes = extraBytes, actualBytes = 0;
    for (Value v : expected)
      expectedBytes += sizes.bytes(v);
    for (Value v : actual)
      actualBytes += sizes.bytes(v);
    bool ok = true;
    for (Value v : expected)
      if (!actual.contains(v)) {
        keptBy[v]->emitError("the memory model keeps a value of type ")
            << v.getType() << " for this op's backward, but the program does not";
        ok = false;
      }
    for (Value v : actual)
      if (!expected.contains(v)) {
        Operation *def = v.getDefiningOp();
        InFlightDiagnostic diag = def ? def->emitError() : stage.emitError();
        diag << "the program keeps a value of type " << v.getType()
             << " that the memory model does not charge";
        ok = false;
      }
    if (extraBytes != 0) {
      stage.emitError("the memory model charges ")
          << static_cast<int64_t>(extraBytes)
          << " bytes kept outside SSA values, which the program cannot keep";
      ok = false;
    }
    os << "stage " << stage.getIndex() << ": keeps " << actual.size() << " values, "
       << static_cast<int64_t>(actualBytes) << " bytes; memory model "
       << static_cast<int64_t>(expectedBytes) << " bytes: " << (ok ? "equal" : "DIFFERENT")
       << "\n";
    return success(ok);
  }

  void runOnOperation() override {
    bool ok = true;
    getOperation().walk([&](StageOp stage) { ok &= succeeded(checkStage(stage, llvm::outs())); });
    if (!ok)
      signalPassFailure();
  }
};
} // namespace

namespace pipe::test {
void registerTestSavedValuesPass() { PassRegistration<TestCheckSavedValuesPass>(); }
} // namespace pipe::test
