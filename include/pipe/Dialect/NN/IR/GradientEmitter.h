//===- GradientEmitter.h - what a gradient rule may ask for -----*- C++ -*-===//
//
// The view of a backward program under construction that a gradient rule
// (GradientOpInterface) works through: the gradients of its op's results, the
// forward values it reads (which become the stage's saved values), and where
// its operands' gradients go. pipe-differentiate implements it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_IR_GRADIENTEMITTER_H
#define PIPE_DIALECT_NN_IR_GRADIENTEMITTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace pipe::nn {

class GradientEmitter {
public:
  virtual ~GradientEmitter() = default;
  /// Positioned at the end of the backward program.
  virtual mlir::OpBuilder &getBuilder() = 0;
  /// The gradient reaching result `index` of the op; null when none does.
  virtual mlir::Value getResultGradient(unsigned index) = 0;
  /// True when operand `index` of the op needs a gradient.
  virtual bool needsGradient(unsigned index) = 0;
  /// Forward value `value` (an operand or result of the op) as the backward
  /// sees it: kept by the forward for the backward (a saved value), or
  /// recomputed when it depends on parameters and constants only.
  virtual mlir::Value getForwardValue(mlir::Value value) = 0;
  /// Adds `gradient` (the operand's type) to operand `index`'s gradient.
  virtual void addOperandGradient(unsigned index, mlir::Value gradient) = 0;
};

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_IR_GRADIENTEMITTER_H
