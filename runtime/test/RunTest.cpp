//===- RunTest.cpp - whole runs in threads: steps, transfers, failures -----===//
//
// Small rank programs written here (function pointers, as pipe-run gets them
// from rankK.so) run through runInThreads: tied-parameter reduction and
// broadcast, what a run records, and every way a run can go wrong ending in
// one message that names the rank, node, peer and tag, promptly.
//
//===----------------------------------------------------------------------===//
#include "TestSupport.h"

#include "pipe_runtime.h"

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>

#include <pthread.h>
#include <sched.h>

using namespace piperun;
using namespace piperun::test;

namespace {

using Clock = std::chrono::steady_clock;

RunSettings settingsFor(int ranks, double timeout = 10) {
  RunSettings settings;
  settings.ranks = ranks;
  settings.microbatches = 4;
  settings.timeoutSeconds = timeout;
  return settings;
}

double timed(const std::function<void()> &body) {
  auto start = Clock::now();
  body();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void noSetup(pipe_rank *) {}

// --- Tied parameter: rank 0 owns w, rank 1 uses a copy. --------------------
// Each step rank 0 adds gradient [1, 2] and rank 1 adds [10, 20]; rank 1 sends
// its gradient to the owner, which updates (SGD, lr 0.5) and sends w back.

void tiedSetup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_SGD, 0.5, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_param(r, 0, "tied.w", PIPE_F32, PIPE_INTS(2), PIPE_SOURCE_INLINE, nullptr, 0, -1, 1,
                     0);
  setValues(pipe_param(r, 0), {1, 1}); // both copies start equal, as loading makes them
}

void addGradient(pipe_rank *r, float scale) {
  pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(2), PIPE_MEM_WORKSPACE);
  setValues(g, {scale, 2 * scale});
  pipe_accumulate_grad(r, 0, g);
  pipe_free(r, g);
}

void tiedOwnerStep(pipe_rank *r) {
  pipe_step_begin(r);
  addGradient(r, 1);
  pipe_action_begin(r, PIPE_ACTION_REDUCE, -1, -1);
  pipe_recv_add_param_grad(r, 0, 1);
  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_update(r, 0);
  pipe_send_param(r, 0, 1);
  pipe_action_end(r);
  pipe_step_end(r);
}

void tiedUserStep(pipe_rank *r) {
  pipe_step_begin(r);
  addGradient(r, 10);
  pipe_action_begin(r, PIPE_ACTION_REDUCE, -1, -1);
  pipe_send_param_grad(r, 0, 0);
  pipe_action_end(r);
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_recv_param(r, 0, 0);
  pipe_action_end(r);
  pipe_step_end(r);
}

TEST(Run, TiedParameterGradientsReduceAndValuesReturn) {
  std::mutex mutex;
  std::vector<std::vector<float>> finalValues(2);
  std::vector<RankReport> reports(2);
  RunHooks hooks;
  hooks.finished = [&](pipe_rank *r) {
    std::lock_guard<std::mutex> lock(mutex);
    reports[reportOf(r).rank] = reportOf(r);
    finalValues[reportOf(r).rank] = valuesOf(pipe_param(r, 0));
  };
  std::string failure = runInThreads(
      settingsFor(2), {{tiedSetup, tiedOwnerStep}, {tiedSetup, tiedUserStep}}, 3, hooks);
  ASSERT_EQ(failure, "");
  // w -= 0.5 * (1 + 10, 2 + 20) three times.
  EXPECT_EQ(finalValues[0], (std::vector<float>{1 - 3 * 5.5f, 1 - 3 * 11.0f}));
  EXPECT_EQ(finalValues[1], finalValues[0]) << "the user's copy got the update";
  ASSERT_EQ(reports[1].actions.size(), 6u);
  EXPECT_EQ(actionName(reports[1].actions[0]), "reduce");
  EXPECT_EQ(actionName(reports[1].actions[1]), "optimizer");
  EXPECT_EQ(reports[1].actions[5].step, 2);
  EXPECT_EQ(reports[0].peak[PIPE_MEM_OPTIMIZER], 0) << "SGD keeps no state";
  EXPECT_EQ(reports[0].peak[PIPE_MEM_GRADIENTS], 8);
  EXPECT_EQ(reports[1].peak[PIPE_MEM_GRADIENTS], 8);
}

