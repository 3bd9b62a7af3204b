// Bad input is an Error naming the file and field, never a default, a wrapped
// value or a crash: the problem JSON's types and ranges, graph.txt ids, the
// limits of Problem::finalize, text that is not UTF-8, malformed plan JSON.
#include "partitioner/Error.h"
#include "partitioner/Problem.h"
#include "partitioner/Output.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"
#include "partitioner/Problem.h"
#include "partitioner/Output.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <functional>
#include <sstream>

namespace partitioner {
namespace {

std::string errorOf(const std::function<void()> &action) {
  try {
    action();
  } catch (const Error &error) {
    return error.what();
  }
  return "";
}

std::string jsonError(const std::string &text) {
  return errorOf([&] {
    std::istringstream in(text);
    orThrow(readProblemJson(in, "p.json"));
  });
}

const char *const kTwoLayers = R"({"layers": [{"name": "a", "forward_ms": 1}, {"name": "b"}])";

std::string withTwoLayers(const std::string &rest) {
  return std::string(kTwoLayers) + (rest.empty() ? "" : ", " + rest) + "}";
}

TEST(InputValidation, ProblemJsonFieldsAreTyped) {
  struct Case {
    std::string json, expected;
  };
  const Case cases[] = {
      // A unit string where milliseconds belong is not read as bytes.
      {R"({"layers": [{"forward_ms": "1GB"}]})",
       "p.json: layers[0].forward_ms must be a number, got \"1GB\""},
      // 2^40 does not wrap to a valid layer index.
      {withTwoLayers(R"("tensors": [{"producer": 1099511627776, "consumers": [1]}])"),
       "p.json: tensors[0].producer is 1099511627776, outside 0..1"},
      {withTwoLayers(R"("tensors": [{"producer": 0, "consumers": [-1]}])"),
       "p.json: tensors[0].consumers[0] is -1, outside 0..1"},
      // Decimals are not truncated where an integer belongs.
      {withTwoLayers(R"("training": {"microbatches": 2.5})"),
       "p.json: training.microbatches must be an integer, got 2.5"},
      {withTwoLayers(R"("platform": {"gpus": 1e3})"),
       "p.json: platform.gpus must be an integer, got 1000.0"},
      // null is not a default.
      {withTwoLayers(R"("platform": {"gpus": null})"),
       "p.json: platform.gpus is null; give a value or leave the field out"},
      {R"({"layers": [{"saved_bytes": null}]})", "p.json: layers[0].saved_bytes is null"},
      {withTwoLayers(R"("training": {"communication_buffers": "yes"})"),
       "p.json: training.communication_buffers must be true or false, got \"yes\""},
      {R"({"layers": [{"node_ids": [7]}]})", "p.json: layers[0].node_ids[0] must be a string, got 7"},
      {R"({"layers": [{"name": 3}]})", "p.json: layers[0].name must be a string, got 3"},
      // A misspelt field is not silently ignored.
      {R"({"layers": [{"forward_m": 1}]})", "p.json: layers[0]: unknown field \"forward_m\""},
      {withTwoLayers(R"("training": {"micro_batches": 8})"),
       "p.json: training: unknown field \"micro_batches\""},
      {R"({"layers": {}})", "p.json: layers must be an array, got {}"},
      {R"({"layers": [{"parameter_bytes": "many"}]})",
       "p.json: layers[0].parameter_bytes: cannot read 'many' as a size"},
      {withTwoLayers(R"("training": {"microbatches": 100000000})"),
       "p.json: training.microbatches is 100000000, outside 1..16384"},
      {withTwoLayers(R"("platform": {"gpus": 5000})"),
       "p.json: platform.gpus is 5000, outside 1..4096"},
      {R"({"layers": [{"backward_weight_ms": -1}]})",
       "p.json: layers[0].backward_weight_ms must be non-negative"},
      // One document, nothing after it.
      {std::string(kTwoLayers) + "} trailing", "p.json: not valid JSON"},
      // JSON text must be UTF-8.
      {"{\"layers\": [{\"name\": \"a\xff\"}]}", "p.json: not valid JSON"},
      // A node id in two layers would make stage_of ambiguous.
      {R"({"layers": [{"name": "a", "node_ids": ["n"]}, {"name": "b", "node_ids": ["n"]}]})",
       "node id 'n' belongs to layer 0 ('a') and layer 1 ('b')"},
  };
  for (const Case &c : cases) {
    const std::string message = jsonError(c.json);
    EXPECT_NE(message.find(c.expected), std::string::npos)
        << "input: " << c.json << "\nmessage: " << message;
  }
  // A valid document still reads, sizes given as strings included.
  EXPECT_EQ(jsonError(withTwoLayers(R"("platform": {"gpus": 2, "memory_bytes_per_gpu": "16GB"},
      "training": {"microbatches": 4, "communication_buffers": false})")),
            "");
}

TEST(InputValidation, GraphTextIdsOfAnyLengthAndOnlyUtf8) {
  // Ids are ordered by their number, however many digits it has.
  std::istringstream in(
      "node99999999999999999999999 -- Linear -- forward_compute_time=2.0, "
      "backward_compute_time=2.0, activation_size=10.0, parameter_size=10.0\n"
      "node1 -- Input -- forward_compute_time=1.0, backward_compute_time=0.0, "
      "activation_size=10.0, parameter_size=0.0\n"
      "node0002 -- ReLU -- forward_compute_time=1.0, backward_compute_time=1.0, "
      "activation_size=10.0, parameter_size=0.0\n"
      "\tnode1 -- node0002\n\tnode0002 -- node99999999999999999999999\n");
  Problem problem = orThrow(readGraphText(in, "long.txt"));
  ASSERT_EQ(problem.layers.size(), 3u);
  EXPECT_EQ(problem.layers[0].name, "node1");
  EXPECT_EQ(problem.layers[1].name, "node0002");
  EXPECT_EQ(problem.layers[2].name, "node99999999999999999999999");

  std::istringstream bad("node\xff" "5 -- Conv2d -- forward_compute_time=1.0, "
                         "backward_compute_time=1.0, activation_size=1.0, parameter_size=1.0\n");
  EXPECT_EQ(errorOf([&] { orThrow(readGraphText(bad, "bad.txt")); }),
            "bad.txt:1: the line is not valid UTF-8: 'node\\xFF5 -- Conv2d -- "
            "forward_compute_time=1.0, backward_compute_time=1.0, activat'");
}

TEST(InputValidation, Utf8Validation) {
  EXPECT_TRUE(isValidUtf8("plain"));
  EXPECT_TRUE(isValidUtf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  EXPECT_FALSE(isValidUtf8("\xff"));
  EXPECT_FALSE(isValidUtf8("\xc3"));             // truncated
  EXPECT_FALSE(isValidUtf8("\xc0\xaf"));         // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xe0\x80\xaf"));     // overlong, 3 bytes
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));     // a surrogate
  EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80")); // past U+10FFFF
  EXPECT_EQ(printableName("a\xff\n"), "a\\xFF\\x0A");
}

Problem smallProblem() {
  Problem problem;
  for (int i = 0; i < 3; ++i) {
    Layer layer;
    layer.name = "l" + std::to_string(i);
    layer.forwardMs = 1;
    layer.backwardMs = 2;
    layer.outputBytes = 1e6;
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = 2;
  return problem;
}

TEST(InputValidation, FinalizeRefusesWhatWouldNeedUnboundedMemory) {
  Problem problem = smallProblem();
  problem.training.microbatches = 100000000;
  EXPECT_EQ(errorOf([&] { orThrow(problem.finalize()); }),
            "training: micro-batches per iteration must be in 1..16384, got 100000000");
  problem = smallProblem();
  problem.platform.gpus = 4096;
  problem.training.microbatches = 16384;
  EXPECT_EQ(errorOf([&] { orThrow(problem.finalize()); }),
            "training: 4096 GPUs x 16384 micro-batches is more than the limit of 262144 "
            "scheduled (GPU, micro-batch) pairs");
  problem = smallProblem();
  problem.platform.gpus = 0;
  EXPECT_EQ(errorOf([&] { orThrow(problem.finalize()); }),
            "platform: the number of GPUs must be in 1..4096, got 0");
  problem = smallProblem();
  problem.layers[1].nodeIds = {"ok", "bad\xc3"};
  EXPECT_EQ(errorOf([&] { orThrow(problem.finalize()); }),
            "layer 1: node id 'bad\\xC3' is not valid UTF-8");
}

TEST(InputValidation, JsonWritersNeverThrowOnNames) {
  // A problem name from a file path is not UTF-8; the writers replace, not abort.
  Problem problem = smallProblem();
  problem.name = "model\xff.json";
  orThrow(problem.finalize());
  PlanningReport report = planOrThrow(problem);
  ASSERT_NE(report.best(), nullptr);
  std::ostringstream planJson, problemJson, trace;
  EXPECT_NO_THROW(writePlanJson(problem, report, planJson));
  EXPECT_NO_THROW(writeProblemJson(problem, problemJson));
  EXPECT_NO_THROW(writeTraceJson(problem, *report.best(), trace));
  for (const std::string &text : {planJson.str(), problemJson.str(), trace.str()})
    EXPECT_TRUE(nlohmann::json::accept(text)) << text;
  EXPECT_EQ(nlohmann::json::parse(planJson.str())["problem"], "model\xef\xbf\xbd.json");
}

TEST(InputValidation, PlanJsonWithoutTimingsIsTheSameEveryRun) {
  Problem problem = smallProblem();
  orThrow(problem.finalize());
  std::ostringstream first, second;
  writePlanJson(problem, planOrThrow(problem), first, /*timings=*/false);
  writePlanJson(problem, planOrThrow(problem), second, /*timings=*/false);
  EXPECT_EQ(first.str(), second.str());
  EXPECT_EQ(first.str().find("planner_seconds"), std::string::npos);
}

TEST(InputValidation, MalformedPlanJsonIsAnErrorNotAMatch) {
  Problem problem = smallProblem();
  orThrow(problem.finalize());
  std::ostringstream out;
  writePlanJson(problem, planOrThrow(problem), out);
  const nlohmann::json good = nlohmann::json::parse(out.str());
  ASSERT_TRUE(orThrow(replayPlan(problem, out.str())).ok());
  auto replayError = [&](const std::function<void(nlohmann::json &)> &edit) {
    nlohmann::json plan = good;
    edit(plan);
    return errorOf([&] { orThrow(replayPlan(problem, plan.dump())); });
  };
  // A plan with no stages does not "match".
  EXPECT_EQ(replayError([](nlohmann::json &p) {
              p["gpu_of_stage"] = nlohmann::json::array();
              p["stage_metrics"] = nlohmann::json::array();
            }),
            "the plan JSON has no stages (gpu_of_stage is empty)");
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["stage_of"]["l0"] = "0"; }),
            "the plan JSON: stage_of.l0 must be an integer, got \"0\"");
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["stage_of"]["l0"] = 7; }),
            "the plan JSON: stage_of.l0 is 7, outside 0.." +
                std::to_string(good["gpu_of_stage"].size() - 1));
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["gpu_of_stage"][0] = 9; }),
            "the plan JSON: gpu_of_stage[0] is 9, outside 0..1");
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["period_ms"] = nullptr; }),
            "the plan JSON: period_ms is null; give a value or leave the field out");
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["stage_metrics"] = 3; }),
            "the plan JSON: stage_metrics must be an array, got 3");
  EXPECT_EQ(replayError([](nlohmann::json &p) { p["schedule"] = 1; }),
            "the plan JSON: schedule must be a string, got 1");
  // Caps as 1F1B's own rule (2 then 1 alive) replay to the same plan; a limit of 0
  // (PipeDream's stash count on the last stage, which older plans wrote) is read
  // as 1.
  nlohmann::json capped = good;
  capped["allocation"]["in_flight_limit"] = nlohmann::json::array({2, 1});
  EXPECT_TRUE(orThrow(replayPlan(problem, capped.dump())).ok());
  capped["allocation"]["in_flight_limit"] = nlohmann::json::array({2, 0});
  EXPECT_TRUE(orThrow(replayPlan(problem, capped.dump())).ok());
  EXPECT_EQ(errorOf([&] { orThrow(replayPlan(problem, "[1, 2]")); }),
            "the plan JSON must be a JSON object, got [1,2]");
}

} // namespace
} // namespace partitioner
