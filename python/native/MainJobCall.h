//===- MainJobCall.h - the main job, callable beside Python.h --*- C++ -*-===//
//
// Python.h includes <unistd.h>, whose `int pipe(int[2])` cannot live beside the
// project's `namespace pipe`: Module.cpp (which includes Python.h) calls the main
// job through this header, and MainJobCall.cpp (which does not) calls
// pipe::driver::planModel.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_OPT_NATIVE_MAINJOBCALL_H
#define PIPE_OPT_NATIVE_MAINJOBCALL_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pipe_opt_native {

/// pipe::driver::PlanModelResult, field for field.
struct MainJobResult {
  int status = 1;
  std::string report;
  std::string errors;
};

/// pipe::driver::planModel with the fields of its PlanModelRequest as arguments.
MainJobResult runMainJob(const std::string &modelPath, const std::string &outputDir,
                         int stages, int64_t microBatchSize,
                         const std::vector<std::pair<std::string, std::string>> &options,
                         bool progress);

} // namespace pipe_opt_native

#endif // PIPE_OPT_NATIVE_MAINJOBCALL_H