// --- A pipeline of two stages with synthetic data and a loss. --------------

void pipeSetup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_SGD, 0.1, 0, 0.9, 0.999, 1e-8, 0);
  pipe_declare_stage(r, 0, 1);
  pipe_declare_node(r, 3, "scale");
}

void pipeFirst(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, mb);
    pipe_node(r, 3);
    pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(3), 0);
    pipe_send(r, x, 1, 0, PIPE_TRANSFER_ACTIVATION, mb);
    pipe_save(r, 0, mb, 0, x);
    pipe_action_end(r);
  }
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 0, mb);
    pipe_free(r, pipe_restore(r, 0, mb, 0));
    pipe_free(r, pipe_recv(r, 1, 0, PIPE_TRANSFER_GRADIENT, mb, PIPE_F32, PIPE_INTS(3)));
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

void pipeLast(pipe_rank *r) {
  pipe_step_begin(r);
  for (int mb = 0; mb < 4; ++mb) {
    pipe_action_begin(r, PIPE_ACTION_FORWARD, 1, mb);
    pipe_tensor *x = pipe_recv(r, 0, 0, PIPE_TRANSFER_ACTIVATION, mb, PIPE_F32, PIPE_INTS(3));
    pipe_tensor *loss = pipe_splat(r, PIPE_F32, PIPE_INTS(), 0);
    for (int i = 0; i < 3; ++i)
      static_cast<float *>(loss->data)[0] += static_cast<float *>(x->data)[i];
    pipe_loss(r, loss);
    pipe_free(r, loss);
    pipe_free(r, x);
    pipe_action_end(r);
    pipe_action_begin(r, PIPE_ACTION_BACKWARD, 1, mb);
    pipe_tensor *dx = pipe_splat(r, PIPE_F32, PIPE_INTS(3), 1);
    pipe_send(r, dx, 0, 0, PIPE_TRANSFER_GRADIENT, mb);
    pipe_free(r, dx);
    pipe_action_end(r);
  }
  pipe_step_end(r);
}

TEST(Run, StepsReportTheLossOfTheSyntheticData) {
  RunSettings settings = settingsFor(2);
  settings.seed = 9;
  std::mutex mutex;
  std::vector<StepRecord> lossSteps;
  RunHooks hooks;
  hooks.stepEnded = [&](int rank, const StepRecord &step) {
    std::lock_guard<std::mutex> lock(mutex);
    if (step.hasLoss) {
      EXPECT_EQ(rank, 1);
      lossSteps.push_back(step);
    }
  };
  ASSERT_EQ(runInThreads(settings, {{pipeSetup, pipeFirst}, {pipeSetup, pipeLast}}, 2, hooks), "");
  ASSERT_EQ(lossSteps.size(), 2u);
  // The same data drawn by a rank of the same seed, outside any run.
  pipe_rank *r = createRank(settings, 0);
  for (int step = 0; step < 2; ++step) {
    double expected = 0;
    for (int mb = 0; mb < 4; ++mb) {
      pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(3), 0);
      float sum = 0;
      for (float v : valuesOf(x))
        sum += v;
      expected += sum;
      pipe_free(r, x);
    }
    EXPECT_NEAR(lossSteps[step].loss, expected, 1e-6) << "step " << step;
    EXPECT_EQ(lossSteps[step].step, step);
    pipe_step_begin(r);
    pipe_step_end(r);
  }
  pipe_rank_destroy(r);
}

