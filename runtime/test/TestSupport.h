//===- TestSupport.h - helpers shared by the runtime's tests --------*- C++ -*-===//
//
// Scratch directories, small files, a rank with settings, and running a
// command with a time limit (the pipe-run tests).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_TEST_SUPPORT_H
#define PIPE_RUNTIME_TEST_SUPPORT_H

#include "Internal.h"
#include "Run.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace piperun::test {

/// A fresh, empty directory for the running test under the build tree.
std::string scratchDir();
void writeFile(const std::string &path, const std::string &bytes);
std::string readFile(const std::string &path);

/// Calls `body` and returns the Failure's message, or "" when none was thrown.
template <typename F> std::string failureOf(F &&body) {
  try {
    body();
  } catch (const Failure &failure) {
    return failure.what();
  }
  return "";
}

struct CommandResult {
  int exitCode = -1; ///< -1: killed at the time limit
  std::string out, err;
  double seconds = 0;
};
/// Runs argv (with extra environment entries "NAME=value") for at most
/// `limitSeconds`, capturing stdout and stderr.
CommandResult runCommand(const std::vector<std::string> &argv, double limitSeconds,
                         const std::vector<std::string> &environment = {});

/// The f32 values of a tensor.
std::vector<float> valuesOf(const pipe_tensor *t);
void setValues(pipe_tensor *t, const std::vector<float> &values);

} // namespace piperun::test

#endif // PIPE_RUNTIME_TEST_SUPPORT_H
