//===- CostAnalysis.h - per-op time and memory of a function ----*- C++ -*-===//
//
// An MLIR analysis over a func of nn ops: for each op, its cost interface's
// FLOPs and bytes under the function's gradient flow (which values need a
// gradient, which operands are weights), element-wise fusion into producers,
// and roofline times on a target (or times from a measured profile).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_COSTANALYSIS_H
#define PIPE_ANALYSIS_COSTANALYSIS_H

#include "pipe/Analysis/OpCost.h"
#include "pipe/Analysis/Target.h"

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include <optional>
#include <string>
#include <vector>

namespace pipe {

/// Measured times keyed by ONNX node name. JSON: {"node": {"forward_ms": f,
/// "backward_ms": b}, ...}, optionally wrapped as {"ops": {...}}.
struct Profile {
  struct Times {
    double forwardMs = 0, backwardMs = 0;
  };
  llvm::StringMap<Times> times;
  static llvm::Expected<Profile> parse(llvm::StringRef json);
  static llvm::Expected<Profile> readFile(llvm::StringRef path);
};

struct CostSettings {
  Target target;
  ComputeDtype dtype = ComputeDtype::FP32;
  /// Fuse element-wise ops into their producer's kernel (no launch, the
  /// intermediate is neither written nor read back).
  bool fuseElementwise = true;
  /// Measured times; ops it names take its times instead of the roofline.
  const Profile *profile = nullptr;
};

/// The result for one op of the function body.
struct OpRecord {
  mlir::Operation *op = nullptr;
  std::string name; ///< ONNX node name (parameter name for nn.param)
  OpCost cost;
  SavedForBackward saved;
  double savedBytes = 0;        ///< this op's gradient rule: saved values + extra
  double chargedSavedBytes = 0; ///< saved bytes not already kept by an earlier op
  bool isStatic = false;  ///< computes from parameters and constants only: free
  bool needsBackward = false;
  mlir::Operation *fusedInto = nullptr; ///< the kernel this op is fused into
  double forwardSeconds = 0, backwardSeconds = 0, backwardWeightSeconds = 0;
  bool fromProfile = false;
};

struct CostTotals {
  double forwardFlops = 0, backwardFlops = 0;
  double forwardGemmFlops = 0; ///< forward FLOPs of the gemm and conv classes
  double forwardBytes = 0, backwardBytes = 0;
  double forwardSeconds = 0, backwardSeconds = 0;
  double savedBytes = 0; ///< per micro-batch, each value counted once
  double trainableParameters = 0, bufferElements = 0;
};

/// CostSettings from the textual options every entry point takes (a pass, the
/// main job): a target name or JSON file (empty: no target), a dtype, and an
/// optional measured-profile path, which `profileStorage` then owns. Errors are
/// emitted on `diagnosticOp`, naming the known values.
mlir::FailureOr<CostSettings> parseCostSettings(mlir::Operation *diagnosticOp,
                                                llvm::StringRef target, llvm::StringRef dtype,
                                                llvm::StringRef profilePath,
                                                std::optional<Profile> &profileStorage);

/// The values of `block` that need a gradient: float values that depend on
/// a seed (`isSeed`: trainable parameters, received activations whose
/// gradient goes back) and that a sink depends on (`isSink`: the loss,
/// activations whose gradient comes back, or the outputs when there is no
/// loss), both through differentiable ops (CostOpInterface; ops without it
/// count as differentiable).
llvm::DenseSet<mlir::Value> computeGradientFlow(mlir::Block &block,
                                                llvm::function_ref<bool(mlir::Value)> isSeed,
                                                llvm::function_ref<bool(mlir::Value)> isSink);

/// Parameters and constants (`nn.param`, `nn.constant`, any ConstantLike op):
/// the sources of a model function. They cost nothing, join their first
/// user's layer in the chain problem, get no stage, and are copied into every
/// stage that uses them.
bool isParameterOrConstant(mlir::Operation *op);

/// computeGradientFlow for a model function: trainable nn.param seeds; the
/// `pipe.loss` operands as sinks when the function has a loss, else every
/// returned value.
llvm::DenseSet<mlir::Value> computeFunctionGradientFlow(mlir::Block &body);

class CostAnalysis {
public:
  /// Prepares the analysis of `op` (a function, or the first function with a
  /// body inside it); compute() fills the records.
  explicit CostAnalysis(mlir::Operation *op);

  /// Computes every record for `settings` (a default-constructed target, with
  /// an empty name, leaves all times zero). Fails, with an error on the op,
  /// when an op has a non-static shape or the target has no rate for the dtype.
  mlir::LogicalResult compute(const CostSettings &settings);

  const CostSettings &getSettings() const { return settings; }
  llvm::ArrayRef<OpRecord> getRecords() const { return records; }
  const OpRecord *lookup(mlir::Operation *op) const;
  const CostTotals &getTotals() const { return totals; }
  /// True when `v` needs a gradient (depends on a trainable parameter through
  /// differentiable ops).
  bool requiresGrad(mlir::Value v) const { return gradValues.contains(v); }
  /// True when `v` is computed from parameters and constants only.
  bool isStatic(mlir::Value v) const { return staticValues.contains(v); }
  /// Bytes of `v` at the compute dtype.
  double bytes(mlir::Value v) const;
  mlir::Operation *getFunction() const { return function; }

  /// The ONNX node name of `op` (NameLoc), the parameter name of an nn.param,
  /// or "<op-name>#<index>" when it has none.
  static std::string nodeName(mlir::Operation *op, unsigned index);

private:
  mlir::Operation *function = nullptr;
  CostSettings settings;
  std::vector<OpRecord> records;
  llvm::DenseMap<mlir::Operation *, unsigned> indexOf;
  llvm::DenseSet<mlir::Value> gradValues, staticValues;
  CostTotals totals;
};

} // namespace pipe

#endif // PIPE_ANALYSIS_COSTANALYSIS_H