TEST(Run, ReplicasDrawTheirShareOfTheStepsMicroBatches) {
  RunSettings settings = settingsFor(2);
  settings.seed = 9;
  settings.replicas = 2;
  std::mutex mutex;
  std::map<int, std::vector<double>> losses; // transport rank -> per step
  RunHooks hooks;
  hooks.stepEnded = [&](int rank, const StepRecord &step) {
    std::lock_guard<std::mutex> lock(mutex);
    if (step.hasLoss)
      losses[rank].push_back(step.loss);
  };
  const RankProgram first{pipeSetup, pipeFirst}, last{pipeSetup, pipeLast};
  ASSERT_EQ(runInThreads(settings, {first, last, first, last}, 1, hooks), "");
  ASSERT_EQ(losses.size(), 2u);
  // Replica j's last rank (transport rank 2 j + 1) saw micro-batches 4 j .. 4 j + 3.
  pipe_rank *r = createRank(settings, 0);
  for (int replica = 0; replica < 2; ++replica) {
    double expected = 0;
    for (int mb = 4 * replica; mb < 4 * replica + 4; ++mb) {
      pipe_tensor *x = pipe_input(r, mb, 0, PIPE_F32, PIPE_INTS(3), 0);
      for (float v : valuesOf(x))
        expected += v;
      pipe_free(r, x);
    }
    ASSERT_EQ(losses[2 * replica + 1].size(), 1u);
    EXPECT_NEAR(losses[2 * replica + 1][0], expected, 1e-5) << "replica " << replica;
  }
  EXPECT_NE(losses[1][0], losses[3][0]);
  pipe_rank_destroy(r);

  EXPECT_EQ(runInThreads(settings, {first, last, first}, 1, {}),
            "runtime: 3 ranks cannot hold 2 replicas of one pipeline");

  // Stage-major: pipeline rank p's replicas on transport ranks 2 p and 2 p + 1;
  // replica j's last rank is transport rank 2 + j, with the same losses.
  settings.layout = ReplicaLayout::StageMajor;
  std::map<int, std::vector<double>> pipelineMajor;
  pipelineMajor.swap(losses);
  ASSERT_EQ(runInThreads(settings, {first, first, last, last}, 1, hooks), "");
  ASSERT_EQ(losses.size(), 2u);
  for (int replica = 0; replica < 2; ++replica)
    EXPECT_EQ(losses[2 + replica], pipelineMajor[2 * replica + 1]) << "replica " << replica;
}

TEST(Run, ReplicaLayoutsPlaceEveryTransportRankOnce) {
  for (ReplicaLayout layout : {ReplicaLayout::PipelineMajor, ReplicaLayout::StageMajor})
    for (int replicas = 1; replicas <= 5; ++replicas)
      for (int ranks = 1; ranks <= 4; ++ranks) {
        std::set<std::pair<int, int>> seen;
        for (int k = 0; k < replicas * ranks; ++k) {
          const RankPlace place = rankPlace(layout, replicas, ranks, k);
          ASSERT_TRUE(place.replica >= 0 && place.replica < replicas && place.rank >= 0 &&
                      place.rank < ranks);
          EXPECT_TRUE(seen.insert({place.replica, place.rank}).second);
          EXPECT_EQ(transportRankOf(layout, replicas, ranks, place), k);
          // Pipeline-major keeps a pipeline's ranks together, stage-major a
          // pipeline rank's replicas.
          if (layout == ReplicaLayout::PipelineMajor)
            EXPECT_EQ(k / ranks, place.replica);
          else
            EXPECT_EQ(k / replicas, place.rank);
        }
      }
}

// --- The gradient all-reduce over replicas: rings of buckets. --------------
// One rank per replica, parameters of `ringSizes` elements; replica j's
// gradient of parameter p is element i: (j + 1) * (i + 1) / 8 + (i + p) % 3.
// SGD with lr 1 from zero leaves minus the mean over the replicas, the same
// bits on every replica.

std::vector<int64_t> ringSizes;

