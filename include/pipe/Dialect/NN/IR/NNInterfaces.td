//===- NNInterfaces.td - interfaces of nn ops --------------*- tablegen -*-===//
#ifndef PIPE_NN_INTERFACES
#define PIPE_NN_INTERFACES

include "mlir/IR/OpBase.td"

def NN_ShapeInferenceOpInterface : OpInterface<"ShapeInferenceOpInterface"> {
  let cppNamespace = "::pipe::nn";
  let description = [{
    Computes the result types of an op from its operand types and the values
    of its constant operands (a Reshape's target shape, a Slice's bounds).
    A result whose shape cannot be known yet (an operand is unranked, or a
    shape operand is not constant) is returned unranked. Incompatible
    operands are an error reported on the op.
  }];
  let methods = [
    InterfaceMethod<"Computes the result types into `types`.",
      "::mlir::LogicalResult", "inferResultTypes",
      (ins "::llvm::SmallVectorImpl<::mlir::Type> &":$types)>,
  ];
  // nn_c1: the results agree with what the op's shape rules infer.
  let verify = [{ return ::pipe::nn::verifyInferredTypes($_op); }];
}

def NN_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::pipe::nn";
  let description = [{
    The op's gradient rule: given the gradients of its results, emits the
    ops computing its operands' gradients into a backward program. The
    forward values it reads through the emitter are exactly the values the
    memory model charges as saved for backward (the cost interface's
    getSavedForBackward); test-check-saved-values compares the two.
  }];
  let methods = [
    InterfaceMethod<"Emits the gradients of the op's operands.",
      "::mlir::LogicalResult", "emitGradient",
      (ins "::pipe::nn::GradientEmitter &":$emitter)>,
  ];
}

#endif // PIPE_NN_INTERFACES
