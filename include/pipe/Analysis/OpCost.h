//===- OpCost.h - what one nn op costs, independent of the GPU --*- C++ -*-===//
//
// The numbers the cost interface returns for one op: FLOPs and DRAM bytes of
// its forward and backward kernels, and the values its backward keeps (its
// gradient rule's saved values). The formulas per op class are in
// docs/cost-model.md. A multiply-add counts as 2 FLOPs.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_OPCOST_H
#define PIPE_ANALYSIS_OPCOST_H

#include "pipe/Analysis/Target.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/SmallVector.h"

namespace pipe {

/// What a cost query assumes about the op's context.
struct CostQuery {
  /// Bytes of one floating-point element at the compute dtype (integer and
  /// boolean tensors keep their own width; i1 is one byte).
  unsigned floatBytes = 4;
  /// Which operands need a gradient (depend on a trainable parameter through
  /// differentiable ops). Empty means every floating-point operand does.
  llvm::SmallBitVector operandNeedsGrad;
  /// Which operands come from parameters and constants only: the gradient
  /// with respect to one of them is a weight gradient.
  llvm::SmallBitVector operandIsStatic;

  bool needsGrad(unsigned operand) const {
    return operandNeedsGrad.empty() || (operand < operandNeedsGrad.size() &&
                                        operandNeedsGrad.test(operand));
  }
  bool anyNeedsGrad(unsigned numOperands) const {
    for (unsigned i = 0; i < numOperands; ++i)
      if (needsGrad(i))
        return true;
    return false;
  }
  /// Bytes of `v` (0 for a non-tensor or a non-static shape).
  double bytes(mlir::Value v) const;
};

/// The matrix product a GEMM-like kernel computes: `batch` products of an
/// m x k by a k x n matrix. A convolution is its implicit GEMM: m = N times
/// the output's spatial size, n = output channels / group, k = input channels /
/// group times the kernel's size, batch = group; `stride` is the product of
/// a convolution's strides (1 for GEMMs). All zero for other classes. The
/// calibrated kernel models (Target.h) read it.
struct GemmShape {
  double batch = 0, m = 0, n = 0, k = 0, stride = 1;
};

struct OpCost {
  KernelClass kind = KernelClass::Free;
  /// Which calibrated kernel family times this op (KernelFamily::None: the
  /// family of `kind`).
  KernelFamily family = KernelFamily::None;
  GemmShape shape;
  double forwardFlops = 0;
  double forwardBytes = 0;
  /// Backward = input gradients + weight gradients; the weight part is also
  /// given alone (the zero-bubble B/W split of the partitioner).
  double backwardFlops = 0;
  double backwardBytes = 0;
  double backwardWeightFlops = 0;
  double backwardWeightBytes = 0;
  unsigned forwardKernels = 0;
  unsigned backwardKernels = 0;

  /// The family that times this op: `family`, else the family of `kind`.
  KernelFamily effectiveFamily() const {
    return family != KernelFamily::None ? family : familyOf(kind);
  }
};

/// The values an op's gradient rule keeps from its forward to its backward.
/// `values` are operands or results; `extraBytes` are values the backward
/// kernel keeps that are not SSA values of the forward (batch-norm mean and
/// inverse std, a max-pool's argmax indices, a dropout mask when the op has
/// no mask result).
struct SavedForBackward {
  llvm::SmallVector<mlir::Value, 2> values;
  double extraBytes = 0;
};

/// Number of elements of a statically shaped tensor `v` (0 otherwise).
double numElements(mlir::Value v);
/// Bytes per element of `v`'s element type under `floatBytes`.
double elementBytes(mlir::Value v, unsigned floatBytes);

} // namespace pipe

#endif // PIPE_ANALYSIS_OPCOST_H