void ringSetup(pipe_rank *r) {
  pipe_set_optimizer(r, PIPE_SGD, 1, 0, 0.9, 0.999, 1e-8, 0);
  for (size_t p = 0; p < ringSizes.size(); ++p) {
    const std::string name = "w" + std::to_string(p);
    pipe_declare_param(r, static_cast<int32_t>(p), name.c_str(), PIPE_F32, PIPE_INTS(ringSizes[p]),
                       PIPE_SOURCE_INLINE, nullptr, 0, -1, 1, 0);
    setValues(pipe_param(r, static_cast<int32_t>(p)),
              std::vector<float>(static_cast<size_t>(ringSizes[p]), 0.0f));
  }
}

float ringGradient(int replica, size_t parameter, int64_t i) {
  return static_cast<float>(replica + 1) * static_cast<float>(i + 1) / 8 +
         static_cast<float>((i + static_cast<int64_t>(parameter)) % 3);
}

void ringStep(pipe_rank *r) {
  pipe_step_begin(r);
  const int replica = reportOf(r).replica;
  for (size_t p = 0; p < ringSizes.size(); ++p) {
    pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(ringSizes[p]), PIPE_MEM_WORKSPACE);
    std::vector<float> values;
    for (int64_t i = 0; i < ringSizes[p]; ++i)
      values.push_back(ringGradient(replica, p, i));
    setValues(g, values);
    pipe_accumulate_grad(r, static_cast<int32_t>(p), g);
    pipe_free(r, g);
  }
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_all_reduce_grads(r);
  for (size_t p = 0; p < ringSizes.size(); ++p)
    pipe_update(r, static_cast<int32_t>(p));
  pipe_action_end(r);
  pipe_step_end(r);
}

TEST(Run, ReplicasAllReduceTheGradientsInRingsOfBuckets) {
  struct Case {
    int replicas;
    std::vector<int64_t> sizes;
    int64_t bucketBytes;
  };
  const int64_t whole = int64_t(25) << 20;
  // Fewer elements than replicas (empty chunks), chunks of unequal size, many;
  // buckets and chunks that span several parameters, and a bucket of one element.
  const std::vector<Case> cases{{5, {2}, whole},          {3, {7}, whole},
                                {4, {1000}, whole},       {2, {1}, whole},
                                {3, {5, 1, 700, 33}, 64}, {4, {1000, 999, 3}, 1200},
                                {2, {3, 4}, 4}};
  for (const Case &c : cases) {
    ringSizes = c.sizes;
    RunSettings settings = settingsFor(1);
    settings.replicas = c.replicas;
    settings.allReduceBucketBytes = c.bucketBytes;
    std::mutex mutex;
    std::vector<std::vector<std::vector<float>>> weights(static_cast<size_t>(c.replicas));
    std::vector<RankReport> reports(static_cast<size_t>(c.replicas));
    RunHooks hooks;
    hooks.finished = [&](pipe_rank *r) {
      std::lock_guard<std::mutex> lock(mutex);
      const RankReport report = reportOf(r);
      for (size_t p = 0; p < ringSizes.size(); ++p)
        weights[static_cast<size_t>(report.replica)].push_back(
            valuesOf(pipe_param(r, static_cast<int32_t>(p))));
      reports[static_cast<size_t>(report.replica)] = report;
    };
    const std::string label = std::to_string(c.replicas) + " replicas, bucket " +
                              std::to_string(c.bucketBytes) + " B, " +
                              std::to_string(c.sizes.size()) + " parameters";
    ASSERT_EQ(runInThreads(settings,
                           std::vector<RankProgram>(static_cast<size_t>(c.replicas),
                                                    RankProgram{ringSetup, ringStep}),
                           1, hooks),
              "")
        << label;
    int64_t total = 0;
    for (size_t p = 0; p < c.sizes.size(); ++p) {
      total += c.sizes[p];
      for (int64_t i = 0; i < c.sizes[p]; ++i) {
        double mean = 0;
        for (int j = 0; j < c.replicas; ++j)
          mean += ringGradient(j, p, i);
        mean /= c.replicas;
        EXPECT_NEAR(weights[0][p][static_cast<size_t>(i)], -mean, 1e-6 * (1 + mean))
            << label << ": parameter " << p << ", element " << i;
      }
    }
    for (int j = 1; j < c.replicas; ++j)
      EXPECT_EQ(weights[static_cast<size_t>(j)], weights[0]) << label << ": replica " << j;
    // COMM holds a chunk's message until the next replica takes it and the
    // chunk received: 2/R of a bucket at most, never whole gradients.
    const int64_t bucket = std::min(total, c.bucketBytes / 4);
    const int64_t chunkBytes = (bucket + c.replicas - 1) / c.replicas * 4;
    for (const RankReport &report : reports) {
      EXPECT_LE(report.peak[PIPE_MEM_COMM], 2 * chunkBytes) << label << ": replica "
                                                            << report.replica;
      EXPECT_GE(report.peak[PIPE_MEM_COMM], chunkBytes) << label << ": replica "
                                                        << report.replica;
      ASSERT_EQ(report.steps.size(), 1u);
      EXPECT_GT(report.steps[0].allReduceMs, 0) << label << ": replica " << report.replica;
    }
  }
}

