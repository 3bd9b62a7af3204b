//===- MainJob.cpp - `pipe-opt model.onnx --pipeline-stages=N` ------------===//
//
// import (done by the caller) -> pipe-partition -> pipe-split-stages ->
// pipe-schedule, then the report and the output directory. The partitioner's
// own writers produce plan.json, the trace and the SVG, so pipe-plan and
// pipe-opt describe a plan the same way. Every assumption the plan rests on
// (target, dtype, optimizer, batch sizes, memory limit, link model, objective,
// tool version) is in the report's header, plan.json and problem.json.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"

#include "pipe/Analysis/ChainBuilder.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"
#include "pipe/Driver/TrainingProgram.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "partitioner/Allocation.h"
#include "partitioner/Error.h"
#include "partitioner/Output.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <chrono>
#include <cstdio>
#include <fcntl.h>
#include <set>
#include <fstream>
#include <sstream>

using namespace mlir;
using namespace pipe;
using namespace pipe::driver;

namespace {
class Progress {
public:
  explicit Progress(bool enabled) : enabled(enabled), start(clock::now()) {}
  void step(const llvm::Twine &what) {
    if (enabled)
      llvm::errs() << llvm::format("[pipe-opt %6.2fs] ", seconds()) << what << "\n";
  }
  double seconds() const {
    return std::chrono::duration<double>(clock::now() - start).count();
  }

private:
  using clock = std::chrono::steady_clock;
  bool enabled;
  clock::time_point start;
};

/// Why each boundary sits where it is: the plan with the boundary moved one
/// layer either way, evaluated by the same simulator.
void explainBoundaries(const partitioner::Problem &problem,
                       const partitioner::PlanningReport &report, llvm::raw_ostream &os) {
  const partitioner::PlanResult &best = *report.best();
  const partitioner::Allocation &allocation = best.allocation;
  int stages = allocation.numStages();
  if (stages < 2)
    return;
  os << "\nWhy each boundary sits where it does (the same plan with the boundary moved one "
        "layer):\n";
  auto describe = [&](partitioner::Allocation moved) -> std::string {
    try {
      partitioner::validateAllocation(problem, moved);
    } catch (const partitioner::Error &) {
      return "not a valid cut (a tensor would flow backwards)";
    }
    partitioner::PlanResult result =
        partitioner::evaluateAllocation(problem, moved, best.scheduleKind, report.bounds);
    if (!result.valid)
      return result.reason;
    double change = (result.periodMs / best.periodMs - 1) * 100;
    return llvm::formatv("period {0:f3} ms ({1}{2:f1}%)", result.periodMs,
                         change >= 0 ? "+" : "", change)
        .str();
  };
  for (int s = 0; s + 1 < stages; ++s) {
    int last = -1, first = -1, inS = 0, inNext = 0;
    for (size_t l = 0; l < allocation.stageOfLayer.size(); ++l) {
      if (allocation.stageOfLayer[l] == s) {
        last = static_cast<int>(l);
        ++inS;
      } else if (allocation.stageOfLayer[l] == s + 1) {
        if (first < 0)
          first = static_cast<int>(l);
        ++inNext;
      }
    }
    if (last < 0 || first < 0)
      continue;
    os << "  stage " << s << " | " << s + 1 << ": after layer '" << problem.layers[last].name
       << "', " << partitioner::formatBytes(best.stages[s].outBytes, problem.platform.byteUnits)
       << " cross\n";
    if (inS > 1) {
      partitioner::Allocation earlier = allocation;
      earlier.stageOfLayer[last] = s + 1;
      os << "    one layer earlier: " << describe(earlier) << "\n";
    }
    if (inNext > 1) {
      partitioner::Allocation later = allocation;
      later.stageOfLayer[first] = s;
      os << "    one layer later:   " << describe(later) << "\n";
    }
  }
}

/// Operations, parameters (owned) of each stage, from the split pipeline.
void stageSummary(pipeline::PipelineOp pipelineOp, llvm::raw_ostream &os) {
  os << "\nStages (IR):\n";
  for (auto stage : pipelineOp.getBody().getOps<pipeline::StageOp>()) {
    int64_t ops = 0, sends = 0, recvs = 0;
    double parameters = 0;
    stage.walk([&](Operation *op) {
      if (isa<pipeline::SendOp>(op))
        ++sends;
      else if (isa<pipeline::RecvOp>(op))
        ++recvs;
      else if (auto param = dyn_cast<pipeline::ParamOp>(op)) {
        if (param.getOwner() == stage.getIndex() && param.getTrainable())
          parameters += cast<ShapedType>(param.getType()).getNumElements();
      } else if (isa<nn::NNDialect>(op->getDialect()) &&
                 !op->hasTrait<OpTrait::ConstantLike>())
        ++ops;
    });
    os << llvm::formatv("  stage {0}: {1} ops, {2:f2} M parameters, {3} sends, {4} receives\n",
                        stage.getIndex(), ops, parameters / 1e6, sends, recvs);
  }
}

/// The main job's output directory, replaced as a whole: files go to a
/// directory beside it, which takes its place on commit(). Refuses a path that
/// is a file, and a directory holding anything the main job does not write
/// (it would be deleted with the old outputs).
class OutputDirectory {
public:
  explicit OutputDirectory(std::string path) : path(std::move(path)) {
    while (this->path.size() > 1 && llvm::sys::path::is_separator(this->path.back()))
      this->path.pop_back();
  }
  ~OutputDirectory() {
    if (!staging.empty())
      llvm::sys::fs::remove_directories(staging);
  }

