// libFuzzer harness: the partitioner's readers (problem JSON when the input
// starts with '{', else a PipeDream/DAPPLE graph.txt profile). A problem that
// reads must plan, write a problem JSON that reads back to the same problem,
// and write a plan JSON that replays to the same figures; anything else must
// be a partitioner::Error. Planning is skipped on problems too large to plan
// within a fuzzing iteration (the readers still run on them).
#include "partitioner/Error.h"
#include "partitioner/GraphText.h"
#include "partitioner/Output.h"
#include "partitioner/ProblemJson.h"
#include "partitioner/Replay.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

using namespace partitioner;

namespace {
[[noreturn]] void fail(const std::string &what) {
  std::fprintf(stderr, "property violated: %s\n", what.c_str());
  std::abort();
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  const bool json = text.find_first_not_of(" \t\r\n") != std::string::npos &&
                    text[text.find_first_not_of(" \t\r\n")] == '{';
  Problem problem;
  try {
    std::istringstream in(text);
    problem = json ? readProblemJson(in, "fuzz.json") : readGraphText(in, "fuzz.txt");
  } catch (const Error &) {
    return 0;
  }
  // The writer's output reads back.
  std::ostringstream written;
  writeProblemJson(problem, written);
  Problem again;
  try {
    std::istringstream in(written.str());
    again = readProblemJson(in, "written.json");
  } catch (const Error &error) {
    fail(std::string("a written problem does not read back: ") + error.what());
  }
  std::ostringstream rewritten;
  writeProblemJson(again, rewritten);
  if (rewritten.str() != written.str())
    fail("a problem JSON changes when read and written again");

  if (problem.layers.size() > 48 || problem.platform.gpus > 8 ||
      problem.training.microbatches > 64)
    return 0;
  PlanOptions options;
  options.algorithms = {"uniform", "balanced", "pipedream", "madpipe"};
  PlanningReport report;
  try {
    report = plan(problem, options);
  } catch (const Error &) {
    return 0; // a cycle, a schedule that does not apply
  }
  std::ostringstream table, planJson;
  writeTable(problem, report, table, /*timings=*/false);
  writePlanJson(problem, report, planJson, /*timings=*/false);
  const PlanResult *best = report.best();
  if (!best)
    return 0;
  ReplayCheck check;
  try {
    check = replayPlan(problem, planJson.str());
  } catch (const Error &error) {
    fail(std::string("a written plan does not replay: ") + error.what());
  }
  if (!check.ok())
    fail("a written plan replays differently: " + check.mismatches.front());
  return 0;
}
