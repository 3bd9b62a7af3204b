//===- CostInterface.td - per-op cost and gradient rule ----*- tablegen -*-===//
//
// One interface per op for what the cost model counts and what the autodiff
// keeps: the saved-for-backward values written here are the gradient rule's
// saved values, so the memory the cost model predicts is the memory the
// generated backward uses.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_COSTINTERFACE
#define PIPE_ANALYSIS_COSTINTERFACE

include "mlir/IR/OpBase.td"

def Pipe_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::pipe";
  let description = [{
    The cost of an op on statically shaped operands: FLOPs and DRAM bytes of
    its forward and backward kernels and its kernel class, and the values its
    backward needs (its gradient rule's saved values). Both depend on which
    operands need a gradient: a frozen weight gets no weight gradient, and an
    operand that needs none is not kept for the other's gradient.
  }];
  let methods = [
    InterfaceMethod<"The op's kernel class (`Free` for views and constants).",
      "::pipe::KernelClass", "getKernelClass", (ins)>,
    InterfaceMethod<[{
        False for ops whose result carries no gradient to the operands
        (comparisons, floor, logical ops, casts to integers).
      }], "bool", "isDifferentiable", (ins)>,
    InterfaceMethod<"FLOPs and bytes of the forward and backward kernels.",
      "::pipe::OpCost", "computeCost", (ins "const ::pipe::CostQuery &":$query)>,
    InterfaceMethod<[{
        The values the backward keeps from the forward. Nothing is kept when
        no operand needs a gradient.
      }],
      "::pipe::SavedForBackward", "getSavedForBackward",
      (ins "const ::pipe::CostQuery &":$query)>,
  ];
}

#endif // PIPE_ANALYSIS_COSTINTERFACE
