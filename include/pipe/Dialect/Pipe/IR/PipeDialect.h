//===- PipeDialect.h - the pipe dialect -------------------------*- C++ -*-===//
//
// Declares the `pipe` dialect and its ops: the pipeline structure after
// partitioning (stages, send/recv, parameter references).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_PIPE_IR_PIPEDIALECT_H
#define PIPE_DIALECT_PIPE_IR_PIPEDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "pipe/Dialect/Pipe/IR/PipeOpsDialect.h.inc"

#define GET_OP_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeOps.h.inc"

#endif // PIPE_DIALECT_PIPE_IR_PIPEDIALECT_H
