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

#include "partitioner/Planner.h"
#include "partitioner/Problem.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;

LogicalResult pipe::driver::checkMainJobOptions(const MainJobOptions &options,
                                                std::string &error) {
  const pipeline::PipePlanPipelineOptions &partition = options.plan;
  auto refuse = [&](const std::string &message) {
    error = message;
    return failure();
  };
  auto text = [](auto value) {
    std::string printed;
    llvm::raw_string_ostream(printed) << value;
    return printed;
  };
  if (partition.gpus < 0 || partition.gpus > partitioner::kMaxGpus)
    return refuse("--gpus must be in 0.." + text(partitioner::kMaxGpus) +
                  " (0: one pipeline on --pipeline-stages), got " + text(partition.gpus));
  // With --gpus, no --pipeline-stages (0) lets the planner choose.
  if (partition.stages < (partition.gpus > 0 ? 0 : 1))
    return refuse("--pipeline-stages is the number of GPUs, at least 1; got " +
                  text(partition.stages));
  if (partition.stages > partitioner::kMaxGpus)
    return refuse("--pipeline-stages must be at most " + text(partitioner::kMaxGpus) +
                  ", got " + text(partition.stages));
  if (partition.microbatches < 1 || partition.microbatches > partitioner::kMaxMicrobatches)
    return refuse("--microbatches must be in 1.." +
                  std::to_string(partitioner::kMaxMicrobatches) + ", got " +
                  std::to_string(partition.microbatches));
  if (partition.gpus > 0 && partition.stages > 0) {
    if (partition.gpus % partition.stages != 0)
      return refuse("--gpus=" + text(partition.gpus) + " is not a whole number of replicas of " +
                    "--pipeline-stages=" + text(partition.stages) + " GPUs");
    const int replicas = partition.gpus / partition.stages;
    if (partition.microbatches % replicas != 0)
      return refuse("--microbatches (" + text(partition.microbatches) +
                    ", the step's) must split evenly over the " + text(replicas) +
                    " replicas (--gpus=" + text(partition.gpus) + " / --pipeline-stages=" +
                    text(partition.stages) + ")");
  }
  if (partition.replicaLayout != "auto" && partition.replicaLayout != "pipeline-major" &&
      partition.replicaLayout != "stage-major")
    return refuse("--replica-layout must be auto, pipeline-major or stage-major, got '" +
                  partition.replicaLayout + "'");
  if (partition.replicaLayout != "auto" && partition.gpus == 0)
    return refuse("--replica-layout applies with --gpus (or --replicas)");
  if (partition.gpus > 0 && partition.objective == "period")
    return refuse("--objective=period does not apply with --gpus: replicas are planned for "
                  "the iteration time, the step's");
  if (partition.microBatchSize < 0)
    return refuse("--micro-batch-size must be at least 1, got " +
                  std::to_string(partition.microBatchSize));
  // NaN fails every comparison; infinity is no limit a solver can take.
  if (!(partition.timeLimit > 0 && partition.timeLimit <= 86400))
    return refuse("--time-limit must be a number of seconds in (0, 86400], got " +
                  text(partition.timeLimit));
  if (!(partition.generalBound >= 0 && partition.generalBound <= 86400))
    return refuse("--general-bound must be a number of seconds in [0, 86400], got " +
                  llvm::formatv("{0}", partition.generalBound).str());
  if (auto target = pipe::lookupTarget(partition.target); !target)
    return refuse("--target: " + llvm::toString(target.takeError()));
  if (!pipe::parseComputeDtype(partition.dtype))
    return refuse("--dtype: unknown dtype '" + partition.dtype + "' (fp32, tf32, fp16, bf16, fp8)");
  if (!pipe::parseOptimizerKind(partition.optimizer))
    return refuse("--optimizer: unknown optimizer '" + partition.optimizer +
                  "' (sgd, momentum, adam, adamw)");
  if (!partition.memory.empty())
    if (auto memory = partitioner::parseMemorySize(partition.memory); !memory)
      return refuse("--memory: " + memory.error());
  if (!partition.schedule.empty())
    if (auto schedule = partitioner::parseScheduleKind(partition.schedule); !schedule)
      return refuse("--schedule: " + schedule.error());
  if (auto objective = partitioner::parseObjective(partition.objective); !objective)
    return refuse("--objective: " + objective.error());
  if (auto recompute = partitioner::parseRecomputePolicy(partition.recompute); !recompute)
    return refuse("--recompute: " + recompute.error());
  const std::vector<partitioner::AlgorithmInfo> algorithms = partitioner::listAlgorithms();
  if (partition.algo != "best" &&
      llvm::none_of(algorithms, [&](const auto &a) { return a.name == partition.algo; })) {
    std::string known;
    for (const partitioner::AlgorithmInfo &algorithm : algorithms)
      known += (known.empty() ? "" : ", ") + algorithm.name;
    return refuse("--algo: unknown algorithm '" + partition.algo + "' (known: " + known +
                  ", best)");
  }
  if (!partition.train)
    return success();
  const pipeline::PipePlanPipelineOptions &training = partition;
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
