//===- NNGradOps.td - training forms and gradient ops ------*- tablegen -*-===//
//
// Ops that pipe-differentiate emits and no ONNX model contains: the training
// forms of ops whose backward needs a value the inference form does not
// produce (batch statistics), the gradients that cannot be written with
// forward ops (convolution, pooling, normalisation, softmax, scatter-add),
// and the softmax cross-entropy loss. Shapes that the operands do not
// determine (the input of a convolution's gradient) are attributes.
// Constraints are numbered in docs/nn-dialect.md.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_NN_GRAD_OPS
#define PIPE_NN_GRAD_OPS

include "mlir/IR/EnumAttr.td"
include "mlir/IR/AttrTypeBase.td"

//===----------------------------------------------------------------------===//
// The derivative of a unary element-wise op
//===----------------------------------------------------------------------===//

def NN_UnaryFunction : I32EnumAttr<"UnaryFunction", "a unary element-wise function", [
    I32EnumAttrCase<"relu", 0>, I32EnumAttrCase<"erf", 1>, I32EnumAttrCase<"tanh", 2>,
    I32EnumAttrCase<"sigmoid", 3>, I32EnumAttrCase<"sqrt", 4>, I32EnumAttrCase<"exp", 5>,
    I32EnumAttrCase<"log", 6>, I32EnumAttrCase<"abs", 7>, I32EnumAttrCase<"reciprocal", 8>,
    I32EnumAttrCase<"softplus", 9>, I32EnumAttrCase<"gelu", 10>,
    I32EnumAttrCase<"gelu_tanh", 11>, I32EnumAttrCase<"leaky_relu", 12>,
    I32EnumAttrCase<"hard_sigmoid", 13>, I32EnumAttrCase<"hard_swish", 14>,
    I32EnumAttrCase<"clip", 15>, I32EnumAttrCase<"sin", 16>, I32EnumAttrCase<"cos", 17>,
    I32EnumAttrCase<"tan", 18>, I32EnumAttrCase<"asin", 19>, I32EnumAttrCase<"acos", 20>, I32EnumAttrCase<"atan", 21>, I32EnumAttrCase<"sinh", 22>, I32EnumAttrCase<"cosh", 23>, I32EnumAttrCase<"asinh", 24>, I32EnumAttrCase<"acosh", 25>, I32EnumAttrCase<"atanh", 26>]> {
  let cppNamespace = "::pipe::nn";
  let genSpecializedAttr = 0;
}

def NN_UnaryFunctionAttr : EnumAttr<NN_Dialect, NN_UnaryFunction, "unary_function"> {
  let assemblyFormat = "`<` $value `>`";
}

