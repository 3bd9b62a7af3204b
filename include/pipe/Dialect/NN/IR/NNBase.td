//===- NNBase.td - the nn dialect definition ---------------*- tablegen -*-===//
//
// The `nn` dialect: tensor-level graph ops imported from ONNX, one op per
// supported ONNX op kind, normalised across opset versions by the importer.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_NN_BASE
#define PIPE_NN_BASE

include "mlir/IR/OpBase.td"

def NN_Dialect : Dialect {
  let name = "nn";
  let cppNamespace = "::pipe::nn";
  let summary = "Tensor-level neural-network graph ops imported from ONNX";
  let description = [{
    One op per ONNX op kind that real models use. Operands and results are
    builtin tensors; before shape inference they may be unranked. Inherent
    attributes keep their ONNX names. Weights never enter the IR: `nn.param`
    refers to the bytes of an initializer in the model file or its external
    data file.
  }];
  let hasConstantMaterializer = 1;
  let usePropertiesForAttributes = 1;
  let useDefaultAttributePrinterParser = 1;
  // The ONNX file a module was imported from (absolute), on the module: where
  // the parameters with source `file` or `external` are read from, so that
  // the main job on the printed module writes the same programs.
  let discardableAttrs = (ins "::mlir::StringAttr":$model_file);
}

#endif // PIPE_NN_BASE
