//===- ReportTest.cpp - pipe-run's period, report encoding and program.json -===//
//
// The measured period on hand-made timelines (1F1B's steady state, GPipe's
// fallback, the first step left out), the per-node profile and measured.json
// from hand-made reports, the report's round trip between MPI ranks, and
// program.json's errors.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "ProgramInfo.h"
#include "Report.h"

#include <map>

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
  // Step 0 is slow (left out). In step 1 (1.5 ms actions) the steady state is
  // F2 and F3, after the first backward: two actions (3 ms) apart. B0 waited
  // 4 ms for the last stage's gradient (the pipeline's fill): the gap F1 -> F2
  // holds it and is not steady.
  for (const ActionRecord &a : firstStageStep(0, 0, 5))
    report.actions.push_back(a);
  std::vector<ActionRecord> step = firstStageStep(1, 100, 1.5);
  for (size_t i = 2; i < step.size(); ++i) {
    step[i].startMs += i == 2 ? 0 : 4;
    step[i].endMs += 4;
  }
  step[2].waitMs = 4;
  for (const ActionRecord &a : step)
    report.actions.push_back(a);
  std::optional<MeasuredPeriod> period = measurePeriod({report});
  ASSERT_TRUE(period.has_value());
  EXPECT_TRUE(period->steady);
  EXPECT_EQ(period->gaps, 1);
  EXPECT_DOUBLE_EQ(period->ms, 3.0) << "F3 - F2 = 111.5 - 108.5";
}

TEST(MeasuredPeriod, AForwardStartsWhenItsInputsAreIn) {
  // The second stage of two, F0 B0 F1 B1 F2 B2, 1 ms of work each: F1 begins
  // at 2 ms and waits 2 ms for its activation, F2 begins at 6 ms and waits 4 ms.
  // The steady forwards start at 4 and 10 ms: 6 ms apart, not the 4 ms between
  // their action begins.
  RankReport report;
  const double begins[] = {0, 1, 2, 5, 6, 11};
  const double waits[] = {0, 0, 2, 0, 4, 0};
  for (int i = 0; i < 6; ++i) {
    ActionRecord a = action(i % 2 ? PIPE_ACTION_BACKWARD : PIPE_ACTION_FORWARD, 1, i / 2, 0,
                            begins[i], begins[i] + waits[i] + 1);
    a.waitMs = waits[i];
    report.actions.push_back(a);
  }
  std::optional<MeasuredPeriod> period = measurePeriod({report});
  ASSERT_TRUE(period.has_value());
  EXPECT_TRUE(period->steady);
  EXPECT_EQ(period->gaps, 1);
  EXPECT_DOUBLE_EQ(period->ms, 6.0) << "F2 starts at 6 + 4, F1 at 2 + 2";
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
  report.actions.back().waitMs = 0.125;
  report.nodes.push_back({4, "fc1", 0.5, 8, true, {0.125, 0.25}, {0, 0.125}});
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
  EXPECT_EQ(back.actions[0].waitMs, 0.125);
  ASSERT_EQ(back.nodes.size(), 1u);
  EXPECT_EQ(back.nodes[0].name, "fc1");
  EXPECT_EQ(back.nodes[0].calls, 8);
  EXPECT_TRUE(back.nodes[0].declared);
  EXPECT_EQ(back.nodes[0].forwardMs, (std::vector<double>{0.125, 0.25}));
  EXPECT_EQ(back.nodes[0].backwardMs, (std::vector<double>{0, 0.125}));
}

NodeTime node(const std::string &name, std::vector<double> forward, std::vector<double> backward,
              bool declared = true) {
  NodeTime time;
  time.name = name;
  time.declared = declared;
  time.forwardMs = std::move(forward);
  time.backwardMs = std::move(backward);
  return time;
}

