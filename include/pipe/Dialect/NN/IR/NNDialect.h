//===- NNDialect.h - the nn dialect -----------------------------*- C++ -*-===//
//
// Declares the `nn` dialect: tensor-level graph ops imported from ONNX.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_IR_NNDIALECT_H
#define PIPE_DIALECT_NN_IR_NNDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/Operation.h"

#include "pipe/Dialect/NN/IR/NNOpsDialect.h.inc"

#endif // PIPE_DIALECT_NN_IR_NNDIALECT_H
