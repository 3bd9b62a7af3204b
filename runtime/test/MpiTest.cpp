//===- MpiTest.cpp - the MPI transport, run as two processes ---------------===//
//
//   mpirun -np 2 piperun-mpi-tests
//
// Matching by key in any order with order kept per key, a receive timeout
// that honours its deadline, and a whole run (runRank) whose loss equals the
// one the thread transport gives. Both processes run every test; each checks
// its side.
//
//===----------------------------------------------------------------------===//
#include "Mpi.h"
#include "Run.h"
#include "pipe_runtime.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <mutex>

using namespace piperun;

namespace {

MpiWorld *world = nullptr;

int receiveInt(Transport &t, const MessageKey &key) {
  int value = -1;
  EXPECT_TRUE(t.receive(key, 10, [&](size_t size) {
    EXPECT_EQ(size, sizeof(int));
    return static_cast<void *>(&value);
  }));
  return value;
}

TEST(MpiTransport, MatchesByKeyInAnyOrderAndKeepsOrderPerKey) {
  std::unique_ptr<Transport> t = world->transport();
  ASSERT_EQ(t->size(), 2);
  const MessageKey keys[] = {
      {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 0}, {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 1},
      {0, 1, 3, PIPE_TRANSFER_GRADIENT, 0},   {0, 1, 4, PIPE_TRANSFER_ACTIVATION, 0},
      {0, 1, 3, PIPE_TRANSFER_ACTIVATION, 0}, {0, 1, 9, PIPE_TRANSFER_PARAM, -1}};
  if (t->rank() == 0) {
    const int values[] = {10, 11, 12, 13, 14, 15};
    std::vector<std::unique_ptr<PendingSend>> sends;
    for (int i = 0; i < 6; ++i)
      sends.push_back(t->send(keys[i], &values[i], sizeof(int)));
    for (auto &send : sends)
      while (!send->done())
        t->progress();
  } else {
    EXPECT_EQ(receiveInt(*t, keys[5]), 15);
    EXPECT_EQ(receiveInt(*t, keys[3]), 13);
    EXPECT_EQ(receiveInt(*t, keys[0]), 10);
    EXPECT_EQ(receiveInt(*t, keys[2]), 12);
    EXPECT_EQ(receiveInt(*t, keys[1]), 11);
    EXPECT_EQ(receiveInt(*t, keys[0]), 14);
    EXPECT_FALSE(t->unreceived().has_value());
  }
  EXPECT_TRUE(t->barrier(10));
}

TEST(MpiTransport, ReceiveTimeoutHonoursItsDeadline) {
  std::unique_ptr<Transport> t = world->transport();
  if (t->rank() == 1) {
    auto start = std::chrono::steady_clock::now();
    bool got = t->receive({0, 1, 5, PIPE_TRANSFER_ACTIVATION, 0}, 0.3,
                          [](size_t) -> void * { return nullptr; });
    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_FALSE(got);
    EXPECT_GE(waited, 0.29);
    EXPECT_LT(waited, 1.5);
  }
  EXPECT_TRUE(t->barrier(10));
}

TEST(MpiTransport, KeysBeyondTheTagSpaceAreRefused) {
  std::unique_ptr<Transport> t = world->transport();
  EXPECT_EQ(t->checkKey({0, 1, 5, PIPE_TRANSFER_GRADIENT, 3}), "");
  EXPECT_NE(t->checkKey({0, 1, 1 << 20, PIPE_TRANSFER_GRADIENT, 3}).find("do not fit"),
            std::string::npos);
  EXPECT_TRUE(t->barrier(10));
}

// A two-stage program: rank 0 sends its synthetic input, rank 1 sums it into
// the loss and returns a gradient of ones.
void setup(pipe_rank *r) { pipe_declare_stage(r, 0, 1); }

void first(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, mb);
    pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(5), 0);
    pipe_send(r, x, 1, 0, PIPE_TRANSFER_ACTIVATION, mb);
    pipe_save(r, 0, mb, 0, x);
    pipe_action_end(r);
  }
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, mb);
    pipe_free(r, pipe_restore(r, 0, mb, 0));
    pipe_free(r, pipe_recv(r, 1, 0, PIPE_TRANSFER_GRADIENT, mb, PIPE_F32, PIPE_INTS(5)));
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

void last(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, mb);
    pipe_tensor *x = pipe_recv(r, 0, 0, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(5));
    pipe_tensor *loss = pipe_splat(r, PIPE_F32, PIPE_INTS(), 0);
    for (int i = 0; i < 5; ++i)
      static_cast<float *>(loss->data)[0] += static_cast<float *>(x->data)[i];
    pipe_loss(r, loss);
    pipe_free(r, loss);
    pipe_free(r, x);
    pipe_action_end(r);
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 1, mb);
    pipe_tensor *dx = pipe_splat(r, PIPE_F32, PIPE_INTS(5), 1);
    pipe_send(r, dx, 0, 0, PIPE_TRANSFER_GRADIENT, mb);
    pipe_free(r, dx);
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

TEST(MpiRun, LossEqualsTheThreadTransportsAndTheData) {
  RunSettings settings;
  settings.ranks = 2;
  settings.microbatches = 4;
  settings.seed = 3;
  settings.timeoutSeconds = 10;
  std::vector<double> losses, threadLosses;
  std::mutex mutex;
  auto collect = [&](std::vector<double> &into) {
    RunHooks hooks;
    hooks.stepEnded = [&](int, const StepRecord &step) {
      std::lock_guard<std::mutex> lock(mutex);
      if (step.hasLoss)
        into.push_back(step.loss);
    };
    return hooks;
  };
  std::unique_ptr<Transport> t = world->transport();
  RankProgram program = world->rank() == 0 ? RankProgram{setup, first} : RankProgram{setup, last};
  ASSERT_EQ(runRank(settings, *t, program, 3, collect(losses)), "");
  if (world->rank() != 1)
    return;
  ASSERT_EQ(losses.size(), 3u);
  ASSERT_EQ(runInThreads(settings, {{setup, first}, {setup, last}}, 3, collect(threadLosses)), "");
  EXPECT_EQ(losses, threadLosses);
  EXPECT_NE(losses[0], losses[1]) << "each step draws new data";
}

/// Rank 1's failures, one line each (its full gtest report would interleave rank 0's).
class FailurePrinter : public ::testing::EmptyTestEventListener {
public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult &result) override {
    if (result.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name(), result.line_number(),
                   result.summary());
  }

private:
  int rank_;
};

} // namespace

int main(int argc, char **argv) {
  MpiWorld mpi(&argc, &argv);
  world = &mpi;
  ::testing::InitGoogleTest(&argc, argv);
  if (mpi.rank() != 0) {
    auto &listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(mpi.rank()));
  }
  int failed = RUN_ALL_TESTS();
  std::vector<std::vector<char>> all = mpi.gatherToRoot({static_cast<char>(failed)});
  if (mpi.rank() == 0)
    for (size_t k = 1; k < all.size(); ++k)
      if (all[k].at(0)) {
        std::fprintf(stderr, "rank %zu failed a test (its lines start with [rank %zu])\n", k, k);
        failed = 1;
      }
  return failed;
}
