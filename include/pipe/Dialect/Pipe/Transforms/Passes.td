//===- Passes.td - pipe dialect passes ---------------------*- tablegen -*-===//
#ifndef PIPE_PIPE_PASSES
#define PIPE_PIPE_PASSES

include "mlir/Pass/PassBase.td"

def PipeSplitStages : Pass<"pipe-split-stages", "::mlir::ModuleOp"> {
  let summary = "Split a partitioned function into one pipe.stage per stage";
  let description = [{
    Reads the `pipe.stage` attribute that pipe-partition put on every op of
    `func @main` and rebuilds the function as a `pipe.pipeline` with one
    `pipe.stage` per stage. Each value used by a stage other than its
    producer's crosses once per consuming stage: `pipe.send` after the
    producer and `pipe.recv` before the first user (skip connections go
    straight to the consuming stage), and the gradient travels back with
    the same tag (`pipe.grad`, `pipe.send`/`pipe.recv` of kind `gradient`).
    Constants are cloned into every stage that uses them; parameters become
    `pipe.param` in every user stage, owned by the first.
  }];
  let dependentDialects = ["::pipe::pipeline::PipeDialect"];
}

#endif // PIPE_PIPE_PASSES
