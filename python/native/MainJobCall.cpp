//===- MainJobCall.cpp - the main job, callable beside Python.h -----------===//
#include "MainJobCall.h"

#include "pipe/Driver/PlanModel.h"

pipe_opt_native::MainJobResult
pipe_opt_native::runMainJob(const std::string &modelPath, const std::string &outputDir,
                            int stages, int64_t microBatchSize,
                            const std::vector<std::pair<std::string, std::string>> &options,
                            bool progress) {
  pipe::driver::PlanModelRequest request;
  request.modelPath = modelPath;
  request.outputDir = outputDir;
  request.stages = stages;
  request.microBatchSize = microBatchSize;
  request.options = options;
  request.progress = progress;
  pipe::driver::PlanModelResult result = pipe::driver::planModel(request);
  return MainJobResult{result.status, std::move(result.report), std::move(result.errors)};
}
