// libFuzzer harness: `pipe-plan --replay` on arbitrary plan JSON, against a
// fixed four-layer DAG on two GPUs. Every input replays or is a
// partitioner::Error (a missing node, a stage out of range, a wrong type).
#include "partitioner/Problem.h"
#include "partitioner/Output.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

using namespace partitioner;

namespace {
const char *const kProblem = R"({
 "name": "fuzz",
 "layers": [
  {"name": "embed", "forward_ms": 1, "backward_ms": 2, "parameter_bytes": "2GB", "saved_bytes": 1e8, "output_bytes": 1e7},
  {"name": "left", "forward_ms": 3, "backward_ms": 6, "parameter_bytes": 1e9, "saved_bytes": 2e8, "output_bytes": 1e7},
  {"name": "right", "forward_ms": 3, "backward_ms": 6, "parameter_bytes": 1e9, "saved_bytes": 2e8, "output_bytes": 1e7},
  {"name": "head", "forward_ms": 2, "backward_ms": 4, "parameter_bytes": "2GB", "saved_bytes": 1e8}
 ],
 "tensors": [
  {"producer": 0, "consumers": [1, 2], "bytes": 1e7},
  {"producer": 1, "consumers": [3], "bytes": 1e7},
  {"producer": 2, "consumers": [3], "bytes": 1e7}
 ],
 "platform": {"gpus": 2, "memory_bytes_per_gpu": "24GB"},
 "training": {"microbatches": 4}
})";
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const Problem problem = [] {
    std::istringstream in(kProblem);
    Expected<Problem> read = readProblemJson(in, "fuzz.json");
    if (!read) {
      std::fprintf(stderr, "the harness's problem does not read: %s\n", read.error().c_str());
      std::abort();
    }
    return *read;
  }();
  // Any bytes: a replay or an error as a value, never a crash or a throw.
  (void)replayPlan(problem, std::string(reinterpret_cast<const char *>(data), size));
  return 0;
}
