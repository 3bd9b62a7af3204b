//===- TrainingProgram.h - the main job's per-rank programs -----*- C++ -*-===//
//
// What the main job writes for pipe-run: one C++ program per rank (the
// lowering of the differentiated pipeline) and program.json, which describes
// the program and what the plan predicts for it (period, memory per rank and
// category), so that pipe-run can print measured beside predicted.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DRIVER_TRAININGPROGRAM_H
#define PIPE_DRIVER_TRAININGPROGRAM_H

#include "pipe/Dialect/Pipe/Transforms/Partition.h"

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <string>
#include <vector>

namespace pipe::driver {

/// The files of the training program, by name: rankK.cpp and program.json.
/// `module` holds the differentiated, scheduled pipeline (it is not changed);
/// the outcome's replicas of it train together (program.json's `replicas`,
/// which pipe-run runs).
mlir::FailureOr<std::map<std::string, std::string>>
buildTrainingProgram(mlir::ModuleOp module, const pipeline::PartitionOutcome &outcome,
                     llvm::StringRef modelPath, llvm::StringRef optimizer);

} // namespace pipe::driver

#endif // PIPE_DRIVER_TRAININGPROGRAM_H
