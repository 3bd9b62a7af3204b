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

def PipePartition : Pass<"pipe-partition", "::mlir::ModuleOp"> {
  let summary = "Choose the stage of every op and the schedule";
  let description = [{
    Builds the chain problem of the module's function through the cost model
    (per-op time on `target` at `dtype`, saved activations, parameter and
    optimizer state by `optimizer`), runs the partitioner (`algo`, default
    `best`, minimising `objective`), and writes `pipe.stage` on every op (the
    stage of the layer holding it: the layers are the chain builder's groups
    of ops, so nothing depends on names or locations) and `pipe.plan`
    (algorithm, schedule, the settings it assumed, period, per-stage time and
    memory, per-GPU action lists, model totals) on the module. When no plan
    fits, the error names the stage, the bytes it needs and the limit, and
    advises.
  }];
  let options = [
    Option<"stages", "stages", "int", /*default=*/"2",
           "GPUs in the pipeline (a plan may run several stages on one)">,
    Option<"memory", "memory", "std::string", /*default=*/"\"\"",
           "Memory per GPU with its unit, e.g. 80GB or 80GiB (default: the target's)">,
    Option<"target", "target", "std::string", /*default=*/"\"h100\"",
           "GPU: a built-in name or a target JSON file">,
    Option<"microBatchSize", "micro-batch-size", "int64_t", /*default=*/"0",
           "Expected micro-batch size (the model's batch dim)">,
    Option<"microbatches", "microbatches", "int", /*default=*/"32",
           "Micro-batches per iteration">,
    Option<"algo", "algo", "std::string", /*default=*/"\"best\"", "Partitioning algorithm">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "Schedule family; empty lets the partitioner pick (1F1B or interleaved)">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"fp32\"", "Compute dtype">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adam\"",
           "Optimizer (sgd, momentum, adam)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"\"",
           "Measured per-node times (JSON keyed by ONNX node name)">,
    Option<"objective", "objective", "std::string", /*default=*/"\"iteration\"",
           "What best minimises: iteration (time of one training step) or period">,
    Option<"timeLimit", "time-limit", "double", /*default=*/"10",
           "Wall-clock limit of each MIP algorithm, in seconds">,
  ];
  let dependentDialects = ["::pipe::pipeline::PipeDialect"];
}

def PipeSchedule : Pass<"pipe-schedule", "::mlir::ModuleOp"> {
  let summary = "Attach each stage's action list for the chosen schedule";
  let description = [{
    For every `pipe.pipeline`, takes the per-GPU order of forward and
    backward work (the plan's `actions`, written by pipe-partition, or the
    partitioner's generator for the pipeline's `schedule` when there is no
    plan), checks it with the partitioner's checker (every F and B of every
    micro-batch exactly once, no deadlock) on the stage graph the activation
    sends define, and expands it on each stage into `actions`: receive,
    forward, send for each micro-batch's F; receive gradients, backward, send
    gradients for its B; then the reduction of tied-weight gradients and the
    optimizer step. The actions use plan.json's vocabulary (`F3@s1`,
    `SEND_F3@s1->s2 tag=4`, `RECV_B3@s2->s1 tag=4`, `OPTIMIZER_STEP`).
  }];
  let dependentDialects = ["::pipe::pipeline::PipeDialect"];
}

#endif // PIPE_PIPE_PASSES
