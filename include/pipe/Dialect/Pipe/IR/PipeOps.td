//===- PipeOps.td - the pipe dialect -----------------------*- tablegen -*-===//
//
// The pipeline structure after partitioning: a pipeline of stages, each the
// forward program of one GPU, with point-to-point send/recv of activations
// and gradients on every cut edge and references to the parameters it uses.
// Verifier constraints are numbered and listed in docs/pipe-dialect.md.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_PIPE_OPS
#define PIPE_PIPE_OPS

include "mlir/IR/OpBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Pipe_Dialect : Dialect {
  let name = "pipe";
  let cppNamespace = "::pipe::pipeline";
  let summary = "Pipelined execution: stages, transfers, parameter references";
  let usePropertiesForAttributes = 1;
  let useDefaultAttributePrinterParser = 1;
  // The plan the partitioner chose, on the module until pipe-split-stages
  // moves it onto the pipeline: PipeDialect::getPlanAttrHelper().
  let discardableAttrs = (ins "::pipe::pipeline::PlanAttr":$plan);
}

include "pipe/Dialect/Pipe/IR/PipeAttrs.td"

def Pipe_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

// nn.param's source, on pipe.param too: one enum for both dialects. (An
// EnumAttr of the nn dialect cannot be included here: tablegen would emit its
// enum into the pipe dialect's files as well.)
def Pipe_ParamSourceAttr
    : Attr<CPred<"::llvm::isa<::pipe::nn::ParamSourceAttr>($_self)">,
           "where the parameter's values are stored (#nn.param_source)"> {
  let storageType = "::pipe::nn::ParamSourceAttr";
  let returnType = "::pipe::nn::ParamSource";
  let convertFromStorage = "$_self.getValue()";
  let constBuilderCall = "::pipe::nn::ParamSourceAttr::get($_builder.getContext(), $0)";
}

class Pipe_Op<string mnemonic, list<Trait> traits = []>
    : Op<Pipe_Dialect, mnemonic, traits>;