void updateBeforeAllReduce(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_OPTIMIZER, -1, -1);
  pipe_update(r, 0);
  pipe_action_end(r);
  pipe_step_end(r);
}

void accumulateAfterAllReduce(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_all_reduce_grads(r);
  pipe_tensor *g = pipe_alloc(r, PIPE_F32, PIPE_INTS(ringSizes[0]), PIPE_MEM_WORKSPACE);
  pipe_accumulate_grad(r, 0, g);
  pipe_free(r, g);
  pipe_step_end(r);
}

void allReduceTwice(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_all_reduce_grads(r);
  pipe_all_reduce_grads(r);
  pipe_step_end(r);
}

void allReduceOutsideAStep(pipe_rank *r) { pipe_all_reduce_grads(r); }

void stepWithoutAllReduce(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_step_end(r);
}

TEST(Run, ReplicasRefuseUpdatesOfGradientsTheyDidNotAverage) {
  ringSizes = {4};
  RunSettings settings = settingsFor(1);
  settings.replicas = 2;
  const std::string skipped =
      runInThreads(settings, std::vector<RankProgram>(2, {ringSetup, updateBeforeAllReduce}), 1,
                   {});
  EXPECT_NE(skipped.find("pipe_update: the gradient of parameter w0 is not averaged over the 2 "
                         "replicas (pipe_all_reduce_grads must come before the updates"),
            std::string::npos)
      << skipped;
  const std::string late =
      runInThreads(settings, std::vector<RankProgram>(2, {ringSetup, accumulateAfterAllReduce}),
                   1, {});
  EXPECT_NE(late.find("pipe_accumulate_grad: parameter w0 after this step's "
                      "pipe_all_reduce_grads"),
            std::string::npos)
      << late;
  const std::string twice =
      runInThreads(settings, std::vector<RankProgram>(2, {ringSetup, allReduceTwice}), 1, {});
  EXPECT_NE(twice.find("pipe_all_reduce_grads: called twice in step 0"), std::string::npos)
      << twice;
  const std::string outside =
      runInThreads(settings, std::vector<RankProgram>(2, {ringSetup, allReduceOutsideAStep}), 1,
                   {});
  EXPECT_NE(outside.find("pipe_all_reduce_grads: outside a step"), std::string::npos) << outside;
  // A replica that never joins the ring: the other's wait names the ring's
  // message and its peer, not a tied parameter's gradient (the key it shares).
  settings.timeoutSeconds = 1;
  const std::string missing = runInThreads(
      settings, {{ringSetup, accumulateAfterAllReduce}, {ringSetup, stepWithoutAllReduce}}, 1, {});
  EXPECT_EQ(missing, "rank 0 (replica 0's rank 0): no gradient all-reduce chunk from rank 1 "
                     "within 1 s");
  // One replica: nothing to average; the updates need no all-reduce, and a
  // second call or a gradient after it is harmless.
  settings.replicas = 1;
  EXPECT_EQ(runInThreads(settings, {{ringSetup, updateBeforeAllReduce}}, 1, {}), "");
  EXPECT_EQ(runInThreads(settings, {{ringSetup, allReduceTwice}}, 1, {}), "");
  EXPECT_EQ(runInThreads(settings, {{ringSetup, accumulateAfterAllReduce}}, 1, {}), "");
}