  const std::string &getPath() const { return path; }

  LogicalResult prepare(ModuleOp module) {
    llvm::sys::fs::file_status status;
    bool exists = !llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status);
    if (exists && !llvm::sys::fs::is_directory(status))
      return module.emitError("-o '") << path
                                      << "' is a file; the main job writes a directory of outputs "
                                         "(plan.json, report.txt, pipeline.mlir, stageK.mlir, ...)";
    if (!exists && llvm::sys::path::extension(path) == ".mlir")
      return module.emitError("-o '")
             << path
             << "': the main job writes a directory of outputs (plan.json, "
                "pipeline.mlir, stageK.mlir, ...), not one .mlir file; name a "
                "directory, or run the passes with --pass-pipeline to get one module";
    if (exists) {
      std::error_code ec;
      for (llvm::sys::fs::directory_iterator it(path, ec), end; it != end && !ec;
           it.increment(ec)) {
        llvm::StringRef name = llvm::sys::path::filename(it->path());
        if (!isOutputName(name))
          return module.emitError("-o '")
                 << path << "' holds '" << name
                 << "', which the main job did not write; the directory is replaced as a "
                    "whole, so give a new or empty one";
      }
      if (ec)
        return module.emitError("cannot read '") << path << "': " << ec.message();
    }
    llvm::SmallString<256> parent(llvm::sys::path::parent_path(path));
    if (!parent.empty())
      if (std::error_code ec = llvm::sys::fs::create_directories(parent))
        return module.emitError("cannot create '") << parent << "': " << ec.message();
    llvm::SmallString<256> created;
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(path + ".tmp", created))
      return module.emitError("cannot create a directory beside '")
             << path << "': " << ec.message();
    staging = created.str().str();
    return success();
  }

  std::string pathOf(llvm::StringRef name) const {
    llvm::SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return p.str().str();
  }

  LogicalResult write(ModuleOp module, llvm::StringRef name, llvm::StringRef text) {
    llvm::SmallString<256> p(staging);
    llvm::sys::path::append(p, name);
    std::ofstream out(p.str().str(), std::ios::binary);
    out << text.str();
    out.close();
    if (!out)
      return module.emitError("cannot write '") << p << "'";
    return success();
  }

  /// Puts the staged directory in place of the old one (swapped in one step
  /// where the system can, else renamed aside first), then removes the old.
  LogicalResult commit(ModuleOp module) {
    llvm::sys::fs::file_status status;
    bool exists = !llvm::sys::fs::status(path, status) && llvm::sys::fs::exists(status);
    if (!exists) {
      if (std::error_code ec = llvm::sys::fs::rename(staging, path))
        return module.emitError("cannot rename '")
               << staging << "' to '" << path << "': " << ec.message();
      staging.clear();
      return success();
    }
#ifdef RENAME_EXCHANGE
    if (renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, path.c_str(), RENAME_EXCHANGE) == 0) {
      // `staging` now names the old outputs; the destructor removes them.
      return success();
    }
