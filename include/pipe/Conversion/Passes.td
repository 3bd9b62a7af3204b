//===- Passes.td - conversions out of the pipe dialect -----*- tablegen -*-===//
#ifndef PIPE_CONVERSION_PASSES
#define PIPE_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def ConvertPipeToEmitC : Pass<"convert-pipe-to-emitc", "::mlir::ModuleOp"> {
  let summary = "Lower a differentiated, scheduled pipeline to one EmitC file per rank";
  let description = [{
    Replaces the `pipe.pipeline` (after pipe-schedule and pipe-differentiate)
    by one `emitc.file "rankK"` per GPU. Each holds a `stageS_forward` and a
    `stageS_backward` function per stage of the rank, which call the runtime
    C ABI (runtime/include/pipe_runtime.h) once per op, and the exported
    `pipe_program_setup` (optimizer, nodes, stages, parameters) and
    `pipe_program_step` (the rank's actions in schedule order, the
    tied-parameter reduction and the optimizer). Every value is freed after
    its last use; the values a backward reads move to saved slots at the end
    of the forward. `mlir-translate --mlir-to-cpp --file-id=rankK` (or the
    main job) prints the C++ of one rank. docs/runtime-abi.md describes the
    result.
  }];
  let dependentDialects = ["::mlir::emitc::EmitCDialect"];
}

#endif // PIPE_CONVERSION_PASSES
