//===- InitAll.cpp - register pipe-opt's dialects and passes --------------===//
//
// The body of registerAllDialectsAndPasses: kept out of the header so that a
// tool that calls it compiles none of the dialect or pass headers.
//
//===----------------------------------------------------------------------===//
#include "pipe/InitAll.h"

#include "pipe/Analysis/CostInterface.h"
#include "pipe/Conversion/Passes.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/Transforms/Gradients.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"

void pipe::registerAllDialects(mlir::DialectRegistry &registry) {
  // The importer builds nn ops inside func.func, and every pass walks them.
  registry.insert<mlir::func::FuncDialect, nn::NNDialect, pipeline::PipeDialect>();
  registerCostModelInterfaces(registry);
  nn::registerGradientInterfaces(registry);
}

void pipe::registerAllPasses() {
  nn::registerNNPasses();
  pipeline::registerPipePasses();
  registerConversionPasses();
}

void pipe::registerAllDialectsAndPasses(mlir::DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllPasses();
}
