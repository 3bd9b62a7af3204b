//===- CostInterface.h - per-op cost and gradient rule ----------*- C++ -*-===//
//
// The CostOpInterface and the function that attaches it to every nn op.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_COSTINTERFACE_H
#define PIPE_ANALYSIS_COSTINTERFACE_H

#include "pipe/Analysis/OpCost.h"

#include "mlir/IR/OpDefinition.h"

namespace mlir {
class DialectRegistry;
} // namespace mlir

#include "pipe/Analysis/CostInterface.h.inc"

namespace pipe {
/// Attaches CostOpInterface to every op of the nn dialect (external models).
void registerCostModelInterfaces(mlir::DialectRegistry &registry);
} // namespace pipe

#endif // PIPE_ANALYSIS_COSTINTERFACE_H
