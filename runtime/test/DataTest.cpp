//===- DataTest.cpp - synthetic and .npz micro-batch data ------------------===//
//
// Synthetic data: reproducible per (seed, step, micro-batch, stream), N(0, 1)
// floats and in-range integers. .npz data: micro-batch k is rows [k*b,(k+1)*b),
// per-step arrays advance with the step, and mismatches are named.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "DataSource.h"
#include "Npz.h"
#include "pipe_runtime.h"

#include <cmath>
#include <cstring>

using namespace piperun;
using namespace piperun::test;

namespace {

std::vector<float> draw(const RunSettings &settings, int64_t steps, int mb, int index) {
  pipe_rank *r = createRank(settings, 0);
  for (int64_t s = 0; s < steps; ++s) {
    pipe_step_begin(r);
    pipe_step_end(r);
  }
  pipe_tensor *t = pipe_input(r, mb, index, PIPE_F32, PIPE_INTS(50, 40), 0);
  std::vector<float> values = valuesOf(t);
  pipe_free(r, t);
  pipe_rank_destroy(r);
  return values;
}

TEST(SyntheticData, ReproducibleAndKeyedBySeedStepMicrobatchIndex) {
  RunSettings settings;
  settings.seed = 11;
  std::vector<float> base = draw(settings, 0, 1, 0);
  EXPECT_EQ(draw(settings, 0, 1, 0), base);
  EXPECT_NE(draw(settings, 1, 1, 0), base) << "step";
  EXPECT_NE(draw(settings, 0, 2, 0), base) << "micro-batch";
  EXPECT_NE(draw(settings, 0, 1, 1), base) << "input index";
  settings.seed = 12;
  EXPECT_NE(draw(settings, 0, 1, 0), base) << "seed";
}

TEST(SyntheticData, FloatsAreStandardNormal) {
  RunSettings settings;
  std::vector<float> v = draw(settings, 0, 0, 0);
  double sum = 0, squares = 0;
  int beyondTwo = 0;
  for (float x : v) {
    sum += x;
    squares += double(x) * x;
    beyondTwo += std::fabs(x) > 2;
  }
  double mean = sum / v.size(), variance = squares / v.size() - mean * mean;
  EXPECT_LT(std::fabs(mean), 0.08);
  EXPECT_NEAR(variance, 1.0, 0.1);
  EXPECT_NEAR(beyondTwo / double(v.size()), 0.0455, 0.015) << "a normal's tails, not a uniform's";
}

TEST(SyntheticData, IntegersStayInRangeAndLabelsDifferFromInputs) {
  pipe_rank *r = pipe_rank_create_standalone();
  pipe_tensor *ids = pipe_input(r, 0, 0, PIPE_I64, PIPE_INTS(1000), 7);
  pipe_tensor *labels = pipe_label(r, 0, 0, PIPE_I64, PIPE_INTS(1000), 7);
  std::vector<int> counts(7);
  for (int i = 0; i < 1000; ++i) {
    int64_t v = static_cast<int64_t *>(ids->data)[i];
    ASSERT_GE(v, 0);
    ASSERT_LT(v, 7);
    ++counts[v];
  }
  for (int c : counts)
    EXPECT_GT(c, 100);
  EXPECT_NE(std::memcmp(ids->data, labels->data, 8000), 0);
  pipe_free(r, ids);
  pipe_free(r, labels);
  pipe_rank_destroy(r);
}

class NpzDataTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = scratchDir();
    NpyArray input; // one mini-batch of 2 micro-batches of [2, 3]: values 0..11
    input.name = "input_0";
    input.shape = {4, 3};
    std::vector<float> values(12);
    for (int i = 0; i < 12; ++i)
      values[i] = float(i);
    input.bytes.assign(reinterpret_cast<char *>(values.data()),
                       reinterpret_cast<char *>(values.data()) + 48);
    NpyArray label; // per step: [3 steps, 4] i64
    label.name = "label_0";
    label.dtype = PIPE_I64;
    label.shape = {3, 4};
    std::vector<int64_t> ids(12);
    for (int i = 0; i < 12; ++i)
      ids[i] = 100 + i;
    label.bytes.assign(reinterpret_cast<char *>(ids.data()),
                       reinterpret_cast<char *>(ids.data()) + 96);
    writeNpz(dir + "/d.npz", {input, label});
    data = std::make_shared<NpzData>(dir + "/d.npz", 2);
  }
  std::string dir;
  std::shared_ptr<NpzData> data;
};

TEST_F(NpzDataTest, MicrobatchRowsAndSteps) {
  RunSettings settings;
  settings.microbatches = 2;
  settings.data = data;
  pipe_rank *r = createRank(settings, 0);
  pipe_tensor *x1 = pipe_input(r, 1, 0, PIPE_F32, PIPE_INTS(2, 3), 0);
  EXPECT_EQ(valuesOf(x1), (std::vector<float>{6, 7, 8, 9, 10, 11}));
  pipe_free(r, x1);
  pipe_step_begin(r);
  pipe_step_end(r);
  pipe_step_begin(r);
  pipe_step_end(r);
  pipe_tensor *x0 = pipe_input(r, 0, 0, PIPE_F32, PIPE_INTS(2, 3), 0);
  EXPECT_EQ(valuesOf(x0), (std::vector<float>{0, 1, 2, 3, 4, 5})) << "the same every step";
  pipe_tensor *y = pipe_label(r, 1, 0, PIPE_I64, PIPE_INTS(2), 0);
  EXPECT_EQ(static_cast<int64_t *>(y->data)[0], 100 + 2 * 4 + 2) << "step 2, rows 2..3";
  EXPECT_EQ(static_cast<int64_t *>(y->data)[1], 100 + 2 * 4 + 3);
  pipe_free(r, x0);
  pipe_free(r, y);
  pipe_rank_destroy(r);
}

TEST_F(NpzDataTest, MismatchesAreNamed) {
  const std::string file = dir + "/d.npz";
  EXPECT_EQ(data->check(DataRole::Input, 0, PIPE_F32, {2, 3}, 10), "");
  EXPECT_EQ(data->check(DataRole::Input, 0, PIPE_F32, {2, 4}, 10),
            file + ": array input_0 has shape [4, 3], expected [4, 4] or [steps, 4, 4] "
                   "(2 micro-batches of [2, 4])");
  EXPECT_EQ(data->check(DataRole::Input, 0, PIPE_F64, {2, 3}, 10),
            file + ": array input_0 is f32, the program expects f64 [4, 3]");
  EXPECT_EQ(data->check(DataRole::Input, 1, PIPE_F32, {2, 3}, 10),
            file + ": no array input_1 (expected f32 [4, 3])");
  EXPECT_EQ(data->check(DataRole::Label, 0, PIPE_I64, {2}, 3), "");
  EXPECT_EQ(data->check(DataRole::Label, 0, PIPE_I64, {2}, 4),
            file + ": array label_0 holds 3 steps, the run takes 4");
  EXPECT_EQ(data->check(DataRole::OutputGrad, 0, PIPE_F32, {2}, 1),
            file + ": no array output_grad_0 (expected f32 [4])");

  RunSettings settings;
  settings.microbatches = 2;
  settings.data = data;
  pipe_rank *r = createRank(settings, 3);
  std::string message = failureOf([&] { pipe_input(r, 0, 0, PIPE_F32, PIPE_INTS(3, 3), 0); });
  EXPECT_EQ(message.rfind("rank 3: " + file + ": array input_0 has shape [4, 3]", 0), 0u)
      << message;
  pipe_rank_destroy(r);
}

} // namespace
