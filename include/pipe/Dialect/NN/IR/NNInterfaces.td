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

#endif // PIPE_NN_INTERFACES
