//===- ChainBuilder.h - the analysed function as a partitioning problem -*- C++ -*-===//
//
// The one bridge from IR to the partitioner: groups the ops of an analysed
// function into layers (each kernel-launching op with the element-wise ops
// fused into it and the free ops on its results), and builds the partitioner's
// Problem with exact cut sets from def-use and ONNX node names as ids.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_CHAINBUILDER_H
#define PIPE_ANALYSIS_CHAINBUILDER_H

#include "pipe/Analysis/CostAnalysis.h"
#include "pipe/Analysis/MemoryModel.h"

#include "partitioner/Problem.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/raw_ostream.h"
#include <vector>

namespace pipe {

/// One layer: its ops in program order; `anchor` names it.
struct LayerGroup {
  mlir::Operation *anchor = nullptr;
  std::vector<mlir::Operation *> ops;
};

/// A model function as the cost model reads it: the function itself, or, when
/// it holds composite ops (nn::isComposite: nn.lstm, nn.gru, nn.rnn), a copy in
/// a scratch module where each is replaced by its formula, so that a recurrent
/// layer is costed as its unrolled cells (their kernels, fusion, saved values
/// and workspace) while the partitioner places it as one layer.
struct AnalysedFunction {
  mlir::OwningOpRef<mlir::ModuleOp> scratch;
  mlir::func::FuncOp func;
  /// Each op of the copy to the op of the original it stands for (a formula's
  /// ops to their composite); empty when `func` is the original.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> originOf;

  static mlir::FailureOr<AnalysedFunction> of(mlir::func::FuncOp original);
  mlir::Operation *origin(mlir::Operation *op) const {
    auto it = originOf.find(op);
    return it == originOf.end() ? op : it->second;
  }
};

/// groupLayers on the analysis of `analysed.func`, each composite op of the
/// original one layer (the groups of its formula merged).
std::vector<LayerGroup> groupModelLayers(const CostAnalysis &analysis,
                                         const AnalysedFunction &analysed);

/// The original function's ops of each layer of `groups` (composites once).
std::vector<std::vector<mlir::Operation *>>
originalOpsOfLayers(llvm::ArrayRef<LayerGroup> groups, const AnalysedFunction &analysed);

/// Groups the analysed function's ops into layers, in program order:
///  - each op with a kernel of its own (not fused, not free, not computed from
///    parameters only) starts a layer;
///  - a fused op joins the layer of its kernel, a free op the layer of its
///    latest operand (neither earlier than any operand's layer);
///  - parameters, constants and ops on them and on graph inputs only join the
///    earliest layer that uses them.
/// Every op of the body is in exactly one layer; def-use edges only go from a
/// layer to itself or a later one.
std::vector<LayerGroup> groupLayers(const CostAnalysis &analysis);

/// The partitioner's problem for the analysed function, layer l being
/// `groups[l]` (groupModelLayers), so a plan's stage of layer l is the stage
/// of its ops. Times come from the analysis' target or profile, the platform
/// from its target (one GPU and the partitioner's default micro-batch count,
/// which the caller sets). Per
/// layer: forward and backward time (and the weight-gradient part), W(l) =
/// trainable parameters at the compute dtype (buffers folded in so that W(l)
/// times the state multiplier is the layer's whole parameter memory), s(l) =
/// saved activation bytes (each value once), outputs = bytes of the tensors it
/// sends. A tensor is every value used outside its producer's layer except the
/// results of parameters and constants, which every stage gets its own copy of:
/// exactly the values pipe-split-stages sends, so the stage graph the
/// partitioner schedules is the one the split pipeline has. Fails (with an error
/// on the function) when it has no op.
mlir::FailureOr<partitioner::Problem> buildChainProblem(const CostAnalysis &analysis,
                                                        llvm::ArrayRef<LayerGroup> groups,
                                                        const TrainingPolicy &policy);

/// Writes `problem` in the partitioner's problem JSON format.
void writeProblemJson(const partitioner::Problem &problem, llvm::raw_ostream &os);

} // namespace pipe

#endif // PIPE_ANALYSIS_CHAINBUILDER_H
