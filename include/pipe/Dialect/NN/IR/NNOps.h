//===- NNOps.h - nn dialect ops ---------------------------------*- C++ -*-===//
//
// The op classes of the `nn` dialect and their shape-inference interface.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_IR_NNOPS_H
#define PIPE_DIALECT_NN_IR_NNOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "pipe/Dialect/NN/IR/GradientEmitter.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"

namespace pipe::nn {
/// Verifier shared by all nn ops: re-infers the result types and checks that
/// the declared ones agree (same element type; same rank and static dims
/// where both are ranked).
mlir::LogicalResult verifyInferredTypes(mlir::Operation *op);
/// nn_c2: the static shapes of `types` (an op's operands or results) are within
/// the size limits of NNShapeUtils.h.
mlir::LogicalResult verifySizeLimits(mlir::Operation *op, mlir::TypeRange types,
                                     llvm::StringRef what);
} // namespace pipe::nn

#include "pipe/Dialect/NN/IR/NNInterfaces.h.inc"

#include "pipe/Dialect/NN/IR/NNEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "pipe/Dialect/NN/IR/NNAttrs.h.inc"

#define GET_OP_CLASSES
#include "pipe/Dialect/NN/IR/NNOps.h.inc"

namespace pipe::nn {

/// Recomputes the result types of `op` through its ShapeInferenceOpInterface
/// and stores them on the results. Ops without the interface are left alone.
mlir::LogicalResult refineResultTypes(mlir::Operation *op);

/// Ops that are one op in the IR and a formula of nn ops for the cost model,
/// the gradient and the kernels (nn.lstm, nn.gru, nn.rnn):
/// nn-expand-composites (nn::expandComposite) writes the formula.
bool isComposite(mlir::Operation *op);

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_IR_NNOPS_H
