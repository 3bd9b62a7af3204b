// libFuzzer harness: the partitioner's readers (problem JSON when the input
// starts with '{', else a PipeDream/DAPPLE graph.txt profile). A problem that
// reads must plan, write a problem JSON that reads back to the same problem,
// and write a plan JSON that replays to the same figures; anything else must
// be a partitioner::Error. Planning is skipped on problems too large to plan
// within a fuzzing iteration (the readers still run on them).
#include "partitioner/Output.h"
#include "partitioner/Problem.h"

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
  std::istringstream in(text);
  Expected<Problem> read = json ? readProblemJson(in, "fuzz.json") : readGraphText(in, "fuzz.txt");
  if (!read)
    return 0;
  const Problem &problem = *read;
  // The writer's output reads back.
  std::ostringstream written;
  writeProblemJson(problem, written);
  std::istringstream writtenIn(written.str());
  Expected<Problem> again = readProblemJson(writtenIn, "written.json");
  if (!again)
    fail("a written problem does not read back: " + again.error());
  std::ostringstream rewritten;
  writeProblemJson(*again, rewritten);
  if (rewritten.str() != written.str())
    fail("a problem JSON changes when read and written again");

  if (problem.layers.size() > 48 || problem.platform.gpus > 8 ||
      problem.training.microbatches > 64)
    return 0;
  PlanOptions options;
  options.algorithms = {"uniform", "balanced", "pipedream", "madpipe"};
  Expected<PlanningReport> planned = plan(problem, options);
  if (!planned)
    return 0; // a cycle, a schedule that does not apply
  const PlanningReport &report = *planned;
  std::ostringstream table, planJson;
  writeTable(problem, report, table, /*timings=*/false);
  writePlanJson(problem, report, planJson, /*timings=*/false);
  const PlanResult *best = report.best();
  if (!best)
    return 0;
  Expected<ReplayCheck> check = replayPlan(problem, planJson.str());
  if (!check)
    fail("a written plan does not replay: " + check.error());
  if (!check->ok())
    fail("a written plan replays differently: " + check->mismatches.front());
  return 0;
}
