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

namespace pipe::pipeline {
/// The shortest decimal text of `value` that reads back as the same double.
std::string formatDouble(double value);
/// Parses a float literal (as formatDouble writes it) into an f64 attribute.
mlir::FailureOr<mlir::FloatAttr> parseF64Attr(mlir::AsmParser &parser);
} // namespace pipe::pipeline

#include "pipe/Dialect/Pipe/IR/PipeEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeAttrs.h.inc"

#define GET_OP_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeOps.h.inc"

#endif // PIPE_DIALECT_PIPE_IR_PIPEDIALECT_H