// --- Failures. --------------------------------------------------------------

const char *failMode = "";

void failingSetup(pipe_rank *r) {
  pipe_declare_node(r, 1, "wait_here");
  pipe_declare_node(r, 2, "bad_reshape");
}

void firstRankStep(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 0);
  std::string mode = failMode;
  if (mode == "fail") {
    pipe_node(r, 2);
    pipe_tensor *x = pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE);
    pipe_view(r, x, PIPE_INTS(7));
  }
  if (mode == "unreceived" || mode == "shape") {
    pipe_tensor *x = pipe_splat(r, PIPE_F32, PIPE_INTS(2, 3), 1);
    pipe_send(r, x, 1, 2, PIPE_TRANSFER_ACTIVATION, 0);
    pipe_free(r, x);
  }
  pipe_action_end(r);
  pipe_step_end(r);
}

void secondRankStep(pipe_rank *r) {
  pipe_step_begin(r);
  std::string mode = failMode;
  pipe_action_begin(r, PIPE_ACTION_BACKWARD, 1, 2);
  pipe_node(r, 1);
  if (mode == "fail" || mode == "timeout")
    pipe_free(r, pipe_recv(r, 0, 5, PIPE_TRANSFER_GRADIENT, 2, PIPE_F32, PIPE_INTS(4)));
  if (mode == "shape")
    pipe_free(r, pipe_recv(r, 0, 2, PIPE_TRANSFER_ACTIVATION, 0, PIPE_F32, PIPE_INTS(3, 2)));
  if (mode == "throw")
    throw std::runtime_error("boom");
  pipe_action_end(r);
  if (mode != "no-step-end")
    pipe_step_end(r);
}

std::string runFailing(const char *mode, double timeout, double *seconds) {
  failMode = mode;
  std::string failure;
  *seconds = timed([&] {
    failure = runInThreads(settingsFor(2, timeout),
                           {{failingSetup, firstRankStep}, {failingSetup, secondRankStep}}, 2, {});
  });
  return failure;
}

// --- Each rank's thread on its own CPUs. ------------------------------------

std::mutex cpuMutex;
std::vector<std::vector<int>> cpusSeen;

/// The CPUs the calling thread may run on.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  pthread_getaffinity_np(pthread_self(), sizeof(set), &set);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set))
      cpus.push_back(cpu);
  return cpus;
}

void recordCpus(pipe_rank *r) {
  pipe_step_begin(r);
  std::lock_guard<std::mutex> lock(cpuMutex);
  cpusSeen[static_cast<size_t>(reportOf(r).rank)] = allowedCpus();
  pipe_step_end(r);
}

TEST(Run, RankCpusAreDisjointSetsOfTheAllowedCpus) {
  const std::vector<int> allowed = allowedCpus();
  const int n = static_cast<int>(allowed.size());
  EXPECT_EQ(rankCpus(1, n), std::vector<std::vector<int>>{allowed});
  EXPECT_TRUE(rankCpus(n + 1, 1).empty()) << "more ranks than CPUs: nothing pinned";
  EXPECT_TRUE(rankCpus(1, n + 1).empty());
  EXPECT_TRUE(rankCpus(0, 1).empty());
  const std::vector<std::vector<int>> one = rankCpus(n, 1);
  ASSERT_EQ(static_cast<int>(one.size()), n);
  for (int k = 0; k < n; ++k)
    EXPECT_EQ(one[static_cast<size_t>(k)], std::vector<int>{allowed[static_cast<size_t>(k)]});
}

