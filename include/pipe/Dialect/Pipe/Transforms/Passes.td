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

def PipeSchedule : Pass<"pipe-schedule", "::mlir::ModuleOp"> {
  let summary = "Attach each stage's action list for the chosen schedule";
  let description = [{
    For every `pipe.pipeline`, takes the per-GPU order of forward and
    backward work (the plan's `actions`, written by pipe-partition, or the
    partitioner's generator for the pipeline's `schedule` when there is no
    plan), checks it with the partitioner's checker (every F and B of every
    micro-batch exactly once, no deadlock), and expands it on each stage into
    `actions`: receive, forward, send for each micro-batch's F; receive
    gradients, backward, send gradients for its B; then the reduction of
    tied-weight gradients and the optimizer step.
  }];
  let dependentDialects = ["::pipe::pipeline::PipeDialect"];
}

#endif // PIPE_PIPE_PASSES
