//===- PipeToEmitC.h - per-rank programs from a pipeline --------*- C++ -*-===//
//
// What a differentiated, scheduled pipeline becomes: one EmitC file (one C++
// translation unit) per rank calling the runtime ABI, and the description of
// the program that pipe-run reads beside it (out/program.json).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_CONVERSION_PIPETOEMITC_PIPETOEMITC_H
#define PIPE_CONVERSION_PIPETOEMITC_PIPETOEMITC_H

#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace pipe {

/// A parameter of the pipeline: the ids the programs use, where its bytes
/// are, which rank owns it (applies the optimizer) and which ranks use it.
struct ProgramParameter {
  int32_t id = 0;
  std::string name, path;
  nn::ParamSource source = nn::ParamSource::inline_;
  std::string dtype; ///< "f32", "i64", ...
  std::vector<int64_t> shape;
  int64_t offset = -1, length = -1;
  bool trainable = true;
  int64_t ownerRank = 0;
  std::vector<int64_t> ranks;
};

/// A model input, a label or an output gradient of one micro-batch.
struct ProgramTensor {
  int64_t index = 0;
  std::string name, dtype;
  std::vector<int64_t> shape;
  /// Synthetic integer data is drawn in [0, range); 0 for float data.
  int64_t range = 0;
};

struct ProgramDescription {
  int64_t ranks = 0, stages = 0, microbatches = 0;
  /// Data-parallel copies of the pipeline that train together (the plan's),
  /// and how they sit on the GPUs ("pipeline-major" or "stage-major").
  int64_t replicas = 1;
  std::string replicaLayout = "pipeline-major";
  std::vector<int64_t> rankOfStage;
  std::vector<ProgramParameter> parameters;
  std::vector<ProgramTensor> inputs, labels, outputGradients;
  pipeline::TrainingAttr training;
};

/// Describes the pipeline (which must be differentiated and scheduled); an
/// error on the pipeline op when it is not.
mlir::FailureOr<ProgramDescription> describeProgram(pipeline::PipelineOp pipeline);

/// What the lowered program itself holds at its peak, per stage, found by
/// replaying its allocations and frees: the transient values of the forward
/// and of the backward with the convolutions' im2col scratch
/// (PIPE_MEM_WORKSPACE; saved values, from when they are computed until the
/// backward frees them, are not), and the received tensors not yet freed or
/// saved (PIPE_MEM_COMM).
struct ProgramMemory {
  std::vector<double> forwardWorkspace, backwardWorkspace, forwardReceived, backwardReceived;
  /// Bytes each stage's forward hands to saved slots per micro-batch (a storage
  /// once; views of parameters and constants not).
  std::vector<double> saved;
};

/// Loads the dialects the lowering builds in. Loading changes the context, so
/// a caller that lets other threads read IR while it lowers loads them first.
void loadPipeToEmitCDialects(mlir::MLIRContext *context);

/// Lowers the module's pipeline in place to one `emitc.file "rankK"` per rank,
/// and reports the program's memory in `memory` when given.
mlir::LogicalResult lowerPipelineToEmitC(mlir::ModuleOp module,
                                         ProgramMemory *memory = nullptr);

/// Prints the C++ of `rank` from a module lowered by lowerPipelineToEmitC.
mlir::LogicalResult translateRankToCpp(mlir::ModuleOp module, int64_t rank,
                                       llvm::raw_ostream &os);

} // namespace pipe

#endif // PIPE_CONVERSION_PIPETOEMITC_PIPETOEMITC_H
