//===- PlanPipeline.cpp - pipe-plan-pipeline: the planning pipeline -------===//
//
// One pipeline, three ways in: the pipe-plan-pipeline pass (by name, in
// --pass-pipeline), buildPlanPipeline (C++, what the main job runs with its
// hooks), and the main job's command line, whose planning options are
// pipe-plan-pipeline's (parsePlanOptions). The options themselves are declared once,
// in Passes.td.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

#include <cstdio>

namespace pipe::pipeline {
#define GEN_PASS_DEF_PIPEPLANPIPELINE
#include "pipe/Dialect/Pipe/Transforms/Passes.h.inc"
} // namespace pipe::pipeline

using namespace mlir;
using namespace pipe::pipeline;

PipePartitionOptions pipe::pipeline::partitionOptions(const PipePlanPipelineOptions &options) {
  PipePartitionOptions partition;
  partition.stages = options.stages;
  partition.gpus = options.gpus;
  partition.replicaLayout = options.replicaLayout;
  partition.memory = options.memory;
  partition.target = options.target;
  partition.microBatchSize = options.microBatchSize;
  partition.microbatches = options.microbatches;
  partition.algo = options.algo;
  partition.schedule = options.schedule;
  partition.dtype = options.dtype;
  partition.optimizer = options.optimizer;
  partition.profile = options.profile;
  partition.objective = options.objective;
  partition.timeLimit = options.timeLimit;
  partition.generalBound = options.generalBound;
  partition.recompute = options.recompute;
  return partition;
}

PipeDifferentiateOptions pipe::pipeline::differentiateOptions(const PipePlanPipelineOptions &options) {
  PipeDifferentiateOptions differentiate;
  differentiate.loss = options.loss;
  differentiate.optimizer = options.optimizer;
  differentiate.lr = options.lr;
  differentiate.momentum = options.momentum;
  differentiate.beta1 = options.beta1;
  differentiate.beta2 = options.beta2;
  differentiate.eps = options.eps;
  differentiate.weightDecay = options.weightDecay;
  return differentiate;
}

void pipe::pipeline::buildPlanPipeline(OpPassManager &pm, const PipePlanPipelineOptions &options,
                                       PartitionHooks hooks) {
  if (options.train)
    pm.addPass(createPipeAttachLoss(PipeAttachLossOptions{options.loss}));
  pm.addPass(createPipePartition(partitionOptions(options), std::move(hooks)));
  pm.addPass(createPipeSplitStages());
  // Recurrent layers were placed as one op each; their cells are what the
  // backward and the kernels need.
  pm.addPass(pipe::nn::createNNExpandComposites());
  pm.addPass(createPipeSchedule());
  if (options.train)
    pm.addPass(createPipeDifferentiate(differentiateOptions(options)));
}

namespace {
struct PipePlanPass : pipe::pipeline::impl::PipePlanPipelineBase<PipePlanPass> {
  using Base::Base;

  /// The option values this instance holds.
  PipePlanPipelineOptions options() const {
    PipePlanPipelineOptions values;
    values.stages = stages;
    values.gpus = gpus;
    values.replicaLayout = replicaLayout;
    values.memory = memory;
    values.target = target;
    values.microBatchSize = microBatchSize;
    values.microbatches = microbatches;
    values.algo = algo;
    values.schedule = schedule;
    values.dtype = dtype;
    values.optimizer = optimizer;
    values.profile = profile;
    values.objective = objective;
    values.timeLimit = timeLimit;
    values.generalBound = generalBound;
    values.recompute = recompute;
    values.loss = loss;
    values.train = train;
    values.lr = lr;
    values.momentum = momentum;
    values.beta1 = beta1;
    values.beta2 = beta2;
    values.eps = eps;
    values.weightDecay = weightDecay;
    return values;
  }

  /// Every option of this pass, in declaration order.
  std::vector<const llvm::cl::Option *> optionList() const {
    return {&stages,    &gpus,      &replicaLayout, &memory,       &target,         &microBatchSize,
            &microbatches, &algo,   &schedule,      &dtype,        &optimizer,      &profile,
            &objective, &timeLimit, &generalBound,  &recompute,    &loss,           &train,
            &lr,        &momentum,  &beta1,         &beta2,        &eps,            &weightDecay};
  }

  void runOnOperation() override {
    OpPassManager pm(ModuleOp::getOperationName());
    buildPlanPipeline(pm, options());
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }
};
} // namespace

