//===- AllocatorTest.cpp - memory accounting per category ------------------===//
//
// Live and peak bytes per category through the C ABI: allocations, views that
// share storage, saved slots moving bytes WORKSPACE -> SAVED -> WORKSPACE, the
// total's peak as the peak of the sum, the misuse the allocator refuses, and
// the cache of freed blocks (reused by size, bounded, invisible to the account).
//
//===----------------------------------------------------------------------===//
#include "Storage.h"
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <algorithm>
#include <set>

using namespace piperun;
using namespace piperun::test;

namespace {

struct Standalone {
  pipe_rank *r = pipe_rank_create_standalone();
  ~Standalone() { pipe_rank_destroy(r); }
  int64_t live(int c) const { return pipe_memory_live(r, c); }
  int64_t peak(int c) const { return pipe_memory_peak(r, c); }
};

TEST(Allocator, AllocAndFreeCountBytesPerCategory) {
  Standalone s;
  pipe_tensor *a = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE);
  pipe_tensor *b = pipe_alloc(s.r, PIPE_I64, PIPE_INTS(5), PIPE_MEM_WORKSPACE);
  pipe_tensor *c = pipe_alloc(s.r, PIPE_BOOL, PIPE_INTS(3, 3), PIPE_MEM_COMM);
  EXPECT_EQ(a->numel, 6);
  EXPECT_EQ(a->rank, 2);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 24 + 40);
  EXPECT_EQ(s.live(PIPE_MEM_COMM), 9);
  pipe_free(s.r, b);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 24);
  EXPECT_EQ(s.peak(PIPE_MEM_WORKSPACE), 64);
  pipe_free(s.r, a);
  pipe_free(s.r, c);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0);
  EXPECT_EQ(s.live(PIPE_MEM_COMM), 0);
  EXPECT_EQ(s.peak(PIPE_MEM_COMM), 9);
  pipe_free(s.r, nullptr); // ignored
}

TEST(Allocator, ViewsShareStorageUntilTheLastReference) {
  Standalone s;
  pipe_tensor *a = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(4, 6), PIPE_MEM_WORKSPACE);
  pipe_tensor *v = pipe_view(s.r, a, PIPE_INTS(2, 12));
  pipe_tensor *w = pipe_view(s.r, v, PIPE_INTS(24));
  EXPECT_EQ(v->data, a->data);
  EXPECT_EQ(w->data, a->data);
  EXPECT_EQ(v->shape[1], 12);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 96) << "a view costs nothing";
  pipe_free(s.r, a);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 96) << "the views keep the storage";
  pipe_free(s.r, w);
  pipe_free(s.r, v);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0);
  EXPECT_EQ(s.peak(PIPE_MEM_WORKSPACE), 96);
}

TEST(Allocator, SaveMovesToSavedWhereItStaysUntilFreed) {
  Standalone s;
  pipe_declare_stage(s.r, 2, 2);
  pipe_tensor *x = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(10), PIPE_MEM_WORKSPACE);
  pipe_tensor *y = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(5), PIPE_MEM_COMM);
  pipe_save(s.r, 2, 0, 0, x);
  pipe_save(s.r, 2, 0, 1, y);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0);
  EXPECT_EQ(s.live(PIPE_MEM_COMM), 0);
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 60);
  pipe_tensor *x2 = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(10), PIPE_MEM_WORKSPACE);
  pipe_save(s.r, 2, 1, 0, x2);
  EXPECT_EQ(s.peak(PIPE_MEM_SAVED), 100);
  pipe_tensor *back = pipe_restore(s.r, 2, 0, 0);
  EXPECT_EQ(back, x);
  pipe_tensor *yBack = pipe_restore(s.r, 2, 0, 1);
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 100) << "a restored value is saved until freed";
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0);
  pipe_free(s.r, back);
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 60);
  pipe_free(s.r, yBack);
  pipe_free(s.r, pipe_restore(s.r, 2, 1, 0));
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 0);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0);
  // Moves between categories never raise the total.
  EXPECT_EQ(pipe_memory_peak(s.r, PIPE_MEM_SAVED), 100);
}