TEST(Run, EachRankThreadRunsOnItsOwnCpusWhenThereAreEnough) {
  const std::vector<std::vector<int>> expected = rankCpus(2, 1);
  if (expected.empty())
    GTEST_SKIP() << "fewer than two CPUs: ranks are not pinned";
  for (bool pin : {true, false}) {
    cpusSeen.assign(2, {});
    RunSettings settings = settingsFor(2);
    settings.pinThreads = pin;
    std::atomic<int> notPinned{0};
    RunHooks hooks;
    hooks.notPinned = [&](int, const std::string &) { ++notPinned; };
    ASSERT_EQ(runInThreads(settings, {{noSetup, recordCpus}, {noSetup, recordCpus}}, 1, hooks),
              "");
    EXPECT_EQ(notPinned, 0) << "the hook reports only a failure to pin";
    if (pin) {
      EXPECT_EQ(cpusSeen, expected);
    } else {
      EXPECT_EQ(cpusSeen[0], allowedCpus()) << "unpinned: every CPU the process may use";
      EXPECT_EQ(cpusSeen[1], allowedCpus());
    }
  }
}

TEST(RunFailure, AFailingRankStopsTheOthersAtOnce) {
  double seconds;
  std::string failure = runFailing("fail", 30, &seconds);
  EXPECT_EQ(failure, "rank 0, node bad_reshape (F0@s0): pipe_view: f32 [2, 3] has 6 elements, "
                     "the view [7] wants 7");
  EXPECT_LT(seconds, 3.0) << "rank 1 was waiting with a 30 s timeout";
}

TEST(RunFailure, ReceiveTimeoutNamesRankPeerTagKindAndMicrobatch) {
  double seconds;
  std::string failure = runFailing("timeout", 1, &seconds);
  EXPECT_EQ(failure, "rank 1, node wait_here (B2@s1): no gradient from rank 0 (tag 5, "
                     "micro-batch 2) within 1 s");
  EXPECT_GE(seconds, 1.0);
  EXPECT_LT(seconds, 3.0);
}

TEST(RunFailure, AnExceptionInARankProgram) {
  double seconds;
  EXPECT_EQ(runFailing("throw", 30, &seconds), "rank 1: boom");
  EXPECT_LT(seconds, 3.0);
}

TEST(RunFailure, AMessageNobodyReceives) {
  double seconds;
  EXPECT_EQ(
      runFailing("unreceived", 30, &seconds),
      "rank 1: the activation from rank 0 (tag 2, micro-batch 0) was sent but never received");
  EXPECT_LT(seconds, 3.0);
}

void failInReplicaOne(pipe_rank *r) {
  pipe_step_begin(r);
  pipe_action_begin(r, PIPE_ACTION_FORWARD, 0, 0);
  if (reportOf(r).replica == 1 && reportOf(r).rank == 0) {
    pipe_node(r, 2);
    pipe_view(r, pipe_alloc(r, PIPE_F32, PIPE_INTS(2, 3), PIPE_MEM_WORKSPACE), PIPE_INTS(7));
  }
  pipe_action_end(r);
  pipe_step_end(r);
}

TEST(RunFailure, AFailureNamesTheReplicaAndItsPipelineRank) {
  RunSettings settings = settingsFor(2);
  settings.replicas = 2;
  const RankProgram program{failingSetup, failInReplicaOne};
  EXPECT_EQ(runInThreads(settings, {program, program, program, program}, 1, {}),
            "rank 2 (replica 1's rank 0), node bad_reshape (F0@s0): pipe_view: f32 [2, 3] has 6 "
            "elements, the view [7] wants 7");
}

TEST(RunFailure, AReceiveOfTheWrongShape) {
  double seconds;
  EXPECT_EQ(runFailing("shape", 30, &seconds),
            "rank 1, node wait_here (B2@s1): the activation from rank 0 (tag 2, micro-batch 0) is "
            "f32 [2, 3], expected f32 [3, 2]");
}

TEST(RunFailure, AStepThatDoesNotEnd) {
  double seconds;
  EXPECT_EQ(runFailing("no-step-end", 30, &seconds),
            "rank 1: pipe_program_step returned inside step 0 (no pipe_step_end)");
}

} // namespace
