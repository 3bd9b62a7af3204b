//===- PipeOptPlugin.cpp - pipe-opt's dialects and passes as an mlir-opt plugin ===//
//
// One shared library that upstream's mlir-opt loads twice:
//   mlir-opt --load-dialect-plugin=pipe-opt-plugin.so \
//            --load-pass-plugin=pipe-opt-plugin.so MODEL.mlir \
//            --pass-pipeline='builtin.module(pipe-partition{stages=4},pipe-split-stages,pipe-schedule)'
// The dialect entry point registers the nn and pipe dialects and their
// interfaces (so that the input parses); the pass entry point every pass.
//
//===----------------------------------------------------------------------===//
#include "pipe/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/Plugins/DialectPlugin.h"
#include "mlir/Tools/Plugins/PassPlugin.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/Compiler.h"

extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::DialectPluginLibraryInfo mlirGetDialectPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PipeOpt", LLVM_VERSION_STRING,
          [](mlir::DialectRegistry *registry) { pipe::registerAllDialects(*registry); }};
}

extern "C" LLVM_ATTRIBUTE_WEAK ::mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "PipeOpt", LLVM_VERSION_STRING,
          [] { pipe::registerAllPasses(); }};
}
