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
#include "pipe/Dialect/NN/IR/NNOps.h"

// The attributes come before the dialect class, whose helper for the
// discardable `pipe.plan` attribute uses PlanAttr.
#include "pipe/Dialect/Pipe/IR/PipeEnums.h.inc"
#define GET_ATTRDEF_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeAttrs.h.inc"

#include "pipe/Dialect/Pipe/IR/PipeOpsDialect.h.inc"

namespace pipe::pipeline {
/// The model node `loc` belongs to: the ONNX node name (a NameLoc), or the
/// name of a node the compiler added (a FusedLoc whose metadata is a string,
/// such as "pipe.loss"); empty when neither.
llvm::StringRef nodeNameOf(mlir::Location loc);
/// True for names of nodes the compiler added (not in the ONNX model).
inline bool isAddedNodeName(llvm::StringRef name) { return name.starts_with("pipe."); }

/// The shortest decimal text of `value` that reads back as the same double.
std::string formatDouble(double value);
/// Parses a float literal (as formatDouble writes it) into an f64 attribute.
mlir::FailureOr<mlir::FloatAttr> parseF64Attr(mlir::AsmParser &parser);
/// Parses a float literal (as formatDouble writes it) as a double's APFloat.
mlir::FailureOr<llvm::APFloat> parseDouble(mlir::AsmParser &parser);

/// The plan `pipe-partition` puts on the module (`pipe.plan`) and
/// `pipe-split-stages` moves onto the pipeline; null when there is none.
PlanAttr getModulePlan(mlir::Operation *module);
void setModulePlan(mlir::Operation *module, PlanAttr plan);
} // namespace pipe::pipeline

#define GET_OP_CLASSES
#include "pipe/Dialect/Pipe/IR/PipeOps.h.inc"

#endif // PIPE_DIALECT_PIPE_IR_PIPEDIALECT_H