#endif
    llvm::SmallString<256> aside;
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory(path + ".old", aside))
      return module.emitError("cannot create a directory beside '")
             << path << "': " << ec.message();
    llvm::sys::fs::remove(aside);
    if (std::error_code ec = llvm::sys::fs::rename(path, aside))
      return module.emitError("cannot move the old '") << path << "' aside: " << ec.message();
    if (std::error_code ec = llvm::sys::fs::rename(staging, path)) {
      llvm::sys::fs::rename(aside, path);
      return module.emitError("cannot rename '")
             << staging << "' to '" << path << "': " << ec.message();
    }
    staging = aside.str().str();
    return success();
  }

private:
  /// What the main job writes, and what pipe-run adds to it (the compiled
  /// rank programs, their build logs, the measurements).
  static bool isOutputName(llvm::StringRef name) {
    if (llvm::is_contained({"plan.json", "problem.json", "report.txt", "schedule.trace.json",
                            "schedule.svg", "pipeline.mlir", "program.json",
                            "measured.trace.json", "measured.json"},
                           name))
      return true;
    auto numbered = [&](llvm::StringRef prefix, llvm::StringRef suffix) {
      llvm::StringRef rest = name;
      unsigned index;
      return rest.consume_front(prefix) && rest.consume_back(suffix) &&
             !rest.getAsInteger(10, index);
    };
    return numbered("stage", ".mlir") || numbered("rank", ".cpp") || numbered("rank", ".so") ||
           numbered("rank", ".build.log");
  }

  std::string path;
  std::string staging;
};

/// Each stage alone in a module: it parses and prints back the same.
std::string stageModuleText(pipeline::StageOp stage) {
  OwningOpRef<ModuleOp> holder = ModuleOp::create(stage.getLoc());
  OpBuilder builder(holder->getBodyRegion());
  builder.clone(*stage);
  std::string text;
  llvm::raw_string_ostream os(text);
  holder->print(os);
  os << "\n";
  return text;
}

/// The assumptions of the plan, for plan.json and problem.json.
nlohmann::ordered_json settingsJson(const pipeline::PartitionOutcome &outcome,
                                    const MainJobOptions &options) {
  const partitioner::Platform &platform = outcome.problem.platform;
  auto link = [](const partitioner::LinkSpec &spec) {
    nlohmann::ordered_json json;
    if (spec.bandwidthBytesPerSecond == partitioner::kInfinity)
      json["bandwidth_bytes_per_s"] = "inf";
    else
      json["bandwidth_bytes_per_s"] = spec.bandwidthBytesPerSecond;
    json["latency_ms"] = spec.latencyMs;
    return json;
  };
  nlohmann::ordered_json settings;
  settings["tool_version"] = toolVersion();
  settings["model"] = llvm::sys::path::filename(options.modelPath).str();
  settings["target"] = outcome.targetName;
  settings["dtype"] = outcome.dtype;
  settings["optimizer"] = outcome.optimizer;
  settings["micro_batch_size"] = outcome.microBatchSize;
  settings["micro_batch_size_given"] = options.microBatchSizeGiven;
  settings["microbatches"] = outcome.problem.training.microbatches;
  settings["gpus"] = platform.gpus;
  settings["memory_limit"] = outcome.memoryLimit;
  settings["memory_limit_from_target"] = outcome.memoryFromTarget;
  if (platform.memoryBytesPerGpu < partitioner::kInfinity)
    settings["memory_limit_bytes"] = platform.memoryBytesPerGpu;
  settings["link_model"] = {{"gpus_per_node", platform.gpusPerNode},
                            {"intra_node", link(platform.intraNode)},
                            {"inter_node", link(platform.interNode)}};
  settings["objective"] = outcome.objective;
  settings["algorithm"] = options.partition.algorithm;
  settings["schedule"] =
      options.partition.schedule.empty() ? "any (1f1b or interleaved)" : options.partition.schedule;
  settings["time_limit_s"] = outcome.timeLimitSeconds;
  return settings;
}

