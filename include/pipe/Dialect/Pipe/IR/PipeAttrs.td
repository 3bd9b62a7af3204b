//===- PipeAttrs.td - typed attributes of the pipe dialect -*- tablegen -*-===//
//
// The training set-up a pipeline carries from pipe-attach-loss and
// pipe-differentiate to the lowering: the loss and the optimizer with its
// hyper-parameters.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_PIPE_ATTRS
#define PIPE_PIPE_ATTRS

include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Pipe_LossKind : I32EnumAttr<"LossKind", "the training loss", [
    I32EnumAttrCase<"none", 0>, I32EnumAttrCase<"cross_entropy", 1>,
    I32EnumAttrCase<"mse", 2>, I32EnumAttrCase<"output", 3>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

def Pipe_OptimizerKind : I32EnumAttr<"OptimizerKind", "the optimizer", [
    I32EnumAttrCase<"sgd", 0>, I32EnumAttrCase<"momentum", 1>,
    I32EnumAttrCase<"adam", 2>, I32EnumAttrCase<"adamw", 3>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

// An f64 printed as a plain number with every digit it needs to read back.
def Pipe_DoubleParameter : AttrParameter<"::mlir::FloatAttr", "an f64 value"> {
  let printer = "$_printer << ::pipe::pipeline::formatDouble($_self.getValueAsDouble())";
  let parser = "::pipe::pipeline::parseF64Attr($_parser)";
}

def Pipe_TrainingAttr : AttrDef<Pipe_Dialect, "Training"> {
  let mnemonic = "training";
  let summary = "Loss, optimizer and hyper-parameters of a training step";
  let description = [{
    `loss` is attached to model output 0 (`none`: the output gradients are
    inputs). The optimizer follows torch.optim: `momentum` is SGD with
    momentum; `adam` adds weight decay to the gradient, `adamw` decays the
    weights. The update runs after the last micro-batch's backward, on the
    owner of each parameter, with the gradients summed over micro-batches.
  }];
  let parameters = (ins
    EnumParameter<Pipe_LossKind>:$loss,
    EnumParameter<Pipe_OptimizerKind>:$optimizer,
    Pipe_DoubleParameter:$lr,
    Pipe_DoubleParameter:$momentum,
    Pipe_DoubleParameter:$beta1,
    Pipe_DoubleParameter:$beta2,
    Pipe_DoubleParameter:$eps,
    Pipe_DoubleParameter:$weight_decay);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Pipe_ActionKind : I32EnumAttr<"ActionKind", "a compute action of a schedule", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"backward_input", 2>, I32EnumAttrCase<"backward_weight", 3>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

def Pipe_ActionAttr : AttrDef<Pipe_Dialect, "Action"> {
  let mnemonic = "action";
  let summary = "One compute action of a GPU's schedule";
  let description = [{
    The forward, backward (or its input / weight half, zero-bubble
    schedules) of micro-batch `mb` on stage `stage`.
  }];
  let parameters = (ins EnumParameter<Pipe_ActionKind>:$kind, "int64_t":$mb,
                        "int64_t":$stage);
  let assemblyFormat = "`<` $kind `,` struct($mb, $stage) `>`";
}

def Pipe_TransferKind : I32EnumAttr<"TransferKind", "what a transfer carries", [
    I32EnumAttrCase<"activation", 0>, I32EnumAttrCase<"gradient", 1>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

def Pipe_TransferKindAttr : EnumAttr<Pipe_Dialect, Pipe_TransferKind, "transfer_kind"> {
  let assemblyFormat = "`<` $value `>`";
}

def Pipe_TransferDirection : I32EnumAttr<"TransferDirection", "send or receive", [
    I32EnumAttrCase<"send", 0>, I32EnumAttrCase<"recv", 1>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

def Pipe_TransferAttr : AttrDef<Pipe_Dialect, "Transfer"> {
  let mnemonic = "transfer";
  let summary = "One point-to-point transfer in a stage's action list";
  let description = [{
    The send or receive of micro-batch `mb`'s activation (forward, from the
    producing stage `from` to the consuming stage `to`) or gradient (backward,
    the other way), matched with its `pipe.send`/`pipe.recv` by `tag`.
  }];
  let parameters = (ins EnumParameter<Pipe_TransferDirection>:$direction,
                        EnumParameter<Pipe_TransferKind>:$kind, "int64_t":$mb,
                        "int64_t":$from, "int64_t":$to, "int64_t":$tag);
  let assemblyFormat = "`<` $direction $kind `,` struct($mb, $from, $to, $tag) `>`";
}

def Pipe_StepAction : I32EnumAttr<"StepAction", "an action once per training step", [
    I32EnumAttrCase<"reduce_tied_gradients", 0>, I32EnumAttrCase<"optimizer_step", 1>]> {
  let cppNamespace = "::pipe::pipeline";
  let genSpecializedAttr = 0;
}

def Pipe_StepActionAttr : EnumAttr<Pipe_Dialect, Pipe_StepAction, "step"> {
  let summary = "An action of a stage once per training step, after its last backward";
  let assemblyFormat = "`<` $value `>`";
}

def Pipe_StageActionsAttr
    : TypedArrayAttrBase<AnyAttrOf<[Pipe_ActionAttr, Pipe_TransferAttr, Pipe_StepActionAttr]>,
                         "a stage's actions in order: compute, transfers, step actions"> {
  let constBuilderCall = ?;
}

// A double (held as an APFloat, which the attribute storage can hash and
// compare bit for bit) printed as a plain number with every digit it needs to
// read back; 0 by default.
class Pipe_DoubleValue<string desc> : APFloatParameter<desc> {
  let printer = "$_printer << ::pipe::pipeline::formatDouble($_self.convertToDouble())";
  let parser = "::pipe::pipeline::parseDouble($_parser)";
  let defaultValue = "::llvm::APFloat(0.0)";
}

def Pipe_StageMetricsAttr : AttrDef<Pipe_Dialect, "StageMetrics"> {
  let mnemonic = "stage_metrics";
  let summary = "The plan's figures for one stage";
  let description = [{
    `time_ms`: the stage's forward + backward time per micro-batch;
    `memory_bytes`: the peak of its GPU under the plan's schedule;
    `memory_limit_bytes`: that GPU's limit, when there is one.
  }];
  let parameters = (ins Pipe_DoubleValue<"forward + backward time (ms)">:$time_ms,
                        "int64_t":$memory_bytes,
                        OptionalParameter<"std::optional<int64_t>">:$memory_limit_bytes);
  let assemblyFormat = "`<` struct(params) `>`";
}

def Pipe_PlanAttr : AttrDef<Pipe_Dialect, "Plan"> {
  let mnemonic = "plan";
  let summary = "What the partitioner chose, and the figures it predicts";
  let description = [{
    Written by `pipe-partition` on the module and moved by
    `pipe-split-stages` onto the `pipe.pipeline`. `gpu_of_stage` maps each
    stage to its GPU (several stages per GPU when interleaved); `actions` is
    each GPU's order of compute actions, which `pipe-schedule` checks and
    extends with the transfers. `recompute_stages` lists the stages whose
    backward runs their forward again (they keep only what they receive).
    `replicas` data-parallel copies of the pipeline train together
    (pipe-partition's `gpus`), each on `microbatches` micro-batches, and
    all-reduce their gradients once per step; the other figures are one
    replica's. `replica_layout` places them on the GPUs: `pipeline-major`
    (each pipeline on consecutive GPUs) or `stage-major` (the replicas of
    each pipeline GPU on consecutive GPUs). Every field has a default, so a hand-written plan can give only
    what a test needs.
  }];
  let parameters = (ins
    StringRefParameter<"the algorithm that chose the plan", "\"\"">:$algorithm,
    StringRefParameter<"the schedule family", "\"1f1b\"">:$schedule,
    StringRefParameter<"what best minimised", "\"iteration\"">:$objective,
    DefaultValuedParameter<"int64_t", "1">:$stages,
    DefaultValuedParameter<"int64_t", "1">:$gpus,
    DefaultValuedParameter<"int64_t", "1">:$microbatches,
    DefaultValuedParameter<"int64_t", "0">:$micro_batch_size,
    StringRefParameter<"the target GPU", "\"\"">:$target,
    StringRefParameter<"the compute dtype", "\"\"">:$dtype,
    StringRefParameter<"the optimizer the memory model assumed", "\"\"">:$optimizer,
    StringRefParameter<"the memory limit per GPU, as given", "\"\"">:$memory_limit,
    StringRefParameter<"the links the plan assumed", "\"\"">:$link_model,
    Pipe_DoubleValue<"steady-state time between micro-batches (ms)">:$period_ms,
    Pipe_DoubleValue<"one training step of all micro-batches (ms)">:$iteration_ms,
    Pipe_DoubleValue<"the partitioner's lower bound on the period (ms)">:$lower_bound_ms,
    Pipe_DoubleValue<"idle fraction of the iteration">:$bubble,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$gpu_of_stage,
    OptionalParameter<"::mlir::ArrayAttr">:$stage_metrics,
    OptionalParameter<"::mlir::ArrayAttr">:$actions,
    DefaultValuedParameter<"int64_t", "0">:$parameters,
    DefaultValuedParameter<"int64_t", "0">:$forward_flops,
    OptionalParameter<"::mlir::DenseI64ArrayAttr">:$recompute_stages,
    DefaultValuedParameter<"int64_t", "1">:$replicas,
    StringRefParameter<"how the replicas sit on the GPUs", "\"pipeline-major\"">:$replica_layout);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Pipe_ScheduleOrderAttr
    : TypedArrayAttrBase<TypedArrayAttrBase<Pipe_ActionAttr, "actions of one GPU">,
                         "actions of every GPU, in order"> {
  let constBuilderCall = ?;
}

#endif // PIPE_PIPE_ATTRS
