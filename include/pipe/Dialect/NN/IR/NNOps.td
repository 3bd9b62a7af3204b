//===- NNOps.td - nn dialect ops ---------------------------*- tablegen -*-===//
//
// One op per ONNX op kind. Semantics are ONNX's (https://onnx.ai/onnx/operators/)
// at the newest opset the importer normalises to; verifier constraints are
// numbered (`conv_c1`, ...) and listed in docs/nn-dialect.md.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_NN_OPS
#define PIPE_NN_OPS

include "pipe/Dialect/NN/IR/NNBase.td"
include "pipe/Dialect/NN/IR/NNInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

// A signless 64-bit integer attribute read as a signed value: ONNX axes and
// sizes are signed (upstream I64Attr reads as uint64_t).
def NN_I64Attr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                              "64-bit signless integer attribute"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

class NN_Op<string mnemonic, list<Trait> traits = []>
    : Op<NN_Dialect, mnemonic,
         !listconcat(traits, [Pure,
             DeclareOpInterfaceMethods<NN_ShapeInferenceOpInterface>])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
}


//===----------------------------------------------------------------------===//
// Values: constants and parameters
//===----------------------------------------------------------------------===//

def NN_ConstantOp : NN_Op<"constant", [ConstantLike]> {
  let summary = "A constant tensor (ONNX Constant, small integer initializers)";
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  // `nn.constant dense<[1, 2]> : tensor<2xi64>`: the result type is the value's.
  let assemblyFormat = ?;
  let hasCustomAssemblyFormat = 1;
  let hasFolder = 1;
}

def NN_ParamSource : I32EnumAttr<"ParamSource", "where a parameter's values are stored", [
    I32EnumAttrCase<"file", 0>, I32EnumAttrCase<"external", 1>,
    I32EnumAttrCase<"inline_", 2, "inline">]> {
  let cppNamespace = "::pipe::nn";
  let genSpecializedAttr = 0;
}

def NN_ParamSourceAttr : EnumAttr<NN_Dialect, NN_ParamSource, "param_source"> {
  let assemblyFormat = "`<` $value `>`";
}

def NN_ParamOp : NN_Op<"param"> {
  let summary = "A reference to a trainable parameter (an ONNX initializer)";
  let description = [{
    The parameter's bytes stay where they are: `source` is `file` (a byte range
    of the model file itself), `external` (a byte range of the external-data
    file `path`), or `inline` (a textual model: no byte range). `name` is the
    initializer's name, which equals the framework's parameter name.
    `trainable` is false for buffers such as batch-norm running statistics
    and for integer initializers: they get no gradient or optimizer state.
  }];
  let arguments = (ins StrAttr:$name, NN_ParamSourceAttr:$source,
                       DefaultValuedStrAttr<StrAttr, "">:$path,
                       DefaultValuedAttr<NN_I64Attr, "-1">:$offset,
                       DefaultValuedAttr<NN_I64Attr, "-1">:$length,
                       DefaultValuedAttr<BoolAttr, "true">:$trainable);
  let results = (outs AnyTensor:$output);
  let assemblyFormat = "$name attr-dict `:` type($output)";
  let hasVerifier = 1;
}

