//===- MainJob.cpp - `pipe-opt model.onnx --pipeline-stages=N` ------------===//
//
// import (done by the caller) -> pipe-partition -> pipe-split-stages ->
// pipe-schedule, then the report and the output directory. The partitioner's
// own writers produce plan.json, the trace and the SVG, so pipe-plan and
// pipe-opt describe a plan the same way.
//
//===----------------------------------------------------------------------===//
#include "pipe/Driver/MainJob.h"

#include "pipe/Analysis/ChainBuilder.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/Pipe/Transforms/Passes.h"
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "partitioner/Allocation.h"
#include "partitioner/Error.h"
#include "partitioner/LatticeDp.h"
#include "partitioner/Output.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <nlohmann/json.hpp>
#include <onnx/onnx_pb.h>

#include <chrono>
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
       << "', " << partitioner::formatBytes(best.stages[s].outBytes) << " cross\n";
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

LogicalResult writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out)
    return failure();
  return success();
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

LogicalResult pipe::driver::runMainJob(ModuleOp module, const MainJobOptions &options,
                                       llvm::raw_ostream &reportStream) {
  Progress progress(options.progress);
  progress.step("cost model and partitioning: " + llvm::Twine(options.partition.stages) +
                " stages on " + options.partition.target + ", algorithm " +
                options.partition.algorithm + " (each MIP stops after " +
                llvm::formatv("{0}", partitioner::PlanOptions().ilpTimeLimitSeconds) + " s)");
  auto outcome = pipeline::partitionModule(module, options.partition);
  if (failed(outcome))
    return failure();
  const partitioner::PlanResult &best = *outcome->report.best();
  for (const partitioner::PlanResult &result : outcome->report.results)
    progress.step("  " + result.algorithm + ": " +
                  llvm::formatv("{0:f3}", result.plannerSeconds) + " s" +
                  (result.valid ? llvm::Twine("") : llvm::Twine(" (") + result.reason + ")"));
  progress.step("chose " + best.algorithm + ": period " +
                llvm::formatv("{0:f3}", best.periodMs) + " ms over " +
                llvm::Twine(outcome->report.results.size()) + " algorithms");

  // Each ONNX node's stage, as plan.json's stage_of lists it.
  std::map<std::string, int> stageOf = pipeline::stageOfNodes(*outcome);

  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.addPass(pipeline::createPipeSplitStages());
  pm.addPass(pipeline::createPipeSchedule());
  if (failed(pm.run(module)))
    return failure();
  progress.step("split into stages with send/recv on every cut; schedule attached");

  std::string report;
  llvm::raw_string_ostream os(report);
  os << "pipe-opt plan for " << llvm::sys::path::filename(options.modelPath) << "\n";
  os << llvm::formatv("model: {0:f2} M parameters, {1:f2} GFLOP forward per micro-batch; "
                      "target {2}; {3} micro-batches per iteration\n\n",
                      outcome->parameters / 1e6, outcome->forwardFlops / 1e9,
                      outcome->targetName, outcome->problem.training.microbatches);
  std::ostringstream table;
  partitioner::writeTable(outcome->problem, outcome->report, table, /*timings=*/false);
  os << table.str();
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>())
    stageSummary(pipelineOp, os);
  explainBoundaries(outcome->problem, outcome->report, os);
  os.flush();
  reportStream << report;

  // The output directory.
  if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir))
    return module.emitError("cannot create '") << options.outputDir << "': " << ec.message();
  auto path = [&](const llvm::Twine &name) {
    llvm::SmallString<256> p(options.outputDir);
    llvm::sys::path::append(p, name);
    return p.str().str();
  };
  std::ostringstream planJson, trace, svg;
  partitioner::writePlanJson(outcome->problem, outcome->report, planJson, /*timings=*/false);
  partitioner::writeTraceJson(outcome->problem, best, trace);
  partitioner::writeSvg(outcome->problem, best, svg);
  nlohmann::ordered_json plan = nlohmann::ordered_json::parse(planJson.str());
  plan["model"] = {{"name", llvm::sys::path::stem(options.modelPath).str()},
                   {"parameters", outcome->parameters},
                   {"forward_flops", outcome->forwardFlops},
                   {"target", outcome->targetName}};
  std::string problemJson;
  llvm::raw_string_ostream problemStream(problemJson);
  pipe::writeProblemJson(outcome->problem, problemStream);
  problemStream.flush();
  std::string pipelineText;
  llvm::raw_string_ostream pipelineStream(pipelineText);
  module.print(pipelineStream);
  pipelineStream.flush();
  // Names are UTF-8 (the importer checks); a model path may not be: replace.
  std::string planText =
      plan.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  if (failed(writeFile(path("plan.json"), planText)) ||
      failed(writeFile(path("schedule.trace.json"), trace.str())) ||
      failed(writeFile(path("schedule.svg"), svg.str())) ||
      failed(writeFile(path("report.txt"), report)) ||
      failed(writeFile(path("problem.json"), problemJson)) ||
      failed(writeFile(path("pipeline.mlir"), pipelineText)))
    return module.emitError("cannot write to '") << options.outputDir << "'";
  for (auto pipelineOp : module.getOps<pipeline::PipelineOp>()) {
    for (auto stage : pipelineOp.getBody().getOps<pipeline::StageOp>()) {
      std::string text;
      llvm::raw_string_ostream stageStream(text);
      stage.print(stageStream);
      stageStream << "\n";
      stageStream.flush();
      if (failed(writeFile(path("stage" + llvm::Twine(stage.getIndex()) + ".mlir"), text)))
        return module.emitError("cannot write to '") << options.outputDir << "'";
    }
  }
  if (!options.onnxWithPlan.empty()) {
    if (llvm::StringRef(options.modelPath).ends_with(".onnxtext"))
      return module.emitError("--write-onnx-plan needs a binary .onnx model");
    nlohmann::ordered_json summary = {{"algorithm", best.algorithm},
                                      {"schedule", partitioner::toString(best.scheduleKind)},
                                      {"stages", best.allocation.numStages()},
                                      {"period_ms", best.periodMs}};
    std::string error;
    if (failed(writeOnnxWithStages(options.modelPath, options.onnxWithPlan, stageOf,
                                   summary.dump(), error)))
      return module.emitError(error);
  }
  progress.step("wrote " + options.outputDir + "/ (plan.json, problem.json, report.txt, "
                "schedule.trace.json, schedule.svg, pipeline.mlir, stage*.mlir)");
  return success();
}