TEST(MeasuredProfile, MedianPerMicroBatchOfTheStepsAfterTheFirst) {
  RankReport rank0, rank1;
  // 2 micro-batches per step; step 0 (100 ms) is left out. fc1's forward per
  // micro-batch in steps 1..3: 1, 3, 2 -> median 2; backward 4, 4, 10 -> 4.
  rank0.nodes.push_back(node("fc1", {100, 2, 6, 4}, {100, 8, 8, 20}));
  // Forward only, and absent from the last step's series.
  rank0.nodes.push_back(node("relu", {100, 1, 1}, {}));
  // Not declared, or never in a forward or backward: not in the profile.
  rank0.nodes.push_back(node("#7", {1, 1, 1, 1}, {}, false));
  rank0.nodes.push_back(node("pipe.update", {}, {}));
  // On two ranks: the mean of the copies.
  rank0.nodes.push_back(node("shape", {0, 2, 2, 2}, {0, 0, 0, 0}));
  rank1.nodes.push_back(node("shape", {0, 4, 4, 4}, {}));
  std::map<std::string, NodeProfile> profile = measureProfile({rank0, rank1}, 2, 4);
  ASSERT_EQ(profile.size(), 3u);
  EXPECT_DOUBLE_EQ(profile["fc1"].forwardMs, 2);
  EXPECT_DOUBLE_EQ(profile["fc1"].backwardMs, 4);
  EXPECT_DOUBLE_EQ(profile["relu"].forwardMs, 0.5) << "median of 0.5, 0.5, 0";
  EXPECT_DOUBLE_EQ(profile["relu"].backwardMs, 0);
  EXPECT_DOUBLE_EQ(profile["shape"].forwardMs, 1.5) << "(2 + 4) / (2 micro-batches x 2 ranks)";
  // One step: that step.
  std::map<std::string, NodeProfile> one = measureProfile({rank0}, 2, 1);
  EXPECT_DOUBLE_EQ(one["fc1"].forwardMs, 50);
  EXPECT_EQ(firstMeasuredStep(1), 0);
  EXPECT_EQ(firstMeasuredStep(2), 1);
}

TEST(MeasuredProfile, IsTheCompilersProfileFormat) {
  ProgramInfo program;
  program.ranks = 2;
  program.microbatches = 4;
  RunFacts facts;
  facts.transport = "mpi";
  facts.threadsPerRank = 3;
  facts.steps = 5;
  facts.blasKernels = "Haswell";
  nlohmann::json document = profileJson({{"fc1", {0.5, 1.25}}}, program, facts);
  EXPECT_EQ(document["ops"]["fc1"]["forward_ms"], 0.5);
  EXPECT_EQ(document["ops"]["fc1"]["backward_ms"], 1.25);
  EXPECT_EQ(document["meta"]["steps_measured"], 4);
  EXPECT_EQ(document["meta"]["threads_per_rank"], 3);
  EXPECT_EQ(document["meta"]["blas_kernels"], "Haswell");
  EXPECT_EQ(document["meta"]["transport"], "mpi");
  EXPECT_EQ(document["meta"]["microbatches"], 4);
}

TEST(Summary, OneComputationForTheReportAndMeasuredJson) {
  ProgramInfo program;
  program.ranks = 1;
  program.predictedPeriodMs = 2.0;
  program.predictedMemory[0]["saved"] = 4096;
  RankReport report;
  report.peak = {1, 2, 3, 4096, 5, 6, 0};
  report.peakTotal = 4200;
  report.waitMs = 3;
  report.steps = {{0, 0, 10, true, 1.5}, {1, 10, 14, true, 1.25}, {2, 14, 20, false, 0}};
  report.actions = firstStageStep(1, 10, 0.5);
  RunFacts facts;
  facts.steps = 3;
  RunSummary summary = summarize(program, {report}, facts);
  ASSERT_EQ(summary.ranks.size(), 1u);
  ASSERT_EQ(summary.ranks[0].memory.size(), 8u);
  EXPECT_EQ(summary.ranks[0].memory[3].category, "saved");
  EXPECT_EQ(*summary.ranks[0].memory[3].predictedBytes, 4096);
  EXPECT_EQ(summary.ranks[0].memory[7].category, "total");
  EXPECT_DOUBLE_EQ(summary.ranks[0].waitMsPerStep, 1);
  EXPECT_DOUBLE_EQ(*summary.iterationMs, 5) << "mean of steps 1 and 2: 4 and 6 ms";
  nlohmann::json json = summaryJson(summary);
  EXPECT_EQ(json["schema_version"], 1);
  EXPECT_EQ(json["ranks"][0]["memory"]["saved"]["measured_bytes"], 4096);
  EXPECT_EQ(json["ranks"][0]["memory"]["saved"]["predicted_bytes"], 4096);
  EXPECT_EQ(json["ranks"][0]["memory"]["total"]["predicted_bytes"], nullptr);
  EXPECT_EQ(json["period_ms"]["measured"], summary.period->ms);
  EXPECT_EQ(json["period_ms"]["predicted"], 2.0);
  EXPECT_EQ(json["iteration_ms"]["predicted"], nullptr);
  EXPECT_EQ(json["loss"], nlohmann::json::parse("[1.5, 1.25, null]"));
  EXPECT_EQ(json["transport"], "threads");
}

TEST(Report, BytesReadLikeTheMemoryModel) {
  EXPECT_EQ(formatBytes(576), "576 B");
  EXPECT_EQ(formatBytes(1152), "1.12 KiB");
  EXPECT_EQ(formatBytes(3.5 * 1024 * 1024 * 1024), "3.50 GiB");
}

