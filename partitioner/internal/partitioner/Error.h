// The one exception type of the partitioner's internals: every bad input (malformed
// file, cycle, unknown option) is an Error whose message names the node/stage/bytes.
// It never crosses the public headers: there, errors are values (Problem.h).
#ifndef PARTITIONER_ERROR_H
#define PARTITIONER_ERROR_H

#include "partitioner/Problem.h"

#include <stdexcept>
#include <string>

namespace partitioner {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

/// The value of a public function's result, or its error thrown as Error: how
/// the partitioner's own code, which reports errors by throwing, calls the public
/// functions (Problem.h, Planner.h, Output.h), which return them as values.
template <typename T> T orThrow(Expected<T> result) {
  if (!result)
    throw Error(result.error());
  return std::move(*result);
}
inline void orThrow(const Status &status) {
  if (!status)
    throw Error(status.error);
}

/// Runs `body`, which may throw Error, and returns its value or the error as a
/// value: the public functions are built this way on the throwing internals.
template <typename Body> auto catchErrors(Body &&body) -> Expected<decltype(body())> {
  try {
    return body();
  } catch (const Error &e) {
    return Expected<decltype(body())>::failure(e.what());
  }
}
template <typename Body> Status catchErrorsStatus(Body &&body) {
  try {
    body();
    return Status{};
  } catch (const Error &e) {
    return Status::failure(e.what());
  }
}

} // namespace partitioner

#endif
