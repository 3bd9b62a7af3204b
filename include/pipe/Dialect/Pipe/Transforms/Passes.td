//===- Passes.td - pipe dialect passes ---------------------*- tablegen -*-===//
#ifndef PIPE_PIPE_PASSES
#define PIPE_PIPE_PASSES

include "mlir/Pass/PassBase.td"

// Every option of the planning passes is declared once, here; the passes that
// take it and pipe-plan-pipeline (the whole pipeline) list it, and pipe-opt's main job
// takes pipe-plan-pipeline's options as its own (--NAME=VALUE).
defvar PipeOptimizerOption = Option<"optimizer", "optimizer", "std::string",
    /*default=*/"\"adam\"", "Optimizer: sgd, momentum, adam or adamw">;
defvar PipePartitionOptionList = [
  Option<"stages", "stages", "int", /*default=*/"2",
         "GPUs in the pipeline (a plan may run several stages on one); with gpus, "
         "0 chooses it">,
  Option<"gpus", "gpus", "int", /*default=*/"0",
         "GPUs in all, for data-parallel replicas of the pipeline: gpus / stages replicas, "
         "each on microbatches / replicas, placed pipeline-major or stage-major, whichever "
         "gives the shorter iteration (stages 0: the split and layout with the shortest "
         "iteration); 0: one pipeline">,
  Option<"replicaLayout", "replica-layout", "std::string", /*default=*/"\"auto\"",
         "With gpus: how the replicas sit on the GPUs: pipeline-major (each pipeline on "
         "consecutive GPUs), stage-major (each pipeline GPU's replicas on consecutive "
         "GPUs) or auto (each split tried both ways)">,
  Option<"memory", "memory", "std::string", /*default=*/"\"\"",
         "Memory per GPU with its unit, e.g. 80GB or 80GiB (default: the target's)">,
  Option<"target", "target", "std::string", /*default=*/"\"h100\"",
         "GPU: h100, a100-80gb, ... or a target JSON file">,
  Option<"microBatchSize", "micro-batch-size", "int64_t", /*default=*/"0",
         "Samples per micro-batch, bound to a symbolic batch dim (required when the batch "
         "is symbolic; default: the model's batch)">,
  Option<"microbatches", "microbatches", "int", /*default=*/"32",
         "Micro-batches per iteration">,
  Option<"algo", "algo", "std::string", /*default=*/"\"best\"",
         "Partitioning algorithm, or best / all">,
  Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
         "gpipe, 1f1b, interleaved, 1f1b-stash, zb-h1, periodic (default: the best of "
         "1f1b and interleaved)">,
  Option<"dtype", "dtype", "std::string", /*default=*/"\"fp32\"",
         "Compute dtype: fp32, tf32, bf16, fp16, fp8">,
  PipeOptimizerOption,
  Option<"profile", "profile", "std::string", /*default=*/"\"\"",
         "Measured per-node times (JSON keyed by ONNX node name)">,
  Option<"objective", "objective", "std::string", /*default=*/"\"iteration\"",
         "What best minimises: iteration (the time of one training step of the "
         "micro-batches) or period (the steady state)">,
  Option<"timeLimit", "time-limit", "double", /*default=*/"10",
         "Wall-clock seconds each MIP algorithm (ilp, ilp-general) and madpipe-span's "
         "search may take">,
  Option<"generalBound", "general-bound", "double", /*default=*/"0",
         "After choosing, seconds CBC may take to prove a lower bound over every "
         "general allocation (map layer -> GPU), up to the chosen period (0: none)">,
  Option<"recompute", "recompute", "std::string", /*default=*/"\"none\"",
         "Stages that run their forward again in the backward and keep only their "
         "inputs: none, auto (only where a stage would not fit otherwise) or all">,
];
defvar PipeLossOption = Option<"loss", "loss", "std::string", /*default=*/"\"cross-entropy\"",
    "Training loss on model output 0: cross-entropy, mse, output (output 0 is the loss) or none">;
defvar PipeStepOptionList = [
  Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
  Option<"momentum", "momentum", "double", /*default=*/"0.9", "SGD momentum">,
  Option<"beta1", "beta1", "double", /*default=*/"0.9", "Adam beta1">,
  Option<"beta2", "beta2", "double", /*default=*/"0.999", "Adam beta2">,
  Option<"eps", "eps", "double", /*default=*/"1e-8", "Adam epsilon">,
  Option<"weightDecay", "weight-decay", "double", /*default=*/"0.0", "Weight decay">,
];

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
  let options = PipePartitionOptionList;
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
    the squared difference. `output` takes model output 0 itself, a float
    scalar (a loss computed in the graph, such as ONNX's
    SoftmaxCrossEntropyLoss), as the loss. `none` attaches nothing: the
    gradients of the outputs become inputs of the backward (see
    pipe-differentiate).
  }];
  let options = [PipeLossOption];
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
  let options = !listconcat([PipeLossOption, PipeOptimizerOption], PipeStepOptionList);
  let dependentDialects = ["::pipe::pipeline::PipeDialect", "::pipe::nn::NNDialect"];
}

def PipePlanPipeline : Pass<"pipe-plan-pipeline", "::mlir::ModuleOp"> {
  let summary = "The planning pipeline: loss, partition, stages, schedule, backward";
  let description = [{
    Runs, on an imported model, the passes of pipe-opt's main job with one
    set of options: pipe-attach-loss, pipe-partition, pipe-split-stages,
    pipe-schedule and pipe-differentiate (without `train`, only partition,
    split and schedule). `pipe-opt MODEL --pipeline-stages=N --NAME=VALUE`
    runs this pipeline with stages=N and the same options, so
    `--pass-pipeline='builtin.module(pipe-plan-pipeline{stages=N ...})'` gives the
    main job's pipeline.mlir. From C++, `buildPlanPipeline` adds the same
    passes to a pass manager.
  }];
  let options = !listconcat(PipePartitionOptionList, [
    PipeLossOption,
    Option<"train", "train", "bool", /*default=*/"true",
           "Attach the loss and build the backward programs (false: plan only)">,
  ], PipeStepOptionList);
  let dependentDialects = ["::pipe::pipeline::PipeDialect", "::pipe::nn::NNDialect",
                           "::mlir::func::FuncDialect"];
}

#endif // PIPE_PIPE_PASSES