TEST(Allocator, SavedViewKeepsOneChargeAndAParameterViewStaysAParameter) {
  Standalone s;
  pipe_set_optimizer(s.r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_stage(s.r, 0, 3);
  pipe_declare_param(s.r, 0, "w", PIPE_F32, PIPE_INTS(2, 2), PIPE_SOURCE_INLINE, nullptr, 0, -1, 0,
                     0);
  pipe_tensor *x = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(8), PIPE_MEM_WORKSPACE);
  pipe_tensor *v = pipe_view(s.r, x, PIPE_INTS(2, 4));
  pipe_save(s.r, 0, 0, 0, x);
  pipe_save(s.r, 0, 0, 1, v);
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 32);
  pipe_free(s.r, pipe_restore(s.r, 0, 0, 0));
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 32) << "still held by slot 1";
  pipe_free(s.r, pipe_restore(s.r, 0, 0, 1));
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 0);
  pipe_tensor *wView = pipe_view(s.r, pipe_param(s.r, 0), PIPE_INTS(4));
  pipe_save(s.r, 0, 0, 2, wView);
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 0);
  EXPECT_EQ(s.live(PIPE_MEM_PARAMETERS), 16);
  pipe_free(s.r, pipe_restore(s.r, 0, 0, 2));
  EXPECT_EQ(s.live(PIPE_MEM_PARAMETERS), 16);
}

TEST(Allocator, TotalPeakIsThePeakOfTheSum) {
  Standalone s;
  pipe_tensor *a = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(100), PIPE_MEM_WORKSPACE); // 400
  pipe_free(s.r, a);
  pipe_tensor *b = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(50), PIPE_MEM_COMM);      // 200
  pipe_tensor *c = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(25), PIPE_MEM_WORKSPACE); // 100
  auto *self = s.r;
  RankReport report = reportOf(self);
  EXPECT_EQ(report.peak[PIPE_MEM_WORKSPACE], 400);
  EXPECT_EQ(report.peak[PIPE_MEM_COMM], 200);
  EXPECT_EQ(report.peakTotal, 400) << "not 600: the two peaks were never live together";
  pipe_free(s.r, b);
  pipe_free(s.r, c);
}

TEST(Allocator, SplatIsAConstantAndConstantCostsNothing) {
  Standalone s;
  pipe_tensor *k = pipe_splat(s.r, PIPE_F32, PIPE_INTS(3), 2.5);
  EXPECT_EQ(valuesOf(k), (std::vector<float>{2.5f, 2.5f, 2.5f}));
  EXPECT_EQ(s.live(PIPE_MEM_CONSTANTS), 12);
  pipe_tensor *i = pipe_splat(s.r, PIPE_I64, PIPE_INTS(2), 7);
  EXPECT_EQ(static_cast<int64_t *>(i->data)[1], 7);
  pipe_tensor *h = pipe_splat(s.r, PIPE_F16, PIPE_INTS(1), 1.5);
  EXPECT_EQ(static_cast<uint16_t *>(h->data)[0], 0x3E00); // 1.5 in IEEE half
  pipe_tensor *bf = pipe_splat(s.r, PIPE_BF16, PIPE_INTS(1), -2.0);
  EXPECT_EQ(static_cast<uint16_t *>(bf->data)[0], 0xC000); // -2 in bfloat16
  static const float table[4] = {1, 2, 3, 4};
  pipe_tensor *c = pipe_constant(s.r, PIPE_F32, PIPE_INTS(2, 2), table);
  EXPECT_EQ(c->data, table);
  EXPECT_EQ(s.live(PIPE_MEM_CONSTANTS), 12 + 16 + 2 + 2);
  for (pipe_tensor *t : {k, i, h, bf, c})
    pipe_free(s.r, t);
  EXPECT_EQ(s.live(PIPE_MEM_CONSTANTS), 0);
}

TEST(Allocator, MisuseFailsWithOneMessage) {
  Standalone s;
  pipe_set_optimizer(s.r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(s.r, 0, "w", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_INLINE, nullptr, 0, -1, 1, 0);
  pipe_tensor *x = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(6), PIPE_MEM_WORKSPACE);
  EXPECT_NE(failureOf([&] { pipe_free(s.r, pipe_param(s.r, 0)); }).find("borrowed"),
            std::string::npos);
  EXPECT_NE(failureOf([&] { pipe_view(s.r, x, PIPE_INTS(4)); }).find("6 elements"),
            std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_alloc(s.r, 42, PIPE_INTS(1), PIPE_MEM_WORKSPACE);
            }).find("unknown dtype 42"),
            std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_alloc(s.r, PIPE_F32, PIPE_INTS(2, -3), PIPE_MEM_WORKSPACE);
            }).find("negative dimension -3"),
            std::string::npos);
  EXPECT_NE(failureOf([&] { pipe_restore(s.r, 0, 0, 0); }).find("stage 0 is not declared"),
            std::string::npos);
  pipe_declare_stage(s.r, 0, 1);
  pipe_save(s.r, 0, 3, 0, x);
  EXPECT_NE(failureOf([&] { pipe_free(s.r, x); }).find("saved slot"), std::string::npos);
  EXPECT_NE(failureOf([&] {
              pipe_restore(s.r, 0, 2, 0);
            }).find("slot 0 of stage 0, micro-batch 2 is empty"),
            std::string::npos);
  pipe_tensor *y = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(1), PIPE_MEM_WORKSPACE);
  EXPECT_NE(failureOf([&] { pipe_save(s.r, 0, 3, 0, y); }).find("is taken"), std::string::npos);
  EXPECT_NE(failureOf([&] { pipe_save(s.r, 0, 3, 1, y); }).find("slot 1 of stage 0"),
            std::string::npos);
  pipe_free(s.r, y);
  EXPECT_NE(failureOf([&] { pipe_free(s.r, y); }).find("not a live tensor of this rank"),
            std::string::npos);
  pipe_rank *other = pipe_rank_create_standalone();
  pipe_tensor *foreign = pipe_alloc(other, PIPE_F32, PIPE_INTS(1), PIPE_MEM_WORKSPACE);
  EXPECT_NE(failureOf([&] {
              pipe_view(s.r, foreign, PIPE_INTS(1));
            }).find("pipe_view: not a live tensor of this rank"),
            std::string::npos);
  pipe_rank_destroy(other); // frees `foreign` with it
  pipe_free(s.r, pipe_restore(s.r, 0, 3, 0));
}

