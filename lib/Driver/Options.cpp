//===- Options.cpp - the main job's options, checked before any import -----===//
//
// Every option value the main job takes is checked here with the same parsers
// the passes use, before the model is read, so a mistyped option is a usage
// error (pipe-opt exits 2) and never a failure halfway through a long job.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"

#include "pipe/Analysis/MemoryModel.h"
#include "pipe/Analysis/Target.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "partitioner/Algorithm.h"
#include "partitioner/Error.h"
#include "partitioner/Planner.h"
#include "partitioner/Problem.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include <cmath>

using namespace mlir;

LogicalResult pipe::driver::checkMainJobOptions(const MainJobOptions &options,
                                                std::string &error) {
  const pipeline::PartitionOptions &partition = options.partition;
  auto refuse = [&](const std::string &message) {
    error = message;
    return failure();
  };
  if (auto target = pipe::lookupTarget(partition.target); !target)
    return refuse("--target: " + llvm::toString(target.takeError()));
  if (!pipe::parseComputeDtype(partition.dtype))
    return refuse("--dtype: unknown dtype '" + partition.dtype + "' (fp32, tf32, fp16, bf16, fp8)");
  if (!pipe::parseOptimizerKind(partition.optimizer))
    return refuse("--optimizer: unknown optimizer '" + partition.optimizer +
                  "' (sgd, momentum, adam, adamw)");
  try {
    if (!partition.memory.empty())
      (void)partitioner::parseMemorySize(partition.memory);
  } catch (const partitioner::Error &e) {
    return refuse(std::string("--memory: ") + e.what());
  }
  try {
    if (!partition.schedule.empty())
      (void)partitioner::parseScheduleKind(partition.schedule);
  } catch (const partitioner::Error &e) {
    return refuse(std::string("--schedule: ") + e.what());
  }
  try {
    (void)partitioner::parseObjective(partition.objective);
  } catch (const partitioner::Error &e) {
    return refuse(std::string("--objective: ") + e.what());
  }
  if (partition.algorithm != "best" && !partitioner::findAlgorithm(partition.algorithm)) {
    std::string known;
    for (const auto &algorithm : partitioner::algorithmRegistry())
      known += (known.empty() ? "" : ", ") + algorithm->name();
    return refuse("--algo: unknown algorithm '" + partition.algorithm + "' (known: " + known +
                  ", best)");
  }
  if (!options.training.codegen)
    return success();
  const TrainingOptions &training = options.training;
  for (auto [name, value] : {std::pair<const char *, double>{"--lr", training.lr},
                             {"--momentum", training.momentum},
                             {"--beta1", training.beta1},
                             {"--beta2", training.beta2},
                             {"--eps", training.eps},
                             {"--weight-decay", training.weightDecay}})
    if (!std::isfinite(value) || value < 0)
      return refuse(std::string(name) + " must be finite and non-negative, got " +
                    std::to_string(value));
  // The loss's parser reports through a diagnostic: give it an empty module.
  MLIRContext context;
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    message = diag.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  if (failed(pipeline::parseLossKind(*module, training.loss)))
    return refuse("--loss: " + message);
  return success();
}