def Pipe_PipelineOp : Pipe_Op<"pipeline", [Symbol, SymbolTable, NoTerminator,
                                           SingleBlock, IsolatedFromAbove]> {
  let summary = "A model split into stages, with its plan";
  let description = [{
    Holds one `pipe.stage` per stage. `plan` records what the partitioner
    chose (algorithm, schedule, period, memory per stage ...); `order`
    the checked per-GPU order of compute actions (pipe-schedule); `training`
    the loss and optimizer once pipe-differentiate has run.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Pipe_I64Attr:$num_stages,
                       Pipe_I64Attr:$microbatches, StrAttr:$schedule,
                       OptionalAttr<Pipe_PlanAttr>:$plan,
                       OptionalAttr<Pipe_ScheduleOrderAttr>:$order,
                       OptionalAttr<Pipe_TrainingAttr>:$training);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  // Checked after the stages and their ops, which the matching relies on.
  let hasRegionVerifier = 1;
}

def Pipe_StageOp : Pipe_Op<"stage", [Symbol,
                                     ParentOneOf<["PipelineOp", "::mlir::ModuleOp"]>,
                                     IsolatedFromAbove]> {
  let summary = "The forward program of one stage";
  let description = [{
    The block arguments are the model inputs the stage reads (`model_inputs`
    gives their positions among the model's inputs); `pipe.return` yields the
    model outputs it produces (`model_outputs`). Values from other stages
    arrive through `pipe.recv`. `actions` is the per-GPU action list that
    `pipe-schedule` attaches. A stage sits in its `pipe.pipeline`, or alone in
    a module (the main job's `stageK.mlir`), where the checks that need the
    other stages (peers, send/recv pairing) do not apply.

    After `pipe-differentiate`, the `backward` region holds the stage's
    backward program: its block arguments are the values the forward keeps
    for it (the `saved` operands of the forward's `pipe.return`, in order),
    exactly the saved-for-backward set of the memory model. A stage marked
    `recompute` keeps only the values it receives and its inputs; its
    backward computes the rest again from them.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Pipe_I64Attr:$index, Pipe_I64Attr:$device,
                       DenseI64ArrayAttr:$model_inputs, DenseI64ArrayAttr:$model_outputs,
                       OptionalAttr<Pipe_StageActionsAttr>:$actions,
                       UnitAttr:$recompute);
  let regions = (region SizedRegion<1>:$body, MaxSizedRegion<1>:$backward);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body (`backward` $backward^)?";
  let hasVerifier = 1;
}

def Pipe_ReturnOp : Pipe_Op<"return", [Terminator, HasParent<"StageOp">, Pure,
                                       ReturnLike, AttrSizedOperandSegments]> {
  let summary = "The model outputs a forward produces, and what it keeps";
  let description = [{
    Ends a stage's forward with the model outputs it produces (`values`) and,
    after differentiation, the values its backward reads (`saved`). Ends the
    backward region with no operands.
  }];
  let arguments = (ins Variadic<AnyType>:$values, Variadic<AnyType>:$saved);
  let assemblyFormat = [{
    attr-dict ($values^ `:` type($values))? (`saved` `(` $saved^ `:` type($saved) `)`)?
  }];
  let builders = [OpBuilder<(ins "::mlir::ValueRange":$values),
                            [{ build($_builder, $_state, values, ::mlir::ValueRange()); }]>];
}

def Pipe_SendOp : Pipe_Op<"send"> {
  let summary = "Send a tensor to another stage";
  let description = [{
    `kind` is `activation` (forward, to the consuming stage) or `gradient`
    (backward, to the producing stage). `tag` pairs the send with exactly one
    `pipe.recv` of the peer stage.
  }];
  let arguments = (ins AnyTensor:$value, Pipe_I64Attr:$peer, Pipe_I64Attr:$tag,
                       Pipe_TransferKindAttr:$kind);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Pipe_RecvOp : Pipe_Op<"recv"> {
  let summary = "Receive a tensor from another stage";
  let arguments = (ins Pipe_I64Attr:$peer, Pipe_I64Attr:$tag, Pipe_TransferKindAttr:$kind);
  let results = (outs AnyTensor:$value);
  let assemblyFormat = "attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Pipe_GradOp : Pipe_Op<"grad", [Pure, AllTypesMatch<["value", "gradient"]>]> {
  let summary = "The loss gradient with respect to a value of this micro-batch";
  let description = [{
    Stands for dLoss/d`value` of the current micro-batch in the stage's
    backward pass: the gradient a stage sends back for an activation it
    received. The differentiation pass replaces it with the VJP chain of the
    stage's ops.
  }];
  let arguments = (ins AnyTensor:$value);
  let results = (outs AnyTensor:$gradient);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Pipe_ParamOp : Pipe_Op<"param", [Pure]> {
  let summary = "A stage's reference to a parameter, with its owner";
  let description = [{
    Like `nn.param`, plus the stages that use the parameter. A parameter used
    by several stages (tied weights) is owned by `owner`, which applies the
    optimizer step; the users' gradients are reduced into the owner.
  }];
  let arguments = (ins StrAttr:$name, Pipe_ParamSourceAttr:$source,
                       DefaultValuedStrAttr<StrAttr, "">:$path,
                       DefaultValuedAttr<Pipe_I64Attr, "-1">:$offset,
                       DefaultValuedAttr<Pipe_I64Attr, "-1">:$length,
                       DefaultValuedAttr<BoolAttr, "true">:$trainable,
                       Pipe_I64Attr:$owner, DenseI64ArrayAttr:$users);
  let results = (outs AnyStaticShapeTensor:$value);
  let assemblyFormat = "$name attr-dict `:` type($value)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training: labels, the loss, gradient seeds and parameter gradients
//===----------------------------------------------------------------------===//

def Pipe_LabelOp : Pipe_Op<"label", [Pure]> {
  let summary = "Label `index` of the current micro-batch";
  let description = [{
    What the loss compares the model output with. Integer labels are class
    indices in [0, `range`); float labels (mse) have `range` 0.
  }];
  let arguments = (ins Pipe_I64Attr:$index, Pipe_I64Attr:$range);
  let results = (outs AnyStaticShapeTensor:$value);
  let assemblyFormat = "$index attr-dict `:` type($value)";
}

def Pipe_LossOp : Pipe_Op<"loss"> {
  let summary = "The loss of the current micro-batch: reported, and differentiated";
  let description = [{
    A scalar float. pipe-differentiate scales it by 1 / microbatches (so a
    pipelined step averages over the whole mini-batch) and seeds the
    backward with its gradient, 1.
  }];
  let arguments = (ins AnyTensor:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
  let hasVerifier = 1;
}

def Pipe_OutputGradOp : Pipe_Op<"output_grad", [Pure]> {
  let summary = "The loss gradient of model output `index` (loss none): an input";
  let arguments = (ins Pipe_I64Attr:$index);
  let results = (outs AnyStaticShapeTensor:$value);
  let assemblyFormat = "$index attr-dict `:` type($value)";
}

def Pipe_AccumulateGradOp : Pipe_Op<"accumulate_grad",
                                     [AllTypesMatch<["gradient", "param"]>]> {
  let summary = "Adds a micro-batch's gradient into a parameter's gradient";
  let description = [{
    `param` is a `pipe.param` of the stage; the sum over micro-batches is in
    fp32, and tied parameters reduce it into the owner before the update.
  }];
  let arguments = (ins AnyTensor:$gradient, AnyTensor:$param);
  let assemblyFormat = "$gradient `into` $param attr-dict `:` type($gradient)";
  let hasVerifier = 1;
}

#endif // PIPE_PIPE_OPS
