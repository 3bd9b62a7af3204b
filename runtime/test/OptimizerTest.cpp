//===- OptimizerTest.cpp - pipe_update against torch.optim -----------------===//
//
// data/optimizer_fixture.json holds torch.optim's parameter values after each
// of 4 steps of SGD, SGD with momentum, Adam and AdamW (with and without
// weight decay) from fixed values and gradients (data/make_optimizer_fixture.py);
// the runtime must reproduce them through pipe_accumulate_grad + pipe_update.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace piperun;
using namespace piperun::test;
using json = nlohmann::json;

namespace {

json fixture() {
  std::ifstream in(std::string(PIPE_RUNTIME_TEST_DATA) + "/data/optimizer_fixture.json");
  return json::parse(in);
}

class TorchOptimizer : public ::testing::TestWithParam<int> {};

TEST_P(TorchOptimizer, MatchesEveryStep) {
  const json c = fixture()["cases"][GetParam()];
  SCOPED_TRACE(c["name"].get<std::string>());
  const std::vector<float> start = c["start"].get<std::vector<float>>();
  const int64_t n = static_cast<int64_t>(start.size());
  pipe_rank *r = pipe_rank_create_standalone();
  pipe_set_optimizer(r, c["kind"], c["lr"], c["momentum"], c["beta1"], c["beta2"], c["eps"],
                     c["weight_decay"]);
  pipe_declare_param(r, 0, "p", PIPE_F32, PIPE_INTS(n), PIPE_SOURCE_INLINE, nullptr, 0, -1, 1, 0);
  setValues(pipe_param(r, 0), start);
  const int kind = c["kind"];
  EXPECT_EQ(pipe_memory_live(r, PIPE_MEM_OPTIMIZER), n * 4 *
                                                         (kind == PIPE_MOMENTUM ? 1
                                                          : kind >= PIPE_ADAM   ? 2
                                                                                : 0));
  for (size_t step = 0; step < c["grads"].size(); ++step) {
    pipe_step_begin(r);
    pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(n), PIPE_MEM_WORKSPACE);
    std::vector<float> grad = c["grads"][step].get<std::vector<float>>();
    // Two halves, as two micro-batches would accumulate them.
    std::vector<float> half(grad.size());
    for (size_t i = 0; i < grad.size(); ++i)
      half[i] = grad[i] * 0.5f;
    setValues(g, half);
    pipe_accumulate_grad(r, 0, g);
    pipe_accumulate_grad(r, 0, g);
    pipe_free(r, g);
    pipe_update(r, 0);
    pipe_step_end(r);
    std::vector<float> got = valuesOf(pipe_param(r, 0));
    std::vector<float> expected = c["expected"][step].get<std::vector<float>>();
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(got[i], expected[i], 1e-6 * std::fabs(expected[i]) + 1e-7)
          << "step " << step + 1 << ", element " << i;
  }
  pipe_rank_destroy(r);
}

std::string caseName(const ::testing::TestParamInfo<int> &info) {
  return fixture()["cases"][info.param]["name"].get<std::string>();
}

INSTANTIATE_TEST_SUITE_P(Cases, TorchOptimizer, ::testing::Range(0, 8), caseName);

TEST(Optimizer, RefusesWhatTorchWouldNotDo) {
  pipe_rank *r = pipe_rank_create_standalone();
  EXPECT_NE(failureOf([&] {
              pipe_set_optimizer(r, 9, 0.1, 0, 0.9, 0.999, 1e-8, 0);
            }).find("unknown optimizer kind 9"),
            std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_set_optimizer(r, PIPE_ADAM, 0.1, 0, 1.0, 0.999, 1e-8, 0);
            }).find("betas"),
            std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_declare_param(r, 0, "w", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_INLINE, nullptr, 0,
                                 -1, 1, 0);
            }).find("before pipe_set_optimizer"),
            std::string::npos);
  pipe_rank_destroy(r);

  RunSettings settings;
  settings.ranks = 2;
  pipe_rank *user = createRank(settings, 1);
  pipe_set_optimizer(user, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(user, 0, "w", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_INLINE, nullptr, 0, -1, 1,
                     0);
  pipe_declare_param(user, 1, "k", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_INLINE, nullptr, 0, -1, 0,
                     1);
  EXPECT_NE(failureOf([&] { pipe_update(user, 0); }).find("owned by rank 0"), std::string::npos);
  EXPECT_NE(failureOf([&] { pipe_update(user, 1); }).find("not trainable"), std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_set_optimizer(user, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
            }).find("after parameter w was declared"),
            std::string::npos);
  pipe_rank_destroy(user);
}

} // namespace
