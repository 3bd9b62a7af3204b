// Plan JSON, trace JSON, SVG and table contents.
#include "partitioner/GraphText.h"
#include "partitioner/Output.h"
#include "partitioner/ProblemJson.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace partitioner {
namespace {

Problem tinyProblem() {
  std::ifstream in(std::string(PIPE_PARTITIONER_TEST_DATA) + "/tiny_problem.json");
  return readProblemJson(in, "tiny");
}

TEST(Output, PlanJsonHasTheDocumentedFields) {
  Problem problem = tinyProblem();
  PlanningReport report = plan(problem);
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream out;
  writePlanJson(problem, report, out);
  auto json = nlohmann::json::parse(out.str());
  for (const char *key : {"algorithm", "schedule", "stages", "period_ms", "iteration_ms", "lower_bound_ms",
                          "stage_of", "stage_metrics", "actions", "tried", "gap"})
    EXPECT_TRUE(json.contains(key)) << key;
  EXPECT_EQ(json["stage_of"].size(), problem.layers.size());
  EXPECT_EQ(json["stage_metrics"].size(), json["stages"].get<size_t>());
  for (const auto &stage : json["stage_metrics"]) {
    EXPECT_TRUE(stage.contains("time_ms"));
    EXPECT_LE(stage["memory_bytes"].get<double>(), stage["memory_limit_bytes"].get<double>());
  }
  EXPECT_EQ(json["tried"].size(), report.results.size());
  EXPECT_GE(json["period_ms"].get<double>(), json["lower_bound_ms"].get<double>() * (1 - 1e-9));
  // Every rank that holds a stage has SEND/RECV entries and an optimizer step.
  bool sawSend = false, sawRecv = false;
  for (const auto &rank : json["actions"])
    for (const auto &action : rank) {
      const std::string text = action.get<std::string>();
      sawSend |= text.rfind("SEND_", 0) == 0;
      sawRecv |= text.rfind("RECV_", 0) == 0;
    }
  if (json["stages"].get<int>() > 1) {
    EXPECT_TRUE(sawSend);
    EXPECT_TRUE(sawRecv);
  }
}

TEST(Output, InfeasiblePlanJsonNamesTheStageAndBytes) {
  Problem problem = tinyProblem();
  problem.platform.memoryBytesPerGpu = 9e9;
  PlanningReport report = plan(problem);
  EXPECT_EQ(report.best(), nullptr);
  std::ostringstream out;
  writePlanJson(problem, report, out);
  auto json = nlohmann::json::parse(out.str());
  ASSERT_TRUE(json.contains("error"));
  const std::string error = json["error"];
  EXPECT_NE(error.find("infeasible"), std::string::npos) << error;
  EXPECT_NE(error.find("GB"), std::string::npos) << error;
  EXPECT_NE(error.find("limit 9.00 GB"), std::string::npos) << error;
}

TEST(Output, TraceSvgAndTable) {
  Problem problem = tinyProblem();
  PlanningReport report = plan(problem);
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream trace, svg, table;
  writeTraceJson(problem, *report.best(), trace);
  auto json = nlohmann::json::parse(trace.str());
  size_t slices = 0;
  for (const auto &event : json["traceEvents"])
    if (event["ph"] == "X" && event["pid"] == 0)
      ++slices;
  EXPECT_EQ(slices, report.best()->simulation.timeline.size());
  writeSvg(problem, *report.best(), svg);
  EXPECT_NE(svg.str().find("<svg"), std::string::npos);
  EXPECT_NE(svg.str().find("<rect"), std::string::npos);
  writeTable(problem, report, table);
  for (const PlanResult &r : report.results)
    EXPECT_NE(table.str().find(r.algorithm), std::string::npos) << r.algorithm;
  EXPECT_NE(table.str().find("gap to bound"), std::string::npos);
}

} // namespace
} // namespace partitioner
