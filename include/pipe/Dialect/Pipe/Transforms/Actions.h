//===- Actions.h - schedule actions between the partitioner and IR --*- C++ -*-===//
//
// The partitioner's actions (partitioner/Planner.h) and their typed form in
// the IR (#pipe.action, and per-GPU lists of them): one conversion each way,
// used by pipe-partition (the plan's actions) and pipe-schedule (the checked
// order and each stage's action list).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_PIPE_TRANSFORMS_ACTIONS_H
#define PIPE_DIALECT_PIPE_TRANSFORMS_ACTIONS_H

#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "partitioner/Planner.h"

#include "mlir/IR/Builders.h"

namespace pipe::pipeline {

ActionAttr actionAttr(mlir::MLIRContext *context, const partitioner::Action &action);
partitioner::Action partitionerAction(ActionAttr action);

/// Every GPU's actions in order, as an array of arrays of #pipe.action.
mlir::ArrayAttr scheduleOrderAttr(mlir::Builder &b, const partitioner::Schedule &schedule);

} // namespace pipe::pipeline

#endif // PIPE_DIALECT_PIPE_TRANSFORMS_ACTIONS_H
