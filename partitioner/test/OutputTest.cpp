// Plan JSON, trace JSON, SVG and table contents.
#include "partitioner/Problem.h"
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/Problem.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>

namespace partitioner {
namespace {

Problem tinyProblem() {
  std::ifstream in(std::string(PIPE_PARTITIONER_TEST_DATA) + "/tiny_problem.json");
  return orThrow(readProblemJson(in, "tiny"));
}

TEST(Output, PlanJsonHasTheDocumentedFields) {
  Problem problem = tinyProblem();
  PlanningReport report = planOrThrow(problem);
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream out;
  writePlanJson(problem, report, out);
  auto json = nlohmann::json::parse(out.str());
  for (const char *key : {"algorithm", "schedule", "stages", "period_ms", "iteration_ms",
                          "lower_bound_ms", "stage_of", "stage_metrics", "actions", "tried", "gap",
                          "objective", "gpus_used", "best_by_iteration"})
    EXPECT_TRUE(json.contains(key)) << key;
  EXPECT_EQ(json["schema_version"], kPlanSchemaVersion);
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
  PlanningReport report = planOrThrow(problem);
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
  PlanningReport report = planOrThrow(problem);
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream trace, svg, table;
  writeTraceJson(problem, *report.best(), trace);
  auto json = nlohmann::json::parse(trace.str());
  size_t slices = 0;
  for (const auto &event : json["traceEvents"])
    if (event["ph"] == "X" && event["pid"] == 0)
      ++slices;
  EXPECT_EQ(slices, report.best()->simulation.timeline.size());
  // Every track is named: one compute track per GPU, one per link direction.
  std::map<std::pair<int, int>, std::string> tracks;
  for (const auto &event : json["traceEvents"])
    if (event["ph"] == "M" && event["name"] == "thread_name")
      tracks[std::make_pair(event["pid"].get<int>(), event["tid"].get<int>())] =
          event["args"]["name"];
  for (int g = 0; g < problem.platform.gpus; ++g)
    EXPECT_EQ(tracks[std::make_pair(0, g)], "GPU " + std::to_string(g) + " compute");
  size_t transfers = 0;
  for (const auto &event : json["traceEvents"])
    if (event["ph"] == "X" && event["pid"] == 1) {
      ++transfers;
      const std::string &track = tracks[std::make_pair(1, event["tid"].get<int>())];
      EXPECT_EQ(track.rfind("link ", 0), 0u) << track;
      EXPECT_EQ(event["name"].get<std::string>().rfind("SEND_", 0), 0u);
    }
  EXPECT_EQ(transfers, report.best()->simulation.transfers.size());
  EXPECT_GT(transfers, 0u);
  // The SVG has a legend, one labelled row per GPU and a time axis in ms.
  writeSvg(problem, *report.best(), svg);
  const std::string text = svg.str();
  EXPECT_NE(text.find("<svg"), std::string::npos);
  for (const char *label : {"F forward", "B backward", "W weight gradient", "transfer", "idle",
                            ">GPU 0<", ">GPU 1<", "time (ms) of one iteration", ">0<"})
    EXPECT_NE(text.find(label), std::string::npos) << label;
  writeTable(problem, report, table);
  for (const PlanResult &r : report.results)
    EXPECT_NE(table.str().find(r.algorithm), std::string::npos) << r.algorithm;
  EXPECT_NE(table.str().find("gap to bound"), std::string::npos);
}

} // namespace
} // namespace partitioner
