//===- downstream-opt.cpp - mlir-opt with pipe-opt's dialects and passes ---===//
//
// What another compiler does to use pipe-opt: one call registers the nn and
// pipe dialects and every pipe-opt pass next to its own, then MlirOptMain.
//
//===----------------------------------------------------------------------===//
#include "pipe/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  mlir::registerAllPasses();
  pipe::registerAllDialectsAndPasses(registry);
  return mlir::asMainReturnCode(mlir::MlirOptMain(
      argc, argv, "downstream-opt: mlir-opt with pipe-opt's dialects and passes\n", registry));
}
