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
    I32EnumAttrCase<"mse", 2>]> {
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

def Pipe_ScheduleOrderAttr
    : TypedArrayAttrBase<TypedArrayAttrBase<Pipe_ActionAttr, "actions of one GPU">,
                         "actions of every GPU, in order"> {
  let constBuilderCall = ?;
}

#endif // PIPE_PIPE_ATTRS