def NN_UnaryGradOp : NN_Op<"unary_grad"> {
  let summary = "dx = f'(saved) * dy for a unary element-wise function f";
  let description = [{
    `saved` is the value the forward kept, as the memory model charges it: the
    output y for relu, tanh, sigmoid, sqrt, exp and reciprocal; the input x
    for the others. `alpha` and `beta` are the function's parameters
    (leaky_relu's slope, hard_sigmoid's alpha and beta, clip's bounds).
  }];
  let arguments = (ins AnyTensor:$saved, AnyTensor:$grad, NN_UnaryFunctionAttr:$function,
                       DefaultValuedAttr<F64Attr, "0.0">:$alpha,
                       DefaultValuedAttr<F64Attr, "0.0">:$beta);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling gradients
//===----------------------------------------------------------------------===//

def NN_ConvGradInputOp : NN_Op<"conv_grad_input"> {
  let summary = "The gradient of a convolution with respect to its input";
  let description = [{
    `pads` are explicit ([begin..., end...]); `input_shape` is the forward
    input's shape.
  }];
  let arguments = (ins AnyTensor:$grad, AnyTensor:$weight, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       NN_I64Attr:$group, DenseI64ArrayAttr:$input_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_ConvGradWeightOp : NN_Op<"conv_grad_weight"> {
  let summary = "The gradient of a convolution with respect to its weight";
  let arguments = (ins AnyTensor:$input, AnyTensor:$grad, DenseI64ArrayAttr:$strides,
                       DenseI64ArrayAttr:$pads, DenseI64ArrayAttr:$dilations,
                       NN_I64Attr:$group, DenseI64ArrayAttr:$weight_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_MaxPoolGradOp : NN_Op<"max_pool_grad"> {
  let summary = "Scatter-add of dy at the forward's argmax indices";
  let arguments = (ins AnyTensor:$grad, AnyTensor:$indices,
                       DenseI64ArrayAttr:$input_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_AveragePoolGradOp : NN_Op<"average_pool_grad"> {
  let summary = "dy spread evenly over each pooling window";
  let arguments = (ins AnyTensor:$grad, DenseI64ArrayAttr:$kernel_shape,
                       DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$pads,
                       NN_I64Attr:$count_include_pad, DenseI64ArrayAttr:$input_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def NN_BatchNormTrainOp : NN_Op<"batch_norm_train"> {
  let summary = "Batch norm with batch statistics, returning what its gradient needs";
  let description = [{
    Normalises over every dim but 1 with the batch mean and biased variance;
    `saved_mean` and `saved_invstd` (1 / sqrt(var + epsilon), f32, one per
    channel) are kept for `nn.batch_norm_grad`. The running statistics
    operands are updated in place by the runtime (momentum as in ONNX);
    momentum 1 keeps them exactly, as a recomputing stage's backward does
    when it runs the op again.
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, AnyTensor:$bias,
                       AnyTensor:$running_mean, AnyTensor:$running_var,
                       DefaultValuedAttr<F32Attr, "1.0e-5">:$epsilon,
                       DefaultValuedAttr<F32Attr, "0.9">:$momentum);
  let results = (outs AnyTensor:$output, AnyTensor:$saved_mean, AnyTensor:$saved_invstd);
  let hasVerifier = 1;
}

def NN_BatchNormGradOp : NN_Op<"batch_norm_grad"> {
  let summary = "Gradients of a training batch norm: dx, dscale, dbias";
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, AnyTensor:$saved_mean,
                       AnyTensor:$saved_invstd, AnyTensor:$grad);
  let results = (outs AnyTensor:$input_grad, AnyTensor:$scale_grad, AnyTensor:$bias_grad);
}

def NN_LayerNormGradOp : NN_Op<"layer_norm_grad"> {
  let summary = "Gradients of a layer norm: dx, dscale, dbias";
  let description = [{
    `mean` and `invstd` are the forward's statistics results (ONNX Mean and
    InvStdDev); `axis` is the forward's, normalised.
  }];
  let arguments = (ins AnyTensor:$input, AnyTensor:$scale, AnyTensor:$mean,
                       AnyTensor:$invstd, AnyTensor:$grad, NN_I64Attr:$axis);
  let results = (outs AnyTensor:$input_grad, AnyTensor:$scale_grad, AnyTensor:$bias_grad);
  let hasVerifier = 1;
}

def NN_SoftmaxGradOp : NN_Op<"softmax_grad"> {
  let summary = "dx = y * (dy - sum(dy * y)) along axis";
  let arguments = (ins AnyTensor:$output, AnyTensor:$grad, NN_I64Attr:$axis);
  let results = (outs AnyTensor:$input_grad);
  let hasVerifier = 1;
}

def NN_LogSoftmaxGradOp : NN_Op<"log_softmax_grad"> {
  let summary = "dx = dy - exp(y) * sum(dy) along axis";
  let arguments = (ins AnyTensor:$output, AnyTensor:$grad, NN_I64Attr:$axis);
  let results = (outs AnyTensor:$input_grad);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement gradients
//===----------------------------------------------------------------------===//

def NN_GatherGradOp : NN_Op<"gather_grad"> {
  let summary = "Scatter-add of dy into zeros of the gathered tensor's shape";
  let arguments = (ins AnyTensor:$grad, AnyTensor:$indices, NN_I64Attr:$axis,
                       DenseI64ArrayAttr:$input_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

def NN_SliceGradOp : NN_Op<"slice_grad"> {
  let summary = "dy written into zeros of the sliced tensor's shape";
  let description = [{
    `starts` and `steps` have one entry per dim (normalised: starts within
    the dim, steps non-zero): element i of dy goes to starts + i * steps.
  }];
  let arguments = (ins AnyTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$steps, DenseI64ArrayAttr:$input_shape);
  let results = (outs AnyTensor:$output);
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The training loss
//===----------------------------------------------------------------------===//

def NN_SoftmaxCrossEntropyLossOp : NN_Op<"softmax_cross_entropy_loss"> {
  let summary = "Mean softmax cross entropy (ONNX SoftmaxCrossEntropyLoss, mean)";
  let description = [{
    Logits [N, C, d...] with the classes on dim 1, integer labels [N, d...].
    Labels equal to `ignore_index` count for nothing. The loss is a scalar;
    `log_prob` (the logits' shape) is what the gradient reads.
  }];
  let arguments = (ins AnyTensor:$logits, AnyTensor:$labels,
                       OptionalAttr<NN_I64Attr>:$ignore_index);
  let results = (outs AnyTensor:$loss, AnyTensor:$log_prob);
  let hasVerifier = 1;
}

def NN_SoftmaxCrossEntropyLossGradOp : NN_Op<"softmax_cross_entropy_loss_grad"> {
  let summary = "dlogits = dloss * (softmax - onehot(labels)) / count";
  let arguments = (ins AnyTensor:$grad, AnyTensor:$log_prob, AnyTensor:$labels,
                       OptionalAttr<NN_I64Attr>:$ignore_index);
  let results = (outs AnyTensor:$logits_grad);
}

#endif // PIPE_NN_GRAD_OPS
