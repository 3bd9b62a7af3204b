//===- ReportTest.cpp - pipe-run's period, report encoding and program.json -===//
//
// The measured period on hand-made timelines (1F1B's steady state, GPipe's
// fallback, the first step left out), the report's round trip between MPI
// ranks, and program.json's errors.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "ProgramInfo.h"
#include "Report.h"

using namespace piperun;
using namespace piperun::test;

namespace {

ActionRecord action(int32_t kind, int32_t stage, int32_t mb, int64_t step, double start,
                    double end) {
  return ActionRecord{kind, stage, mb, step, start, end};
}

/// One stage's step in 1F1B order on two stages: F0 F1 B0 F2 B1 F3 B2 B3, each
/// action `unit` ms long, starting at `origin`.
std::vector<ActionRecord> firstStageStep(int64_t step, double origin, double unit) {
  const int kinds[] = {0, 0, 1, 0, 1, 0, 1, 1};
  const int mbs[] = {0, 1, 0, 2, 1, 3, 2, 3};
  std::vector<ActionRecord> actions;
  for (int i = 0; i < 8; ++i)
    actions.push_back(action(kinds[i] == 0 ? PIPE_ACTION_FORWARD : PIPE_ACTION_BACKWARD, 0, mbs[i],
                             step, origin + i * unit, origin + (i + 1) * unit));
  return actions;
}

TEST(MeasuredPeriod, SteadyStateGapsOfOneFOneB) {
  RankReport report;
  // Step 0 is slow (left out). In step 1 (1.5 ms actions) F1 anchors the steady
  // state, and F2 and F3 each start two actions (3 ms) after the forward before.
  for (const ActionRecord &a : firstStageStep(0, 0, 5))
    report.actions.push_back(a);
  for (const ActionRecord &a : firstStageStep(1, 100, 1.5))
    report.actions.push_back(a);
  std::optional<MeasuredPeriod> period = measurePeriod({report});
  ASSERT_TRUE(period.has_value());
  EXPECT_TRUE(period->steady);
  EXPECT_EQ(period->gaps, 2);
  EXPECT_DOUBLE_EQ(period->ms, 3.0) << "(F3 - F1) / 2 = (107.5 - 101.5) / 2";
}

TEST(MeasuredPeriod, GpipeHasNoSteadyStateAndAveragesEveryGap) {
  RankReport report;
  for (int mb = 0; mb < 4; ++mb)
    report.actions.push_back(action(PIPE_ACTION_FORWARD, 0, mb, 0, mb * 2.0, mb * 2.0 + 1));
  for (int mb = 0; mb < 4; ++mb)
    report.actions.push_back(action(PIPE_ACTION_BACKWARD, 0, mb, 0, 10 + mb, 11 + mb));
  std::optional<MeasuredPeriod> period = measurePeriod({report});
  ASSERT_TRUE(period.has_value());
  EXPECT_FALSE(period->steady);
  EXPECT_EQ(period->gaps, 3);
  EXPECT_DOUBLE_EQ(period->ms, 2.0);
}

TEST(MeasuredPeriod, NoneWithOneForwardPerStep) {
  RankReport report;
  report.actions.push_back(action(PIPE_ACTION_FORWARD, 0, 0, 0, 0, 1));
  report.actions.push_back(action(PIPE_ACTION_BACKWARD, 0, 0, 0, 1, 2));
  EXPECT_FALSE(measurePeriod({report}).has_value());
}

TEST(Report, RoundTripsBetweenRanks) {
  RankReport report;
  report.rank = 3;
  report.peak = {1, 2, 3, 4, 5, 6, 7};
  report.peakTotal = 20;
  report.waitMs = 1.25;
  report.steps.push_back({2, 1.5, 2.5, true, 0.75});
  report.actions.push_back(action(PIPE_ACTION_BACKWARD_WEIGHT, 1, 2, 2, 1.5, 1.75));
  report.nodes.push_back({4, "fc1", 0.5, 8});
  RankReport back = decodeReport(encodeReport(report));
  EXPECT_EQ(back.rank, 3);
  EXPECT_EQ(back.peak, report.peak);
  EXPECT_EQ(back.peakTotal, 20);
  EXPECT_EQ(back.waitMs, 1.25);
  ASSERT_EQ(back.steps.size(), 1u);
  EXPECT_EQ(back.steps[0].loss, 0.75);
  EXPECT_TRUE(back.steps[0].hasLoss);
  ASSERT_EQ(back.actions.size(), 1u);
  EXPECT_EQ(actionName(back.actions[0]), "W2@s1");
  ASSERT_EQ(back.nodes.size(), 1u);
  EXPECT_EQ(back.nodes[0].name, "fc1");
  EXPECT_EQ(back.nodes[0].calls, 8);
}

TEST(Report, BytesReadLikeTheMemoryModel) {
  EXPECT_EQ(formatBytes(576), "576 B");
  EXPECT_EQ(formatBytes(1152), "1.12 KiB");
  EXPECT_EQ(formatBytes(3.5 * 1024 * 1024 * 1024), "3.50 GiB");
}

TEST(ProgramInfo, ReadsTheFieldsAndResolvesTheModel) {
  std::string dir = scratchDir();
  writeFile(dir + "/program.json", R"({"schema_version": 1, "model": "m.onnx", "ranks": 2,
    "microbatches": 4, "micro_batch_size": 2, "loss": "cross-entropy",
    "inputs": [{"index": 0, "name": "x", "dtype": "i64", "shape": [2, 32], "range": 256}],
    "labels": [], "parameters": [{"id": 0, "name": "w", "owner_rank": 1}],
    "predicted": {"period_ms": 12.5, "ranks": [{"rank": 1, "memory": {"saved": 4096}}]}})");
  ProgramInfo info = readProgramInfo(dir);
  EXPECT_EQ(info.ranks, 2);
  EXPECT_EQ(info.microbatches, 4);
  EXPECT_EQ(info.model, dir + "/m.onnx");
  EXPECT_EQ(info.loss, "cross-entropy");
  ASSERT_EQ(info.inputs.size(), 1u);
  EXPECT_EQ(info.inputs[0].dtype, PIPE_I64);
  EXPECT_EQ(info.inputs[0].range, 256);
  EXPECT_EQ(info.parameters.at(0).ownerRank, 1);
  EXPECT_EQ(*info.predictedPeriodMs, 12.5);
  EXPECT_EQ(info.predictedMemory.at(1).at("saved"), 4096);
}

TEST(ProgramInfo, ErrorsNameTheFileAndTheField) {
  std::string dir = scratchDir();
  auto errorOf = [&](const std::string &text) {
    writeFile(dir + "/program.json", text);
    try {
      readProgramInfo(dir);
    } catch (const std::exception &e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(errorOf("{ranks: 2").find(dir + "/program.json: not valid JSON"), std::string::npos);
  EXPECT_NE(errorOf(R"({"microbatches": 4})").find("'ranks' not found"), std::string::npos);
  EXPECT_NE(errorOf(R"({"ranks": 0})").find("ranks must be at least 1"), std::string::npos);
  EXPECT_NE(errorOf(R"({"ranks": 1, "inputs": [{"index": 0, "dtype": "f8", "shape": [1]}]})")
                .find("inputs[0]: unknown dtype 'f8'"),
            std::string::npos);
  EXPECT_NE(errorOf(R"({"schema_version": 2, "ranks": 1})").find("schema_version 2"),
            std::string::npos);
}

} // namespace