TEST(Allocator, FailureNamesRankNodeAndAction) {
  Standalone s;
  pipe_declare_node(s.r, 7, "fc1");
  pipe_step_begin(s.r);
  pipe_action_begin(s.r, PIPE_ACTION_FORWARD, 1, 3);
  pipe_node(s.r, 7);
  pipe_tensor *x = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(6), PIPE_MEM_WORKSPACE);
  EXPECT_EQ(failureOf([&] { pipe_view(s.r, x, PIPE_INTS(5)); }),
            "rank 0, node fc1 (F3@s1): pipe_view: f32 [6] has 6 elements, the view [5] wants 5");
  pipe_free(s.r, x);
  pipe_action_end(s.r);
  pipe_step_end(s.r);
}

TEST(Allocator, AFreedBlockServesTheNextAllocationOfItsSize) {
  if (!BlockCache::enabled())
    GTEST_SKIP() << "sanitized build: freed blocks go back to the system at once";
  Standalone s;
  pipe_tensor *a = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(1000), PIPE_MEM_WORKSPACE);
  void *first = a->data;
  pipe_free(s.r, a);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 0) << "a cached block is not live";
  pipe_tensor *b = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(10, 100), PIPE_MEM_SAVED);
  EXPECT_EQ(b->data, first) << "same size, any shape or category";
  pipe_tensor *c = pipe_alloc(s.r, PIPE_F32, PIPE_INTS(1000), PIPE_MEM_WORKSPACE);
  EXPECT_NE(c->data, first) << "a live block is never handed out twice";
  EXPECT_EQ(s.live(PIPE_MEM_SAVED), 4000);
  EXPECT_EQ(s.live(PIPE_MEM_WORKSPACE), 4000);
  EXPECT_EQ(s.peak(PIPE_MEM_WORKSPACE), 4000);
  pipe_free(s.r, b);
  pipe_free(s.r, c);
}

TEST(Allocator, TheCacheKeepsNoMoreThanItsLimitAndHandsOutDistinctBlocks) {
  BlockCache cache;
  std::vector<void *> blocks;
  for (int i = 0; i < 8; ++i)
    blocks.push_back(cache.take(128));
  EXPECT_EQ(std::set<void *>(blocks.begin(), blocks.end()).size(), 8u);
  for (void *block : blocks) {
    ASSERT_NE(block, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
    cache.give(block, 128, 512); // room for four
  }
  if (!BlockCache::enabled()) {
    EXPECT_EQ(cache.cachedBytes(), 0);
    return;
  }
  EXPECT_EQ(cache.cachedBytes(), 512);
  std::set<void *> again;
  for (int i = 0; i < 4; ++i)
    again.insert(cache.take(128));
  EXPECT_EQ(again.size(), 4u);
  for (void *block : again)
    EXPECT_NE(std::find(blocks.begin(), blocks.end(), block), blocks.end());
  EXPECT_EQ(cache.cachedBytes(), 0);
  void *other = cache.take(192);
  EXPECT_EQ(again.count(other), 0u) << "another size is a fresh block";
  for (void *block : again)
    cache.give(block, 128, 1 << 20);
  cache.give(other, 192, 1 << 20);
  EXPECT_EQ(cache.cachedBytes(), 4 * 128 + 192);
  cache.clear();
  EXPECT_EQ(cache.cachedBytes(), 0);
}

} // namespace
