//===- MemoryModel.h - GPU memory of parameters and activations -*- C++ -*-===//
//
// What training a set of ops keeps on a GPU: parameters, gradients, master
// weights and optimizer state by policy; activations saved per micro-batch
// (from the cost analysis' gradient rules); and the peak transient memory of
// the forward and backward passes from liveness over the ops' order.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_MEMORYMODEL_H
#define PIPE_ANALYSIS_MEMORYMODEL_H

#include "pipe/Analysis/CostAnalysis.h"

#include <vector>

namespace pipe {

enum class OptimizerKind { SGD, Momentum, Adam };
std::optional<OptimizerKind> parseOptimizerKind(llvm::StringRef text);
llvm::StringRef toString(OptimizerKind kind);

/// Bytes kept per trainable parameter. fp32 training: weight 4 + gradient 4.
/// Mixed precision (fp16/bf16/fp8 compute): weight 2 + gradient 2 + fp32
/// master weight 4. Optimizer state in fp32: momentum 4, Adam 8 (two moments).
struct TrainingPolicy {
  OptimizerKind optimizer = OptimizerKind::Adam;
  ComputeDtype dtype = ComputeDtype::FP32;

  bool mixedPrecision() const { return storageBytes(dtype) < 4; }
  double weightBytesPerParameter() const { return storageBytes(dtype); }
  double gradientBytesPerParameter() const { return storageBytes(dtype); }
  double masterBytesPerParameter() const { return mixedPrecision() ? 4 : 0; }
  double optimizerBytesPerParameter() const {
    return optimizer == OptimizerKind::SGD ? 0 : optimizer == OptimizerKind::Momentum ? 4 : 8;
  }
  double bytesPerParameter() const {
    return weightBytesPerParameter() + gradientBytesPerParameter() +
           masterBytesPerParameter() + optimizerBytesPerParameter();
  }
};

/// The policy for an optimizer name and a dtype; an unknown name is an error
/// on `diagnosticOp` naming the known ones.
mlir::FailureOr<TrainingPolicy> parseTrainingPolicy(mlir::Operation *diagnosticOp,
                                                    llvm::StringRef optimizer,
                                                    ComputeDtype dtype);

struct ParameterMemory {
  double trainableParameters = 0; ///< elements
  double bufferElements = 0;      ///< non-trainable (batch-norm running stats, ...)
  double weightBytes = 0, gradientBytes = 0, masterBytes = 0, optimizerBytes = 0;
  double bufferBytes = 0; ///< buffers at their own element type
  double total() const {
    return weightBytes + gradientBytes + masterBytes + optimizerBytes + bufferBytes;
  }
};

struct StageMemory {
  ParameterMemory parameters;
  double savedBytes = 0;         ///< activations kept per micro-batch
  /// Transient forward memory: live values that are not saved, plus the running
  /// kernel's scratch.
  double forwardPeakBytes = 0;
  /// Live activation gradients during backward, plus the running kernel's scratch,
  /// its rule's temporaries, a gradient being accumulated, and the gradients of
  /// the parameters it reads (until they are accumulated).
  double backwardPeakBytes = 0;
  /// Parameters + `inFlight` micro-batches of saved activations + the larger
  /// transient peak.
  double total(double inFlight) const {
    return parameters.total() + inFlight * savedBytes +
           std::max(forwardPeakBytes, backwardPeakBytes);
  }
};

/// Scratch the runtime's kernel for `op` (and for its gradients) allocates while it
/// runs: the CPU runtime's im2col columns for nn.conv (nn::convScratchBytes), 0
/// for every other op.
double kernelScratchBytes(mlir::Operation *op);

/// What `op`'s gradient rule allocates for itself, found by running the rule
/// (GradientOpInterface) into a block of its own: the peak of its temporaries
/// (a batched matmul's transposed operands, a softmax's products), without the
/// gradients it gives; and whether each gradient it gives is a new allocation (a
/// convolution's: `freshBytes` > 0) or one it passes on (an add's dy).
///
/// pipe-differentiate adds a gradient to the sum so far as soon as the rule gives
/// it, so the timeline matters too. Position k is the rule's k-th op; `given` lists
/// each gradient in the order given: its operand, its bytes when it is a new
/// allocation (0 when passed on), the op that made it, and how many ops were made
/// before it was given. Per position, the temporaries live while op k runs, and
/// the bytes of the op's result gradients freed before it runs (read for the last
/// time earlier, and not passed on); entry `ops` is for after the last op.
struct RuleMemory {
  struct Given {
    unsigned operand = 0;
    double freshBytes = 0;
    int madeAt = 0, givenAt = 0;
  };
  double temporaryBytes = 0;
  std::vector<Given> given;
  /// Forward values the rule reads that the backward computes again (from
  /// parameters and constants: a transposed weight). They are not among its
  /// temporaries: the backward computes each once, at its first reader, and keeps
  /// it to its last (several steps of a recurrent layer read one R^T), so the
  /// stage charges them (computeStageMemory).
  std::vector<mlir::Value> recomputed;
  std::vector<double> temporariesAt, resultGradientsFreedAt; ///< ops + 1 entries
};
RuleMemory measureGradientRule(const CostAnalysis &analysis, mlir::Operation *op);

/// Memory of the nn.param ops among `ops` under `policy`.
ParameterMemory computeParameterMemory(llvm::ArrayRef<mlir::Operation *> ops,
                                       const TrainingPolicy &policy);

/// Memory of a stage made of `ops` (in program order, a subset of the analysed
/// function). Values from outside the stage are received inputs; values used
/// outside it (or returned) are sent outputs and stay live to the stage's end.
StageMemory computeStageMemory(const CostAnalysis &analysis,
                               llvm::ArrayRef<mlir::Operation *> ops,
                               const TrainingPolicy &policy);

/// Saved bytes of layers: `layers` partition the analysed function's ops into
/// layers in program order. A saved storage root (and each rule's extra bytes)
/// kept by the ops of one layer counts in that layer's `bytes`; one kept by the
/// ops of several layers is `shared`: each stage holding one of them keeps its own
/// copy (the later stages' are what they received), as partitioner::SharedSaved.
struct LayerSavedBytes {
  std::vector<double> bytes; ///< per layer
  struct Shared {
    std::vector<int> layers;
    double bytes = 0;
  };
  std::vector<Shared> shared;
};
LayerSavedBytes computeLayerSavedBytes(const CostAnalysis &analysis,
                                       llvm::ArrayRef<std::vector<mlir::Operation *>> layers);

/// Bytes each layer holds for the others while it runs, beyond what the layer
/// alone holds (computeStageMemory of its ops): values made by an earlier layer
/// and read by a later one, in the forward those not saved (a residual, a branch
/// point), and in the backward their gradients (the sum of a residual's gradient
/// while the branch's backward runs). `layers` as for computeLayerSavedBytes. A
/// value counts in the layers strictly between its producer and its last reader;
/// where a stage boundary falls in between, the stage receives it instead, so
/// across a boundary this is an upper bound.
struct LayerCarriedBytes {
  std::vector<double> forward, backward; ///< per layer
};
LayerCarriedBytes computeLayerCarriedBytes(const CostAnalysis &analysis,
                                           llvm::ArrayRef<std::vector<mlir::Operation *>> layers);

/// The whole analysed function as one stage.
StageMemory computeFunctionMemory(const CostAnalysis &analysis, const TrainingPolicy &policy);

} // namespace pipe

#endif // PIPE_ANALYSIS_MEMORYMODEL_H
