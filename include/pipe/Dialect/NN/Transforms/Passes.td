//===- Passes.td - nn dialect passes -----------------------*- tablegen -*-===//
#ifndef PIPE_NN_PASSES
#define PIPE_NN_PASSES

include "mlir/Pass/PassBase.td"

def NNShapeInference : Pass<"nn-shape-inference", "::mlir::func::FuncOp"> {
  let summary = "Infer static shapes, folding shape arithmetic on the way";
  let description = [{
    Walks the function in order. Each nn op is first folded when its operands
    are constants (Shape, Gather, Concat, Range, integer math, ...), then its
    result types are recomputed from its operands. Finally the function's
    result types are updated. With `require-static` (the default), a result
    whose shape stays unknown is an error on the first op that could not be
    resolved, naming the operand that is not a compile-time constant.
  }];
  let options = [
    Option<"requireStatic", "require-static", "bool", /*default=*/"true",
           "Fail when a result shape is still not static">,
  ];
  let dependentDialects = ["::pipe::nn::NNDialect"];
}

def NNExpandComposites : Pass<"nn-expand-composites"> {
  let summary = "Replace nn.lstm, nn.gru and nn.rnn by their unrolled cells";
  let description = [{
    A recurrent layer is one op in the IR the importer writes and in the
    partitioner's chain (one layer, costed as its cells); its gradient and
    its kernels are those of its cells, one per step and direction. This
    pass writes the cells (matmuls, slices, activations; masks for
    sequence_lens) in place of each op. The planning pipeline runs it after
    pipe-split-stages.
  }];
  let dependentDialects = ["::pipe::nn::NNDialect"];
}

#endif // PIPE_NN_PASSES
