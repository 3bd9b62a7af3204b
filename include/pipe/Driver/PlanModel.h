//===- PlanModel.h - the main job as a library call -------------*- C++ -*-===//
//
// `pipe-opt MODEL --pipeline-stages=N [--NAME=VALUE ...] -o DIR` as one
// function, for the Python bindings and for programs that embed the planner:
// same options (by their command-line names), same outputs, same exit status.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DRIVER_PLANMODEL_H
#define PIPE_DRIVER_PLANMODEL_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pipe::driver {

struct PlanModelRequest {
  /// An ONNX model (.onnx, .onnxtext) or a module pipe-opt wrote from one.
  std::string modelPath;
  /// The output directory, replaced as a whole (plan.json, report.txt, ...).
  std::string outputDir;
  /// GPUs (`--pipeline-stages`).
  int stages = 0;
  /// Binds a symbolic batch dim (`--micro-batch-size`); 0: the model's own.
  int64_t microBatchSize = 0;
  /// The pipe-plan-pipeline options by their command-line names without dashes, e.g.
  /// {"memory", "80GB"}, {"target", "a100-80gb"}, {"lr", "0.01"}; and
  /// {"allow-inference-export", "true"} as `--allow-inference-export`.
  std::vector<std::pair<std::string, std::string>> options;
  /// Progress lines on stderr.
  bool progress = false;
};

struct PlanModelResult {
  /// pipe-opt's exit status: 0 planned, 1 the model or planning failed,
  /// 2 a usage error (an unknown option, a value out of range).
  int status = 1;
  /// The report pipe-opt prints (also outputDir/report.txt).
  std::string report;
  /// One line per diagnostic, as pipe-opt prints them.
  std::string errors;
};

/// Imports the model, runs the planning pipeline and writes the outputs.
/// Safe to call from several threads: each call has its own MLIR context, and
/// the partitioner runs its MIP solves (CBC) one at a time.
PlanModelResult planModel(const PlanModelRequest &request);

} // namespace pipe::driver

#endif // PIPE_DRIVER_PLANMODEL_H