FailureOr<PipePlanPipelineOptions>
pipe::pipeline::parsePlanOptions(llvm::ArrayRef<std::pair<std::string, std::string>> values,
                                 std::string &error) {
  // LLVM's option parser prints a bad number to stderr rather than to the
  // pass's error handler: numbers are checked here first, by the kind of
  // their default, so that every error comes back as `error`.
  llvm::StringMap<PlanOptionInfo::Kind> kinds;
  for (const PlanOptionInfo &info : planOptionInfo())
    kinds[info.name] = info.kind;
  std::string text;
  for (const auto &[name, value] : values) {
    auto known = kinds.find(name);
    if (known == kinds.end()) {
      std::string names;
      for (const PlanOptionInfo &info : planOptionInfo())
        names += (names.empty() ? "" : ", ") + info.name;
      error = "unknown option '" + name + "' (the options are " + names + ")";
      return failure();
    }
    PlanOptionInfo::Kind kind = known->second;
    int64_t integer;
    double number;
    if (kind == PlanOptionInfo::Integer && llvm::StringRef(value).getAsInteger(10, integer)) {
      error = "--" + name + " expects an integer, got '" + value + "'";
      return failure();
    }
    if (kind == PlanOptionInfo::Number && llvm::StringRef(value).getAsDouble(number)) {
      error = "--" + name + " expects a number, got '" + value + "'";
      return failure();
    }
    if (kind == PlanOptionInfo::Flag &&
        !llvm::is_contained({"true", "false", "1", "0"}, llvm::StringRef(value))) {
      error = "--" + name + " expects true or false, got '" + value + "'";
      return failure();
    }
    // Braces quote a value, as pipe-plan-pipeline{...} reads it.
    text += (text.empty() ? "" : " ") + name + "={" + value + "}";
  }
  PipePlanPass pass;
  std::string message;
  llvm::raw_string_ostream os(message);
  if (failed(pass.initializeOptions(text, [&](const Twine &msg) {
        os << msg;
        return failure();
      }))) {
    error = llvm::StringRef(message).trim().str();
    if (error.empty())
      error = "cannot read the options '" + text + "'";
    return failure();
  }
  return pass.options();
}

std::vector<PlanOptionInfo> pipe::pipeline::planOptionInfo() {
  PipePlanPass pass;
  // The pass prints itself as `pipe-plan-pipeline{name=value ...}`: the defaults.
  std::string text;
  llvm::raw_string_ostream os(text);
  pass.printAsTextualPipeline(os);
  llvm::StringMap<std::string> defaults;
  llvm::StringRef body = llvm::StringRef(text).split('{').second.rsplit('}').first;
  while (!body.empty()) {
    auto [item, rest] = body.split(' ');
    body = rest;
    auto [name, value] = item.split('=');
    defaults[name] = value.str();
  }
  // optionList and options() are written by hand: an option of the pass
  // missing from them would be neither offered nor passed on.
  llvm::StringSet<> listed;
  for (const llvm::cl::Option *option : pass.optionList())
    listed.insert(option->ArgStr);
  for (const auto &entry : defaults)
    if (!listed.contains(entry.getKey()) || listed.size() != defaults.size())
      llvm::report_fatal_error("pipe-plan-pipeline's optionList() does not name its option '" +
                               entry.getKey() + "' once");
  std::vector<PlanOptionInfo> infos;
  for (const llvm::cl::Option *option : pass.optionList()) {
    PlanOptionInfo info;
    info.name = option->ArgStr.str();
    info.description = option->HelpStr.str();
    // The printed default tells the kind: "1.000000e-03" is a double.
    llvm::StringRef printed = defaults[option->ArgStr];
    int64_t integer;
    double number;
    if (printed == "true" || printed == "false")
      info.kind = PlanOptionInfo::Flag;
    else if (!printed.getAsInteger(10, integer))
      info.kind = PlanOptionInfo::Integer;
    else if (!printed.getAsDouble(number))
      info.kind = PlanOptionInfo::Number;
    info.defaultValue = printed.str();
    // Numbers as a user writes them: 0.9, 1e-08, 10.
    if (info.kind == PlanOptionInfo::Number) {
      char formatted[32];
      std::snprintf(formatted, sizeof formatted, "%g", number);
      info.defaultValue = formatted;
    }
    infos.push_back(std::move(info));
  }
  return infos;
}