/// The report's header: what was planned, under which assumptions.
void writeHeader(const pipeline::PartitionOutcome &outcome, const MainJobOptions &options,
                 llvm::raw_ostream &os) {
  const partitioner::Problem &problem = outcome.problem;
  const partitioner::PlanResult &best = *outcome.report.best();
  os << "pipe-opt plan for " << llvm::sys::path::filename(options.modelPath) << "\n";
  os << "tool:         " << toolVersion() << "\n";
  os << llvm::formatv("model:        {0:f2} M parameters, {1:f2} GFLOP forward per micro-batch\n",
                      outcome.parameters / 1e6, outcome.forwardFlops / 1e9);
  os << "target:       " << outcome.targetName << ", dtype " << outcome.dtype << ", optimizer "
     << outcome.optimizer << "\n";
  os << "micro-batch:  size " << outcome.microBatchSize
     << (options.microBatchSizeGiven ? " (--micro-batch-size)"
                                     : " (the model's batch dim, fixed or bound with --dim)")
     << ", " << problem.training.microbatches << " micro-batches per iteration\n";
  os << "memory limit: " << outcome.memoryLimit << " per GPU"
     << (outcome.memoryFromTarget ? " (the target's; --memory to change)" : " (--memory)") << "\n";
  os << "links:        " << outcome.linkModel << "\n";
  os << "GPUs:         " << problem.platform.gpus << " (--pipeline-stages); the plan runs "
     << partitioner::describeStages(problem, best) << "\n";
  os << "objective:    "
     << (outcome.objective == "period"
             ? std::string("the steady-state period (--objective=period)")
             : "the iteration time of " + std::to_string(problem.training.microbatches) +
                   " micro-batches, what a training step costs (--objective=period for "
                   "the steady state)")
     << "\n";
  os << llvm::formatv("chosen:       {0} ({1}): iteration {2:f3} ms, period {3:f3} ms\n\n",
                      best.algorithm, partitioner::toString(best.scheduleKind), best.iterationMs,
                      best.periodMs);
}

/// "10", "2.5": a number of seconds as a user writes it.
std::string seconds(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// How to plan the written problem again with the partitioner alone.
std::string replayCommand(const std::string &problemPath, const MainJobOptions &options) {
  std::string algorithms = options.partition.algorithm;
  if (algorithms == "best")
    algorithms += ",madpipe-span";
  return llvm::formatv("pipe-plan {0} --algo {1} --objective {2} --time-limit {3}", problemPath,
                       algorithms, options.partition.objective,
                       seconds(options.partition.timeLimitSeconds))
      .str();
}
} // namespace

/// A model's external-data locations are relative to its folder (the importer
/// refuses any other). When the model with the plan goes to another folder,
/// each data file is linked (or copied) to the same location there, so the
/// written model loads; a different file already at that place is an error.
static LogicalResult placeExternalData(const onnx::ModelProto &model, llvm::StringRef input,
                                       llvm::StringRef output, std::string &error) {
  std::set<std::string> locations;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      for (const onnx::StringStringEntryProto &entry : tensor.external_data())
        if (entry.key() == "location")
          locations.insert(entry.value());
  if (locations.empty())
    return success();
  auto folderOf = [](llvm::StringRef path) {
    llvm::SmallString<256> folder(llvm::sys::path::parent_path(path));
    if (folder.empty())
      folder = ".";
    return folder;
  };
  llvm::SmallString<256> from = folderOf(input), to = folderOf(output), realFrom, realTo;
  if (llvm::sys::fs::real_path(from, realFrom) || llvm::sys::fs::real_path(to, realTo)) {
    error = "cannot write '" + output.str() + "': its folder does not exist";
    return failure();
  }
  if (realFrom == realTo)
    return success();
  for (const std::string &location : locations) {
    llvm::SmallString<256> source(from), target(to);
    llvm::sys::path::append(source, location);
    llvm::sys::path::append(target, location);
    if (llvm::sys::fs::exists(target)) {
      if (llvm::sys::fs::equivalent(source, target))
        continue;
      auto a = llvm::MemoryBuffer::getFile(source, false, false);
      auto b = llvm::MemoryBuffer::getFile(target, false, false);
      if (a && b && (*a)->getBuffer() == (*b)->getBuffer())
        continue;
      error = "cannot write '" + output.str() + "': '" + target.str().str() +
              "' exists and differs from the model's external data '" + location +
              "'; write the model with the plan to another folder";
      return failure();
    }
    std::error_code ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(target));
    if (!ec && llvm::sys::fs::create_hard_link(source, target)) {
      std::string temporary = (target + ".tmp").str();
      ec = llvm::sys::fs::copy_file(source, temporary);
      if (!ec)
        ec = llvm::sys::fs::rename(temporary, target);
      if (ec)
        llvm::sys::fs::remove(temporary);
    }
    if (ec) {
      error = "cannot copy the external data '" + location + "' next to '" + output.str() +
              "': " + ec.message();
      return failure();
    }
  }
  return success();
}