def NN_ConstantOfShapeOp : NN_Op<"constant_of_shape"> {
  let summary = "A tensor of the given shape filled with one value";
  let arguments = (ins AnyTensor:$shape, ElementsAttr:$value);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_RangeOp : NN_Op<"range"> {
  let summary = "start, start + delta, ... up to limit (exclusive)";
  let arguments = (ins AnyTensor:$start, AnyTensor:$limit, AnyTensor:$delta);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Element-wise ops
//===----------------------------------------------------------------------===//

class NN_UnaryOp<string mnemonic, string summaryText, list<Trait> traits = []>
    : NN_Op<mnemonic, traits> {
  let summary = summaryText;
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
}

def NN_ReluOp : NN_UnaryOp<"relu", "max(x, 0)">;
def NN_ErfOp : NN_UnaryOp<"erf", "Gauss error function">;
def NN_TanhOp : NN_UnaryOp<"tanh", "Hyperbolic tangent">;
def NN_SigmoidOp : NN_UnaryOp<"sigmoid", "1 / (1 + exp(-x))">;
def NN_SqrtOp : NN_UnaryOp<"sqrt", "Square root">;
def NN_ExpOp : NN_UnaryOp<"exp", "Exponential">;
def NN_LogOp : NN_UnaryOp<"log", "Natural logarithm">;
def NN_NegOp : NN_UnaryOp<"neg", "-x"> {
  // Integer shape arithmetic (an axis count negated) folds, as Add/Sub do.
  let hasFolder = 1;
}
def NN_AbsOp : NN_UnaryOp<"abs", "|x|"> {
  let hasFolder = 1;
}
def NN_ReciprocalOp : NN_UnaryOp<"reciprocal", "1 / x">;
def NN_NotOp : NN_UnaryOp<"not", "Logical not">;
def NN_FloorOp : NN_UnaryOp<"floor", "Floor">;
def NN_CeilOp : NN_UnaryOp<"ceil", "Ceiling">;
def NN_SoftplusOp : NN_UnaryOp<"softplus", "log(exp(x) + 1)">;
def NN_SinOp : NN_UnaryOp<"sin", "Sine">;
def NN_CosOp : NN_UnaryOp<"cos", "Cosine">;
def NN_TanOp : NN_UnaryOp<"tan", "Tangent">;
def NN_AsinOp : NN_UnaryOp<"asin", "Arcsine">;
def NN_AcosOp : NN_UnaryOp<"acos", "Arccosine">;
def NN_AtanOp : NN_UnaryOp<"atan", "Arctangent">;
def NN_SinhOp : NN_UnaryOp<"sinh", "Hyperbolic sine">;
def NN_CoshOp : NN_UnaryOp<"cosh", "Hyperbolic cosine">;
def NN_AsinhOp : NN_UnaryOp<"asinh", "Inverse hyperbolic sine">;
def NN_AcoshOp : NN_UnaryOp<"acosh", "Inverse hyperbolic cosine">;
def NN_AtanhOp : NN_UnaryOp<"atanh", "Inverse hyperbolic tangent">;
def NN_RoundOp : NN_UnaryOp<"round", "Rounding to the nearest integer, halves to even">;
def NN_SignOp : NN_UnaryOp<"sign", "-1, 0 or 1 as x is negative, zero or positive">;
def NN_IdentityOp : NN_UnaryOp<"identity", "The input, unchanged"> {
  let hasFolder = 1;
}

def NN_GeluOp : NN_UnaryOp<"gelu", "Gaussian error linear unit"> {
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
}
def NN_LeakyReluOp : NN_UnaryOp<"leaky_relu", "x if x >= 0 else alpha * x"> {
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.01">:$alpha);
}
def NN_HardSigmoidOp : NN_UnaryOp<"hard_sigmoid", "max(0, min(1, alpha * x + beta))"> {
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.2">:$alpha,
                       DefaultValuedAttr<F32Attr, "0.5">:$beta);
}
def NN_HardSwishOp : NN_UnaryOp<"hard_swish", "x * max(0, min(1, x / 6 + 1 / 2))">;

def NN_CastOp : NN_Op<"cast"> {
  let summary = "Element type conversion";
  let arguments = (ins AnyTensor:$input, TypeAttr:$to);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_ClipOp : NN_Op<"clip"> {
  let summary = "min(max(x, min), max); bounds are scalar tensors";
  let arguments = (ins AnyTensor:$input, AnyTensor:$min, AnyTensor:$max);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

class NN_BroadcastOp<string mnemonic, string summaryText, list<Trait> traits = []>
    : NN_Op<mnemonic, traits> {
  let summary = summaryText;
  let description = [{ Multidirectional (numpy) broadcasting of the operands. }];
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_AddOp : NN_BroadcastOp<"add", "lhs + rhs">;
def NN_SubOp : NN_BroadcastOp<"sub", "lhs - rhs">;
def NN_MulOp : NN_BroadcastOp<"mul", "lhs * rhs">;
def NN_DivOp : NN_BroadcastOp<"div", "lhs / rhs (integer division truncates)">;
def NN_PowOp : NN_BroadcastOp<"pow", "lhs ^ rhs">;
def NN_ModOp : NN_BroadcastOp<"mod", "lhs mod rhs"> {
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs,
                       DefaultValuedAttr<NN_I64Attr, "0">:$fmod);
}
def NN_EqualOp : NN_BroadcastOp<"equal", "lhs == rhs, as i1">;
def NN_LessOp : NN_BroadcastOp<"less", "lhs < rhs, as i1">;
def NN_LessOrEqualOp : NN_BroadcastOp<"less_or_equal", "lhs <= rhs, as i1">;
def NN_GreaterOp : NN_BroadcastOp<"greater", "lhs > rhs, as i1">;
def NN_GreaterOrEqualOp : NN_BroadcastOp<"greater_or_equal", "lhs >= rhs, as i1">;
def NN_AndOp : NN_BroadcastOp<"and", "Logical and">;
def NN_OrOp : NN_BroadcastOp<"or", "Logical or">;
def NN_MaxOp : NN_BroadcastOp<"max", "Element-wise maximum">;
def NN_MinOp : NN_BroadcastOp<"min", "Element-wise minimum">;

def NN_WhereOp : NN_Op<"where"> {
  let summary = "condition ? x : y, with broadcasting";
  let arguments = (ins AnyTensor:$condition, AnyTensor:$x, AnyTensor:$y);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra and convolution
//===----------------------------------------------------------------------===//

def NN_MatMulOp : NN_Op<"matmul"> {
  let summary = "numpy.matmul: batched matrix product with broadcast batch dims";
  let arguments = (ins AnyTensor:$lhs, AnyTensor:$rhs);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_GemmOp : NN_Op<"gemm"> {
  let summary = "alpha * op(A) * op(B) + beta * C on 2-D A and B";
  let arguments = (ins AnyTensor:$a, AnyTensor:$b, Optional<AnyTensor>:$c,
                       DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                       DefaultValuedAttr<F32Attr, "1.0">:$beta,
                       DefaultValuedAttr<NN_I64Attr, "0">:$transA,
                       DefaultValuedAttr<NN_I64Attr, "0">:$transB);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_ConvOp : NN_Op<"conv"> {
  let summary = "N-d convolution (cross-correlation) with groups";
  let arguments = (ins AnyTensor:$input, AnyTensor:$weight, Optional<AnyTensor>:$bias,
                       DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<NN_I64Attr, "1">:$group,
                       OptionalAttr<DenseI64ArrayAttr>:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def NN_MaxPoolOp : NN_Op<"max_pool"> {
  let summary = "Max pooling; the optional second result holds the indices";
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                       DefaultValuedAttr<NN_I64Attr, "0">:$ceil_mode,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       DefaultValuedAttr<NN_I64Attr, "0">:$storage_order,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$output, Optional<AnyTensor>:$indices);
  let hasVerifier = 1;
}

def NN_AveragePoolOp : NN_Op<"average_pool"> {
  let summary = "Average pooling";
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedStrAttr<StrAttr, "NOTSET">:$auto_pad,
                       DefaultValuedAttr<NN_I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<NN_I64Attr, "0">:$count_include_pad,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_GlobalAveragePoolOp : NN_Op<"global_average_pool"> {
  let summary = "Mean over all spatial dims, keeping them as size 1";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
}

def NN_GlobalMaxPoolOp : NN_Op<"global_max_pool"> {
  let summary = "Max over all spatial dims, keeping them as size 1";
  let arguments = (ins AnyTensor:$input);
  let results = (outs AnyTensor:$output);
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, dropout
//===----------------------------------------------------------------------===//

def NN_BatchNormOp : NN_Op<"batch_norm"> {
  let summary = "Batch normalisation; in training mode also the running statistics";
  let description = [{
    With `training_mode = 1` the op normalises with the batch statistics and
    has three results: Y, running_mean, running_var (ONNX opset 14+).
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, AnyTensor:$bias,
                       AnyTensor:$mean, AnyTensor:$var,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum,
                       DefaultValuedAttr<NN_I64Attr, "0">:$training_mode);
  let results = (outs AnyTensor:$output, Variadic<AnyTensor>:$running_stats);
  let hasVerifier = 1;
}

def NN_LayerNormOp : NN_Op<"layer_norm"> {
  let summary = "Layer normalisation over the dims from `axis` on";
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, Optional<AnyTensor>:$bias,
                       DefaultValuedAttr<NN_I64Attr, "-1">:$axis,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<NN_I64Attr, "1">:$stash_type);
  let results = (outs AnyTensor:$output, Variadic<AnyTensor>:$statistics);
  let hasVerifier = 1;
}

def NN_SoftmaxOp : NN_Op<"softmax"> {
  let summary = "Softmax along one axis (ONNX opset 13 semantics)";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<NN_I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_LogSoftmaxOp : NN_Op<"log_softmax"> {
  let summary = "Log of softmax along one axis (ONNX opset 13 semantics)";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<NN_I64Attr, "-1">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_DropoutOp : NN_Op<"dropout"> {
  let summary = "Dropout; inactive unless training_mode is true and ratio > 0";
  let arguments = (ins AnyTensor:$input, AnyTensor:$ratio, AnyTensor:$training_mode,
                       OptionalAttr<NN_I64Attr>:$seed);
  let results = (outs AnyTensor:$output, Optional<AnyTensor>:$mask);
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

class NN_ReduceOp<string mnemonic, string summaryText> : NN_Op<mnemonic> {
  let summary = summaryText;
  let description = [{
    Reduces over the dims listed in the optional `axes` operand (ONNX opset 18
    form; older attribute forms are normalised by the importer). No axes means
    every dim, unless `noop_with_empty_axes` is set.
  }];
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$axes,
                       DefaultValuedAttr<NN_I64Attr, "1">:$keepdims,
                       DefaultValuedAttr<NN_I64Attr, "0">:$noop_with_empty_axes);
  let results = (outs AnyTensor:$output);
}

def NN_ReduceMeanOp : NN_ReduceOp<"reduce_mean", "Mean over axes">;
def NN_ReduceSumOp : NN_ReduceOp<"reduce_sum", "Sum over axes">;
def NN_ReduceMaxOp : NN_ReduceOp<"reduce_max", "Maximum over axes">;
def NN_ReduceMinOp : NN_ReduceOp<"reduce_min", "Minimum over axes">;
def NN_ReduceProdOp : NN_ReduceOp<"reduce_prod", "Product over axes">;

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

def NN_ShapeOp : NN_Op<"shape"> {
  let summary = "The shape of the input (dims start..end) as a 1-D i64 tensor";
  let arguments = (ins AnyTensor:$input,
                       DefaultValuedAttr<NN_I64Attr, "0">:$start,
                       OptionalAttr<NN_I64Attr>:$end);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_ReshapeOp : NN_Op<"reshape"> {
  let summary = "Reshape; 0 copies a dim (unless allowzero), -1 is inferred";
  let arguments = (ins AnyTensor:$input, AnyTensor:$shape,
                       DefaultValuedAttr<NN_I64Attr, "0">:$allowzero);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_FlattenOp : NN_Op<"flatten"> {
  let summary = "Reshape to 2-D: dims before `axis` and from `axis` on";
  let arguments = (ins AnyTensor:$input, DefaultValuedAttr<NN_I64Attr, "1">:$axis);
  let results = (outs AnyTensor:$output);
}

def NN_SqueezeOp : NN_Op<"squeeze"> {
  let summary = "Remove size-1 dims (the listed ones, or all)";
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_UnsqueezeOp : NN_Op<"unsqueeze"> {
  let summary = "Insert size-1 dims at the listed output positions";
  let arguments = (ins AnyTensor:$input, AnyTensor:$axes);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_TransposeOp : NN_Op<"transpose"> {
  let summary = "Permute dims (reverse them when perm is absent)";
  let arguments = (ins AnyTensor:$input, OptionalAttr<DenseI64ArrayAttr>:$perm);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_ConcatOp : NN_Op<"concat"> {
  let summary = "Concatenate along `axis`";
  let arguments = (ins Variadic<AnyTensor>:$inputs, NN_I64Attr:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_SplitOp : NN_Op<"split"> {
  let summary = "Split along `axis` into the given sizes, or equal parts";
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$split,
                       DefaultValuedAttr<NN_I64Attr, "0">:$axis);
  let results = (outs Variadic<AnyTensor>:$outputs);
  let hasVerifier = 1;
}

def NN_SliceOp : NN_Op<"slice"> {
  let summary = "Strided slice along the listed axes (ONNX Slice-13)";
  let arguments = (ins AnyTensor:$input, AnyTensor:$starts, AnyTensor:$ends,
                       AnyTensor:$axes, AnyTensor:$steps);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_GatherOp : NN_Op<"gather"> {
  let summary = "Take entries along `axis` at the given indices";
  let arguments = (ins AnyTensor:$input, AnyTensor:$indices,
                       DefaultValuedAttr<NN_I64Attr, "0">:$axis);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
  let hasFolder = 1;
}

def NN_ExpandOp : NN_Op<"expand"> {
  let summary = "Broadcast the input to a shape";
  let arguments = (ins AnyTensor:$input, AnyTensor:$shape);
  let results = (outs AnyTensor:$output);
  let hasFolder = 1;
}

def NN_TileOp : NN_Op<"tile"> {
  let summary = "Repeat the input along each dim";
  let arguments = (ins AnyTensor:$input, AnyTensor:$repeats);
  let results = (outs AnyTensor:$output);
}

def NN_PadOp : NN_Op<"pad"> {
  let summary = "Pad the listed axes (constant, reflect, edge or wrap)";
  let arguments = (ins AnyTensor:$input, AnyTensor:$pads, AnyTensor:$constant_value,
                       AnyTensor:$axes,
                       DefaultValuedStrAttr<StrAttr, "constant">:$mode);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_TriluOp : NN_Op<"trilu"> {
  let summary = "Keep the upper (upper = 1) or lower triangle, shifted by k";
  let arguments = (ins AnyTensor:$input, Optional<AnyTensor>:$k,
                       DefaultValuedAttr<NN_I64Attr, "1">:$upper);
  let results = (outs AnyTensor:$output);
}

//===----------------------------------------------------------------------===//
// Recurrent layers: one op each in the IR, their unrolled cells everywhere else
//===----------------------------------------------------------------------===//

// ONNX's LSTM, GRU and RNN. `sequence_lens` is an attribute here (ONNX's
// optional input, which must be a constant): a batch entry's state stops at
// its length and its outputs past it are zero. The cost model, the gradient
// and the kernels are those of the unrolled cells: nn-expand-composites
// writes them (lib/Dialect/NN/Transforms/ExpandComposites.cpp), and the
// partitioner costs the op as that formula, one layer per op.
class NN_RecurrentOp<string mnemonic, string summaryText, dag extraOperands,
                     dag extraAttrs, dag outs, string extraFormat>
    : NN_Op<mnemonic, [AttrSizedOperandSegments]> {
  let summary = summaryText;
  let arguments = !con(
      (ins AnyTensor:$x, AnyTensor:$w, AnyTensor:$r, Optional<AnyTensor>:$b,
           Optional<AnyTensor>:$initial_h),
      extraOperands,
      (ins NN_I64Attr:$hidden_size,
           DefaultValuedStrAttr<StrAttr, "forward">:$direction,
           DefaultValuedAttr<NN_I64Attr, "0">:$layout,
           OptionalAttr<StrArrayAttr>:$activations,
           OptionalAttr<DenseF32ArrayAttr>:$activation_alpha,
           OptionalAttr<DenseF32ArrayAttr>:$activation_beta,
           OptionalAttr<F32Attr>:$clip,
           OptionalAttr<DenseI64ArrayAttr>:$sequence_lens),
      extraAttrs);
  let results = outs;
  let assemblyFormat = "$x `,` $w `,` $r (`bias` `(` $b^ `)`)? "
                       "(`initial_h` `(` $initial_h^ `)`)? " # extraFormat #
                       "attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def NN_LstmOp : NN_RecurrentOp<"lstm",
    "ONNX LSTM: gates i, o, f, c; optional peepholes and coupled input-forget gate",
    (ins Optional<AnyTensor>:$initial_c, Optional<AnyTensor>:$p),
    (ins DefaultValuedAttr<NN_I64Attr, "0">:$input_forget),
    (outs AnyTensor:$y, AnyTensor:$y_h, AnyTensor:$y_c),
    "(`initial_c` `(` $initial_c^ `)`)? (`peepholes` `(` $p^ `)`)? ">;

def NN_GruOp : NN_RecurrentOp<"gru",
    "ONNX GRU: gates z, r, h; linear_before_reset applies the reset after H R^T",
    (ins), (ins DefaultValuedAttr<NN_I64Attr, "0">:$linear_before_reset),
    (outs AnyTensor:$y, AnyTensor:$y_h), "">;

def NN_RnnOp : NN_RecurrentOp<"rnn", "ONNX RNN: H = f(X W^T + H R^T + Wb + Rb)",
    (ins), (ins), (outs AnyTensor:$y, AnyTensor:$y_h), "">;

include "pipe/Dialect/NN/IR/NNGradOps.td"

#endif // PIPE_NN_OPS
