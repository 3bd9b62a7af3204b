//===- Gradients.h - gradient rules of the nn ops ---------------*- C++ -*-===//
//
// Attaches GradientOpInterface (one rule per differentiable nn op) through a
// dialect extension, as the cost model attaches its interface.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_TRANSFORMS_GRADIENTS_H
#define PIPE_DIALECT_NN_TRANSFORMS_GRADIENTS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace pipe::nn {
void registerGradientInterfaces(mlir::DialectRegistry &registry);
} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_TRANSFORMS_GRADIENTS_H