LogicalResult pipe::driver::writeOnnxWithStages(llvm::StringRef input, llvm::StringRef output,
                                                const std::map<std::string, int> &stageOf,
                                                llvm::StringRef planSummary, std::string &error) {
  std::ifstream in(input.str(), std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  onnx::ModelProto model;
  if (!in || !model.ParseFromString(bytes.str())) {
    error = "cannot read '" + input.str() + "' as an ONNX model";
    return failure();
  }
  // NodeProto.metadata_props is field 9 (ONNX IR version 10); the onnx
  // headers here predate it, so it is written as a known-layout unknown field.
  constexpr int kNodeMetadataProps = 9;
  for (auto [index, node] : llvm::enumerate(*model.mutable_graph()->mutable_node())) {
    auto it = stageOf.find(onnx_import::nodeDisplayName(node.name(), node.op_type(), index));
    if (it == stageOf.end())
      continue;
    onnx::StringStringEntryProto entry;
    entry.set_key("pipe.stage");
    entry.set_value(std::to_string(it->second));
    node.mutable_unknown_fields()->AddLengthDelimited(kNodeMetadataProps,
                                                      entry.SerializeAsString());
  }
  auto *prop = model.add_metadata_props();
  prop->set_key("pipe.plan");
  prop->set_value(planSummary.str());
  if (failed(placeExternalData(model, input, output, error)))
    return failure();
  // Written beside the target and renamed over it: no partial model is left.
  std::string temporary = (output + ".tmp").str();
  {
    std::ofstream out(temporary, std::ios::binary);
    if (!out || !model.SerializeToOstream(&out) || !out.flush()) {
      llvm::sys::fs::remove(temporary);
      error = "cannot write '" + output.str() + "'";
      return failure();
    }
  }
  if (std::error_code ec = llvm::sys::fs::rename(temporary, output)) {
    llvm::sys::fs::remove(temporary);
    error = "cannot write '" + output.str() + "': " + ec.message();
    return failure();
  }
  return success();
}

std::string pipe::driver::toolVersion() {
  return std::string("pipe-opt ") + PIPE_OPT_VERSION + " (MLIR " + LLVM_VERSION_STRING + ")";
}

LogicalResult pipe::driver::runMainJob(ModuleOp module, const MainJobOptions &options,
                                       llvm::raw_ostream &reportStream) {
  Progress progress(options.progress);
  OutputDirectory outputs(options.outputDir);
  if (failed(outputs.prepare(module)))
    return failure();

  const TrainingOptions &training = options.training;
  if (!training.dropout) {
    WalkResult walk = module.walk([&](nn::DropoutOp dropout) {
      if (dropout.getMask() && !dropout.getMask().use_empty()) {
        dropout.emitError("--disable-dropout cannot remove a dropout whose mask is used");
        return WalkResult::interrupt();
      }
      dropout.getOutput().replaceAllUsesWith(dropout.getInput());
      dropout.erase();
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }
  if (training.codegen) {
    PassManager lossPm(module.getContext(), ModuleOp::getOperationName());
    lossPm.addPass(pipeline::createPipeAttachLoss({training.loss}));
    if (failed(lossPm.run(module)))
      return failure();
  }

  progress.step("cost model on " + options.partition.target + " at " + options.partition.dtype);
  auto outcome = pipeline::buildPartitionProblem(module, options.partition);
  if (failed(outcome))
    return failure();
  const partitioner::Problem &problem = outcome->problem;

  // problem.json first: when planning fails, it is what the user replays.
  std::string problemText;
  {
    llvm::raw_string_ostream problemStream(problemText);
    pipe::writeProblemJson(problem, problemStream);
  }
  nlohmann::ordered_json problemJson = nlohmann::ordered_json::parse(problemText);
  problemJson["settings"] = settingsJson(*outcome, options);
  if (failed(outputs.write(
          module, "problem.json",
          problemJson.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
              "\n")))
    return failure();
  const std::string replay = replayCommand(outputs.pathOf("problem.json"), options);

  pipeline::PartitionOptions partition = options.partition;
  partition.onResult = [&](const partitioner::PlanResult &result) {
    std::string status = result.valid ? llvm::formatv("iteration {0:f3} ms, period {1:f3} ms",
                                                      result.iterationMs, result.periodMs)
                                            .str()
                                      : result.reason;
    progress.step(
        llvm::formatv("  {0}: {1} ({2:f2} s)", result.algorithm, status, result.plannerSeconds));
  };
  partition.explainFailure = [&](Diagnostic &diag) {
    diag.attachNote() << "the problem is in " << outputs.pathOf("problem.json")
                      << "; replay the planning with: " << replay;
  };
  progress.step(llvm::formatv("chain of {0} layers; planning on {1} GPUs with {2} (each MIP "
                              "stops after {3} s)",
                              problem.layers.size(), problem.platform.gpus,
                              options.partition.algorithm,
                              seconds(options.partition.timeLimitSeconds)));
  if (failed(pipeline::planPartition(module, *outcome, partition))) {
    (void)outputs.commit(module);
    return failure();
  }
  const partitioner::PlanResult &best = *outcome->report.best();
  progress.step(llvm::formatv("chose {0} by {1}: iteration {2:f3} ms, period {3:f3} ms; {4}",
                              best.algorithm, outcome->objective, best.iterationMs, best.periodMs,
                              partitioner::describeStages(problem, best)));

  // Each ONNX node's stage, as plan.json's stage_of lists it.
  std::map<std::string, int> stageOf = pipeline::stageOfNodes(*outcome);

  StageWorkspace workspace;
  if (training.codegen) {
    auto computed = computeStageWorkspace(module, options.partition);
    if (failed(computed))
      return failure();
    workspace = std::move(*computed);
  }
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.addPass(pipeline::createPipeSplitStages());
  pm.addPass(pipeline::createPipeSchedule());
  if (failed(pm.run(module))) {
    (void)outputs.commit(module);
    module.emitRemark() << "the problem is in " << outputs.pathOf("problem.json")
                        << "; replay the planning with: " << replay;
    return failure();
  }
  if (training.codegen) {
    pipeline::PipeDifferentiateOptions differentiate;
    differentiate.loss = training.loss;
    differentiate.optimizer = options.partition.optimizer;
    differentiate.lr = training.lr;
    differentiate.momentum = training.momentum;
    differentiate.beta1 = training.beta1;
    differentiate.beta2 = training.beta2;
    differentiate.eps = training.eps;
    differentiate.weightDecay = training.weightDecay;
    PassManager differentiatePm(module.getContext(), ModuleOp::getOperationName());
    differentiatePm.addPass(pipeline::createPipeDifferentiate(differentiate));
    if (failed(differentiatePm.run(module)))
      return failure();
  }
  progress.step(training.codegen
                    ? "split into stages with send/recv on every cut; schedule attached; "
                      "backward programs built"
                    : "split into stages with send/recv on every cut; schedule attached");
  std::map<std::string, std::string> programFiles;
  if (training.codegen) {
    auto built = buildTrainingProgram(module, *outcome, workspace, options.modelPath,
                                      options.partition.optimizer);
    if (failed(built))
      return failure();
    programFiles = std::move(*built);
    progress.step("lowered to " + llvm::Twine(programFiles.size() - 1) +
                  " per-rank C++ programs (rankK.cpp) and program.json");
  }

  std::string report;
  llvm::raw_string_ostream os(report);
  writeHeader(*outcome, options, os);
  std::ostringstream table;
  partitioner::writeTable(problem, outcome->report, table, /*timings=*/false);
  os << table.str();
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>())
    stageSummary(pipelineOp, os);
  explainBoundaries(problem, outcome->report, os);
  if (!programFiles.empty())
    os << llvm::formatv("\ntraining step: loss {0}, optimizer {1} (lr {2}); rank0.cpp .. "
                        "rank{3}.cpp and program.json written beside this report; train with "
                        "pipe-run on this directory\n",
                        training.loss, options.partition.optimizer,
                        pipeline::formatDouble(training.lr), programFiles.size() - 2);
  else
    os << "\nno training programs (--no-codegen)\n";
  os.flush();
  reportStream << report;
  reportStream.flush();

  std::ostringstream planJson, trace, svg;
  partitioner::writePlanJson(problem, outcome->report, planJson, /*timings=*/false);
  partitioner::writeTraceJson(problem, best, trace);
  partitioner::writeSvg(problem, best, svg);
  nlohmann::ordered_json plan = nlohmann::ordered_json::parse(planJson.str());
  plan["settings"] = settingsJson(*outcome, options);
  plan["model"] = {{"name", llvm::sys::path::stem(options.modelPath).str()},
                   {"parameters", outcome->parameters},
                   {"forward_flops", outcome->forwardFlops},
                   {"target", outcome->targetName}};
  std::string pipelineText;
  llvm::raw_string_ostream pipelineStream(pipelineText);
  module.print(pipelineStream);
  pipelineStream << "\n";
  pipelineStream.flush();
  // Names are UTF-8 (the importer checks); a model path may not be: replace.
  std::string planText =
      plan.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (failed(outputs.write(module, "plan.json", planText)) ||
      failed(outputs.write(module, "schedule.trace.json", trace.str())) ||
      failed(outputs.write(module, "schedule.svg", svg.str())) ||
      failed(outputs.write(module, "report.txt", report)) ||
      failed(outputs.write(module, "pipeline.mlir", pipelineText)))
    return failure();
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>())
    for (auto stage : pipelineOp.getBody().getOps<pipeline::StageOp>())
      if (failed(outputs.write(module, ("stage" + llvm::Twine(stage.getIndex()) + ".mlir").str(),
                               stageModuleText(stage))))
        return failure();
  for (const auto &[name, text] : programFiles)
    if (failed(outputs.write(module, name, text)))
      return failure();
  if (!options.onnxWithPlan.empty()) {
    if (llvm::StringRef(options.modelPath).ends_with(".onnxtext"))
      return module.emitError("--write-onnx-plan needs a binary .onnx model");
    nlohmann::ordered_json summary = {{"algorithm", best.algorithm},
                                      {"schedule", partitioner::toString(best.scheduleKind)},
                                      {"stages", best.allocation.numStages()},
                                      {"period_ms", best.periodMs},
                                      {"iteration_ms", best.iterationMs},
                                      {"tool_version", toolVersion()}};
    std::string error;
    if (failed(writeOnnxWithStages(options.modelPath, options.onnxWithPlan, stageOf,
                                   summary.dump(), error)))
      return module.emitError(error);
  }
  if (failed(outputs.commit(module)))
    return failure();
  progress.step("wrote " + outputs.getPath() +
                "/ (plan.json, problem.json, report.txt, "
                "schedule.trace.json, schedule.svg, pipeline.mlir, stage*.mlir" +
                (programFiles.empty() ? ")" : ", rank*.cpp, program.json); train it with: "
                                              "pipe-run " + outputs.getPath()));
  return success();
}
