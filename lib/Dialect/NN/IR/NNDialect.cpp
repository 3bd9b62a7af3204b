//===- NNDialect.cpp - the nn dialect -------------------------------------===//
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/IR/NNOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace pipe::nn;

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include "pipe/Dialect/NN/IR/NNOpsDialect.cpp.inc"
#include "pipe/Dialect/NN/IR/NNEnums.cpp.inc"
#define GET_ATTRDEF_CLASSES
#include "pipe/Dialect/NN/IR/NNAttrs.cpp.inc"

void NNDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "pipe/Dialect/NN/IR/NNAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "pipe/Dialect/NN/IR/NNOps.cpp.inc"
      >();
}

Operation *NNDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                          Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}
