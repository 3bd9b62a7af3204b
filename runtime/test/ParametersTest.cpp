//===- ParametersTest.cpp - loading parameters, gradients, step checks -----===//
//
// pipe_declare_param reads the model file (raw_data) and external data files
// at their offsets, draws INLINE parameters from the seed (the same on every
// rank), makes gradient and optimizer buffers of the right categories; steps
// zero the gradients and refuse to end with saved or leaked values.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <cmath>
#include <cstring>
#include <filesystem>

using namespace piperun;
using namespace piperun::test;

namespace {

std::string floatBytes(const std::vector<float> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()), values.size() * 4);
}

struct RankWith {
  pipe_rank *r;
  explicit RankWith(const RunSettings &settings, int rank = 0) : r(createRank(settings, rank)) {}
  ~RankWith() { pipe_rank_destroy(r); }
};

TEST(Parameters, LoadFromModelFileAndExternalData) {
  std::string dir = scratchDir();
  // The model file: 8 bytes of header, then w (2x2), then b (2).
  writeFile(dir + "/model.onnx", "HEADER!!" + floatBytes({1, 2, 3, 4}) + floatBytes({-1, -2}));
  std::filesystem::create_directories(dir + "/weights");
  writeFile(dir + "/weights/e.bin", floatBytes({9, 9}) + floatBytes({0.5f, 0.25f, 0.125f}));
  RunSettings settings;
  settings.modelPath = dir + "/model.onnx";
  settings.ranks = 2;
  RankWith rank(settings, 1);
  pipe_rank *r = rank.r;
  pipe_set_optimizer(r, PIPE_ADAM, 0.001, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(r, 0, "w", PIPE_F32, PIPE_INTS(2, 2), PIPE_SOURCE_FILE, nullptr, 8, 16, 1, 1);
  pipe_declare_param(r, 1, "b", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_FILE, nullptr, 24, -1, 1, 0);
  pipe_declare_param(r, 2, "e", PIPE_F32, PIPE_INTS(3), PIPE_SOURCE_EXTERNAL, "weights/e.bin", 8,
                     12, 0, 1);
  EXPECT_EQ(valuesOf(pipe_param(r, 0)), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(valuesOf(pipe_param(r, 1)), (std::vector<float>{-1, -2}));
  EXPECT_EQ(valuesOf(pipe_param(r, 2)), (std::vector<float>{0.5f, 0.25f, 0.125f}));
  EXPECT_EQ(pipe_memory_live(r, PIPE_MEM_PARAMETERS), 16 + 8 + 12);
  EXPECT_EQ(pipe_memory_live(r, PIPE_MEM_GRADIENTS), 16 + 8) << "trainable ones only";
  EXPECT_EQ(pipe_memory_live(r, PIPE_MEM_OPTIMIZER), 2 * 16) << "Adam's moments, owner only";

  std::vector<NpyArray> owned = ownedParameters(r);
  ASSERT_EQ(owned.size(), 2u);
  EXPECT_EQ(owned[0].name, "w");
  EXPECT_EQ(owned[1].name, "e");
  EXPECT_EQ(owned[1].shape, (std::vector<int64_t>{3}));
}

TEST(Parameters, LoadErrorsNameTheParameterAndTheFile) {
  std::string dir = scratchDir();
  writeFile(dir + "/model.onnx", floatBytes({1, 2, 3}));
  RunSettings settings;
  settings.modelPath = dir + "/model.onnx";
  RankWith rank(settings);
  pipe_rank *r = rank.r;
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  std::string beyond = failureOf([&] {
    pipe_declare_param(r, 0, "big", PIPE_F32, PIPE_INTS(4), PIPE_SOURCE_FILE, nullptr, 0, 16, 1, 0);
  });
  EXPECT_NE(
      beyond.find("parameter big: needs bytes [0, 16) of " + dir + "/model.onnx, which has 12"),
      std::string::npos)
      << beyond;
  std::string length = failureOf([&] {
    pipe_declare_param(r, 1, "odd", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_FILE, nullptr, 0, 6, 1, 0);
  });
  EXPECT_NE(length.find("parameter odd: 6 stored bytes, but f32 [2] needs 8"), std::string::npos)
      << length;
  std::string missing = failureOf([&] {
    pipe_declare_param(r, 2, "ext", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_EXTERNAL, "nope.bin", 0, 8,
                       1, 0);
  });
  EXPECT_NE(missing.find("parameter ext: cannot open external data 'nope.bin' in " + dir),
            std::string::npos)
      << missing;
  std::string twice = failureOf([&] {
    pipe_declare_param(r, 3, "a", PIPE_F32, PIPE_INTS(1), PIPE_SOURCE_INLINE, nullptr, 0, -1, 0, 0);
    pipe_declare_param(r, 3, "a", PIPE_F32, PIPE_INTS(1), PIPE_SOURCE_INLINE, nullptr, 0, -1, 0, 0);
  });
  EXPECT_NE(twice.find("declared twice"), std::string::npos);
  EXPECT_NE(failureOf([&] { pipe_param(r, 9); }).find("parameter 9 is not declared"),
            std::string::npos);
}

// External data stays inside the model's folder, as the importer requires:
// no absolute location, no "..", no symbolic link out; nothing outside is read.
TEST(Parameters, ExternalDataCannotLeaveTheModelsFolder) {
  const std::string scratch = scratchDir();
  const std::string outside = scratch + "/outside", dir = scratch + "/model";
  std::filesystem::create_directories(outside);
  std::filesystem::create_directories(dir);
  writeFile(outside + "/secret.bin", floatBytes({7, 7}));
  writeFile(dir + "/model.onnx", floatBytes({1}));
  std::filesystem::create_symlink(outside + "/secret.bin", dir + "/link.bin");
  RunSettings settings;
  settings.modelPath = dir + "/model.onnx";
  RankWith rank(settings);
  pipe_rank *r = rank.r;
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  auto errorFor = [&](int32_t id, const std::string &location) {
    return failureOf([&] {
      pipe_declare_param(r, id, "w", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_EXTERNAL,
                         location.c_str(), 0, 8, 1, 0);
    });
  };
  std::string absolute = errorFor(0, outside + "/secret.bin");
  EXPECT_NE(absolute.find("is absolute; it must be relative to the model's folder"),
            std::string::npos)
      << absolute;
  std::string parent = errorFor(1, "../outside/secret.bin");
  EXPECT_NE(parent.find("contains '..'"), std::string::npos) << parent;
  std::string link = errorFor(2, "link.bin");
  EXPECT_NE(link.find("leaves the model's folder (through a symbolic link)"), std::string::npos)
      << link;
}

TEST(Parameters, InlineInitIsSeededBoundedAndEqualOnEveryRank) {
  RunSettings settings;
  settings.ranks = 2;
  settings.seed = 5;
  RankWith a(settings, 0), b(settings, 1);
  for (pipe_rank *r : {a.r, b.r}) {
    pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
    pipe_declare_param(r, 4, "tied", PIPE_F32, PIPE_INTS(16, 25), PIPE_SOURCE_INLINE, nullptr, 0,
                       -1, 1, 0);
  }
  std::vector<float> first = valuesOf(pipe_param(a.r, 4)), second = valuesOf(pipe_param(b.r, 4));
  EXPECT_EQ(first, second);
  float largest = 0;
  double sum = 0;
  for (float v : first) {
    largest = std::max(largest, std::fabs(v));
    sum += v;
  }
  EXPECT_LE(largest, 0.2f) << "1/sqrt(25)";
  EXPECT_GT(largest, 0.15f);
  EXPECT_LT(std::fabs(sum / first.size()), 0.03);

  settings.seed = 6;
  RankWith c(settings, 0);
  pipe_set_optimizer(c.r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(c.r, 4, "tied", PIPE_F32, PIPE_INTS(16, 25), PIPE_SOURCE_INLINE, nullptr, 0,
                     -1, 1, 0);
  EXPECT_NE(valuesOf(pipe_param(c.r, 4)), first) << "another seed, other values";
}

TEST(Parameters, StepZeroesGradientsAndAccumulateAdds) {
  pipe_rank *r = pipe_rank_create_standalone();
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(r, 0, "w", PIPE_F32, PIPE_INTS(3), PIPE_SOURCE_INLINE, nullptr, 0, -1, 1, 0);
  pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(3), PIPE_MEM_WORKSPACE);
  setValues(g, {1, 2, 3});
  pipe_step_begin(r);
  pipe_accumulate_grad(r, 0, g);
  pipe_accumulate_grad(r, 0, g);
  EXPECT_EQ(ownedGradients(r)[0].bytes.size(), 12u);
  std::vector<float> grad(3);
  std::memcpy(grad.data(), ownedGradients(r)[0].bytes.data(), 12);
  EXPECT_EQ(grad, (std::vector<float>{2, 4, 6}));
  pipe_free(r, g);
  pipe_step_end(r);
  pipe_step_begin(r);
  std::memcpy(grad.data(), ownedGradients(r)[0].bytes.data(), 12);
  EXPECT_EQ(grad, (std::vector<float>{0, 0, 0}));
  pipe_tensor *wrong = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
  EXPECT_NE(failureOf([&] {
              pipe_accumulate_grad(r, 0, wrong);
            }).find("a gradient f32 [4] for parameter w f32 [3]"),
            std::string::npos);
  pipe_free(r, wrong);
  pipe_step_end(r);
  pipe_rank_destroy(r);
}

TEST(Parameters, StepEndRefusesUnrestoredSlotsAndLeaks) {
  pipe_rank *r = pipe_rank_create_standalone();
  pipe_declare_stage(r, 1, 1);
  pipe_step_begin(r);
  pipe_save(r, 1, 2, 0, pipe_alloc(r, PIPE_F32, PIPE_INTS(2), PIPE_MEM_WORKSPACE));
  EXPECT_NE(failureOf([&] { pipe_step_end(r); })
                .find("step 0 ended with 1 saved value(s) never restored, first: stage 1, "
                      "micro-batch 2, slot 0 (f32 [2])"),
            std::string::npos);
  pipe_rank_destroy(r);

  r = pipe_rank_create_standalone();
  pipe_step_begin(r);
  pipe_tensor *leaked = pipe_alloc(r, PIPE_F32, PIPE_INTS(4), PIPE_MEM_WORKSPACE);
  EXPECT_NE(failureOf([&] { pipe_step_end(r); })
                .find("16 bytes of workspace and 0 bytes of received tensors still allocated "
                      "(a missing pipe_free, e.g. f32 [4] made outside any node)"),
            std::string::npos);
  pipe_free(r, leaked);
  pipe_rank_destroy(r);

  r = pipe_rank_create_standalone();
  EXPECT_NE(failureOf([&] { pipe_step_end(r); }).find("without pipe_step_begin"),
            std::string::npos);
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, 1);
  EXPECT_NE(failureOf([&] { pipe_step_end(r); }).find("action B1@s0 has not ended"),
            std::string::npos);
  pipe_rank_destroy(r);
}

} // namespace
