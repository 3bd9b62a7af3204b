//===- Passes.h - conversions out of the pipe dialect -----------*- C++ -*-===//
#ifndef PIPE_CONVERSION_PASSES_H
#define PIPE_CONVERSION_PASSES_H

#include "pipe/Conversion/PipeToEmitC/PipeToEmitC.h"

#include "mlir/Pass/Pass.h"

namespace pipe {

#define GEN_PASS_DECL
#include "pipe/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "pipe/Conversion/Passes.h.inc"

} // namespace pipe

#endif // PIPE_CONVERSION_PASSES_H