TEST(ProgramInfo, ReadsTheFieldsAndResolvesTheModel) {
  std::string dir = scratchDir();
  writeFile(dir + "/program.json", R"({"schema_version": 1, "model": "m.onnx", "ranks": 2,
    "microbatches": 4, "micro_batch_size": 2, "loss": "cross_entropy",
    "inputs": [{"index": 0, "name": "x", "dtype": "i64", "shape": [2, 32], "range": 256}],
    "labels": [], "parameters": [{"id": 0, "name": "w", "owner_rank": 1}],
    "predicted": {"period_ms": 12.5, "ranks": [{"rank": 1, "memory": {"saved": 4096}}]}})");
  ProgramInfo info = readProgramInfo(dir);
  EXPECT_EQ(info.ranks, 2);
  EXPECT_EQ(info.microbatches, 4);
  EXPECT_EQ(info.model, dir + "/m.onnx");
  EXPECT_EQ(info.loss, "cross_entropy");
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
  auto expectError = [&](const std::string &text, const std::string &message) {
    std::string error = errorOf(text);
    EXPECT_NE(error.find(dir + "/program.json"), std::string::npos) << error;
    EXPECT_NE(error.find(message), std::string::npos) << "for " << text << "\n got: " << error;
  };
  expectError(R"({"microbatches": 4})", "program.json: ranks is missing");
  expectError(R"({"ranks": 0})", "program.json: ranks is 0, outside 1..4096");
  // Beyond the partitioner's limits: refused at once, not a run of 10^8 ranks.
  expectError(R"({"ranks": 100000000})", "ranks is 100000000, outside 1..4096");
  expectError(R"({"ranks": 2, "microbatches": 16385})", "microbatches is 16385, outside 1..16384");
  expectError(R"({"ranks": 1, "inputs": [{"index": 0, "dtype": "f8", "shape": [1]}]})",
              "inputs[0].dtype is 'f8', not one of f32");
  expectError(R"({"schema_version": 2, "ranks": 1})", "schema_version 2");
  // Strict types: no conversion, no defaults for null, no unknown keys.
  expectError(R"({"ranks": 2.5})", "ranks must be an integer, got 2.5");
  expectError(R"({"ranks": "2"})", "ranks must be an integer, got \"2\"");
  expectError(R"({"ranks": null})", "ranks is null");
  expectError(R"({"ranks": 1, "rankz": 2})", "unknown field \"rankz\"");
  expectError(R"({"ranks": 1, "model": 7})", "model must be a string, got 7");
  expectError(R"({"ranks": 1, "inputs": {"index": 0}})", "inputs must be an array");
  expectError(R"({"ranks": 1, "inputs": [{"index": 0, "dtype": "f32", "shape": [2, -1]}]})",
              "inputs[0].shape[1] is -1, outside 0..");
  expectError(R"({"ranks": 1, "inputs": [{"index": 0, "dtype": "f32", "shape": [1]},
                                          {"index": 0, "dtype": "f32", "shape": [1]}]})",
              "inputs[1].index 0 appears twice");
  expectError(R"({"ranks": 2, "stages": 3, "rank_of_stage": [0, 1]})",
              "rank_of_stage has 2 entries for 3 stages");
  expectError(R"({"ranks": 2, "stages": 2, "rank_of_stage": [0, 2]})",
              "rank_of_stage[1] is 2, outside 0..1");
  expectError(R"({"ranks": 2, "parameters": [{"id": 0, "owner_rank": 5}]})",
              "parameters[0].owner_rank is 5, outside 0..1");
  expectError(R"({"ranks": 1, "optimizer": {"kind": "lion"}})", "optimizer.kind is 'lion'");
  expectError(R"({"ranks": 1, "optimizer": {"kind": "sgd", "lr": -1}})",
              "optimizer.lr is negative");
  expectError(R"({"ranks": 2, "predicted": {"ranks": [{"rank": 2}]}})",
              "predicted.ranks[0].rank is 2, outside 0..1");
  expectError(R"({"ranks": 1, "predicted": {"ranks": [{"rank": 0, "memory": {"saved": -4}}]}})",
              "predicted.ranks[0].memory.saved is negative");
  expectError(R"({"ranks": 1, "predicted": {"ranks": [{"rank": 0, "memory": {"savd": 4}}]}})",
              "unknown field \"savd\"");
  expectError(R"({"ranks": 1, "predicted": {"period_ms": "12ms"}})",
              "predicted.period_ms must be a number");
  expectError("[1, 2]", "must be a JSON object");
}

TEST(ProgramInfo, ReadsWhatPipeOptWritesForTheShippedPrograms) {
  for (const char *program : {"relay", "mlp2"}) {
    ProgramInfo info = readProgramInfo(std::string(PIPE_RUNTIME_TEST_DATA) + "/programs/" + program);
    EXPECT_EQ(info.ranks, 2) << program;
    EXPECT_EQ(info.predictedMemory.size(), 2u) << program;
  }
}

} // namespace
