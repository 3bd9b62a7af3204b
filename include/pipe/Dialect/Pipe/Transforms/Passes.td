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

def PipeAttachLoss : Pass<"pipe-attach-loss", "::mlir::ModuleOp"> {
  let summary = "Attach the training loss to the model's output";
  let description = [{
    Runs on the model function before partitioning, so that the cost model
    and the planner see the loss. `cross-entropy` treats the last dim of
    model output 0 as the classes: the logits are viewed as [rows, classes],
    `pipe.label 0` gives i64 class indices of the output's shape without its
    last dim, and `nn.softmax_cross_entropy_loss` (mean) feeds `pipe.loss`.
    `mse` takes a float `pipe.label 0` of the output's shape and the mean of
    the squared difference. `none` attaches nothing: the gradients of the
    outputs become inputs of the backward (see pipe-differentiate).
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"cross-entropy\"",
           "Loss: cross-entropy, mse or none">,
  ];
  let dependentDialects = ["::pipe::pipeline::PipeDialect", "::pipe::nn::NNDialect"];
}

def PipeDifferentiate : Pass<"pipe-differentiate", "::mlir::ModuleOp"> {
  let summary = "Give every stage its backward program and the pipeline its optimizer";
  let description = [{
    For each `pipe.stage` of each `pipe.pipeline` (after pipe-split-stages),
    builds the `backward` region from the gradient rule of every op
    (GradientOpInterface), in reverse program order: gradients of values
    used several times are summed; the gradients of received activations are
    sent back (the stage's `pipe.grad` placeholders); parameter gradients go
    to `pipe.accumulate_grad`. A forward value the backward reads is kept
    (a `saved` operand of the forward's `pipe.return`, a block argument of
    the backward) unless it depends on parameters and constants only, then
    the backward recomputes it. Ops whose backward needs a value their
    inference form does not produce get their training form first: batch
    norm with batch statistics (`nn.batch_norm_train`), layer norm with its
    statistics, max pooling with indices, dropout with its mask.

    The loss of a stage (`pipe.loss`) is scaled by 1 / microbatches, so that
    a pipelined step averages over the whole mini-batch, and seeds the
    backward. With `loss=none`, every float model output a stage returns
    seeds it with `pipe.output_grad`. The pipeline records the loss and the
    optimizer in its `training` attribute.
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"cross-entropy\"",
           "Loss the model carries: cross-entropy, mse or none">,
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"adam\"",
           "Optimizer: sgd, momentum, adam or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0", "Weight decay">,
  ];
  let dependentDialects = ["::pipe::pipeline::PipeDialect", "::pipe::nn::NNDialect"];
}

#endif // PIPE_PIPE_PASSES
