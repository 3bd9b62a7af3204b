//===- SplitSumsTest.cpp - the vector sums split as the CUDA kernels split them ===//
//
// The CUDA kernels share a vector among the 32 lanes of a warp (or the
// threads of a block): each takes every 32nd element from its own first one,
// and the partial sums meet at lane 0 down a shuffle tree (Kernels.cu). The
// pieces they call are the host-device functions of kernels/AxisMath.h and
// kernels/Plans.h. Here the same split runs on the host, lane by lane, and
// must give the whole-vector functions' results (the CPU kernels' order) to
// float rounding, on random shapes; the channel walk must visit exactly the
// strided subset, in order.
//
//===----------------------------------------------------------------------===//
#include "kernels/AxisMath.h"
#include "kernels/Plans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

using namespace piperun;

namespace {

constexpr int kLanes = 32;

/// Lane 0's total after a shuffle-down tree over kLanes partial values.
double treeSum(std::vector<double> v, const std::function<double(double, double)> &combine) {
  for (int offset = kLanes / 2; offset > 0; offset /= 2)
    for (int lane = 0; lane < offset; ++lane)
      v[lane] = combine(v[lane], v[lane + offset]);
  return v[0];
}
double treeSum(const std::vector<double> &v) {
  return treeSum(v, [](double a, double b) { return a + b; });
}

std::vector<float> randomValues(std::mt19937 &random, size_t n) {
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<float> values(n);
  for (float &v : values)
    v = normal(random);
  return values;
}

/// Position p's softmax maximum and sum of exps, computed lane by lane.
struct LaneSoftmax {
  float maximum;
  double sum;
};
LaneSoftmax softmaxByLanes(const AxisLayout &l, int64_t p, const float *x) {
  LaneSoftmax result{-INFINITY, 0};
  for (int lane = 0; lane < kLanes; ++lane) {
    const float m = softmaxMaximum(l, p, x, lane, kLanes);
    result.maximum = m > result.maximum ? m : result.maximum;
  }
  std::vector<double> sums(kLanes);
  for (int lane = 0; lane < kLanes; ++lane)
    sums[lane] = softmaxSum(l, p, x, result.maximum, lane, kLanes);
  result.sum = treeSum(sums);
  return result;
}

void expectClose(const std::vector<float> &split, const std::vector<float> &whole,
                 const std::string &what) {
  ASSERT_EQ(split.size(), whole.size()) << what;
  for (size_t i = 0; i < whole.size(); ++i)
    ASSERT_NEAR(split[i], whole[i], 1e-6 * (1 + std::fabs(whole[i]))) << what << " at " << i;
}

} // namespace

TEST(SplitSums, TheChannelWalkVisitsExactlyTheStridedSubsetInOrder) {
  std::mt19937 random(11);
  auto pick = [&](int low, int high) { return std::uniform_int_distribution<int>(low, high)(random); };
  for (int trial = 0; trial < 300; ++trial) {
    ChannelLayout l;
    l.batch = pick(1, 4);
    l.channels = pick(1, 3);
    l.spatial = pick(1, 9);
    const int64_t c = pick(0, static_cast<int>(l.channels) - 1);
    const int64_t step = pick(1, 40), first = pick(0, static_cast<int>(step) + 5);
    std::vector<int64_t> visited, expected;
    forChannel(l, c, first, step, [&](int64_t i) { visited.push_back(i); });
    for (int64_t k = first; k < l.count(); k += step)
      expected.push_back(((k / l.spatial) * l.channels + c) * l.spatial + k % l.spatial);
    ASSERT_EQ(visited, expected) << "batch " << l.batch << " channels " << l.channels
                                 << " spatial " << l.spatial << " c " << c << " first " << first
                                 << " step " << step;
  }
}

TEST(SplitSums, SoftmaxAndItsGradientByLanesAgreeWithTheWholeVector) {
  std::mt19937 random(12);
  for (int length : {1, 31, 32, 33, 100, 1024}) {
    for (bool logForm : {false, true}) {
      AxisLayout l;
      l.outer = 3;
      l.length = length;
      const size_t n = static_cast<size_t>(l.outer * l.length);
      const std::vector<float> x = randomValues(random, n), dy = randomValues(random, n);
      std::vector<float> whole(n), split(n), gradWhole(n), gradSplit(n);
      for (int64_t p = 0; p < l.positions(); ++p) {
        softmaxPosition(l, p, x.data(), whole.data(), logForm);
        const LaneSoftmax lanes = softmaxByLanes(l, p, x.data());
        for (int lane = 0; lane < kLanes; ++lane)
          softmaxWrite(l, p, x.data(), split.data(), logForm, lanes.maximum, lanes.sum, lane,
                       kLanes);
        std::vector<double> sums(kLanes);

        softmaxGradPosition(l, p, whole.data(), dy.data(), gradWhole.data(), logForm);
        for (int lane = 0; lane < kLanes; ++lane)
          sums[lane] = softmaxGradSum(l, p, whole.data(), dy.data(), logForm, lane, kLanes);
        const double reduced = treeSum(sums);
        for (int lane = 0; lane < kLanes; ++lane)
          softmaxGradWrite(l, p, whole.data(), dy.data(), gradSplit.data(), logForm, reduced,
                           lane, kLanes);
      }
      const std::string what = "length " + std::to_string(length) + (logForm ? " log" : "");
      expectClose(split, whole, what + " forward");
      expectClose(gradSplit, gradWhole, what + " gradient");
    }
  }
}

TEST(SplitSums, LayerNormAndItsGradientByLanesAgreeWithTheWholeRow) {
  std::mt19937 random(13);
  for (int width : {1, 32, 77, 768}) {
    const int64_t rows = 4;
    const size_t n = static_cast<size_t>(rows * width);
    const std::vector<float> x = randomValues(random, n), dy = randomValues(random, n);
    const std::vector<float> gamma = randomValues(random, width), beta = randomValues(random, width);
    std::vector<float> whole(n), split(n), mean(rows), invstd(rows), splitMean(rows),
        splitInvstd(rows), dxWhole(n), dxSplit(n);
    for (int64_t row = 0; row < rows; ++row) {
      layerNormRow(row, width, x.data(), gamma.data(), beta.data(), 1e-5, whole.data(),
                   mean.data(), invstd.data());
      const float *in = x.data() + row * width;
      std::vector<double> parts(kLanes);
      for (int lane = 0; lane < kLanes; ++lane)
        parts[lane] = rowSum(in, width, lane, kLanes);
      const double mu = treeSum(parts) / width;
      for (int lane = 0; lane < kLanes; ++lane)
        parts[lane] = rowSquares(in, width, mu, lane, kLanes);
      const double inv = 1.0 / std::sqrt(treeSum(parts) / width + 1e-5);
      for (int lane = 0; lane < kLanes; ++lane)
        layerNormWrite(row, width, x.data(), gamma.data(), beta.data(), mu, inv, split.data(),
                       splitMean.data(), splitInvstd.data(), lane, kLanes);

      layerNormGradRow(row, width, x.data(), dy.data(), gamma.data(), mean.data(), invstd.data(),
                       dxWhole.data());
      std::vector<double> h(kLanes), hx(kLanes);
      for (int lane = 0; lane < kLanes; ++lane)
        layerNormGradSums(row, width, x.data(), dy.data(), gamma.data(), mean[row], invstd[row],
                          lane, kLanes, h[lane], hx[lane]);
      layerNormGradWrite(row, width, x.data(), dy.data(), gamma.data(), mean[row], invstd[row],
                         treeSum(h) / width, treeSum(hx) / width, dxSplit.data(), 0, 1);
    }
    const std::string what = "width " + std::to_string(width);
    expectClose(split, whole, what + " y");
    expectClose(splitMean, mean, what + " mean");
    expectClose(splitInvstd, invstd, what + " invstd");
    expectClose(dxSplit, dxWhole, what + " dx");
  }
}

TEST(SplitSums, BatchNormByBlockThreadsAgreesWithTheWholeChannel) {
  std::mt19937 random(14);
  constexpr int kThreads = 256;
  for (int64_t spatial : {1, 7, 300}) {
    ChannelLayout l;
    l.batch = 3;
    l.channels = 4;
    l.spatial = spatial;
    const size_t n = static_cast<size_t>(l.batch * l.channels * l.spatial);
    const std::vector<float> x = randomValues(random, n), dy = randomValues(random, n);
    const std::vector<float> gamma = randomValues(random, 4), beta = randomValues(random, 4);
    std::vector<double> abWhole(8), abSplit(8), termsWhole(20), termsSplit(20);
    std::vector<float> meanWhole(4), invWhole(4), meanSplit(4), invSplit(4), dsWhole(4),
        dbWhole(4), dsSplit(4), dbSplit(4);
    for (int64_t c = 0; c < l.channels; ++c) {
      batchNormTrainChannel(l, c, x.data(), gamma.data(), beta.data(), 1e-5, 0.9,
                            meanWhole.data(), invWhole.data(), nullptr, nullptr, abWhole.data());
      double sum = 0, squares = 0;
      for (int t = 0; t < kThreads; ++t)
        sum += channelSum(l, c, x.data(), t, kThreads);
      const double mean = sum / static_cast<double>(l.count());
      for (int t = 0; t < kThreads; ++t)
        squares += channelSquares(l, c, x.data(), mean, t, kThreads);
      batchNormTrainFinish(l, c, mean, squares, gamma.data(), beta.data(), 1e-5, 0.9,
                           meanSplit.data(), invSplit.data(), nullptr, nullptr, abSplit.data());

      batchNormGradChannel(l, c, x.data(), dy.data(), gamma.data(), meanWhole.data(),
                           invWhole.data(), dsWhole.data(), dbWhole.data(), termsWhole.data());
      double sumDy = 0, sumDyXhat = 0;
      for (int t = 0; t < kThreads; ++t)
        channelGradSums(l, c, x.data(), dy.data(), meanWhole[c], invWhole[c], t, kThreads, sumDy,
                        sumDyXhat);
      batchNormGradFinish(l, c, gamma.data(), meanWhole[c], invWhole[c], sumDy, sumDyXhat,
                          dsSplit.data(), dbSplit.data(), termsSplit.data());
    }
    const std::string what = "spatial " + std::to_string(spatial);
    expectClose(meanSplit, meanWhole, what + " mean");
    expectClose(invSplit, invWhole, what + " invstd");
    expectClose(dsSplit, dsWhole, what + " dscale");
    expectClose(dbSplit, dbWhole, what + " dbias");
    for (size_t i = 0; i < abWhole.size(); ++i)
      EXPECT_NEAR(abSplit[i], abWhole[i], 1e-9 * (1 + std::fabs(abWhole[i]))) << what;
    for (size_t i = 0; i < termsWhole.size(); ++i)
      EXPECT_NEAR(termsSplit[i], termsWhole[i], 1e-9 * (1 + std::fabs(termsWhole[i]))) << what;
  }
}

TEST(SplitSums, ReductionsByLanesAgreeWithTheWholeOutput) {
  std::mt19937 random(15);
  // x [5, 40] reduced over dim 1 (adjacent inputs) and over dim 0 (strided).
  const std::vector<float> x = randomValues(random, 200);
  for (int32_t fn : {PIPE_REDUCE_SUM, PIPE_REDUCE_MEAN, PIPE_REDUCE_MAX, PIPE_REDUCE_MIN,
                     PIPE_REDUCE_PROD}) {
    for (int axis : {0, 1}) {
      ReduceGeometry g;
      g.keptRank = g.reducedRank = 1;
      g.keptShape[0] = axis == 1 ? 5 : 40;
      g.keptStride[0] = axis == 1 ? 40 : 1;
      g.reducedShape[0] = axis == 1 ? 40 : 5;
      g.reducedStride[0] = axis == 1 ? 1 : 40;
      g.outputs = g.keptShape[0];
      g.reduceCount = g.reducedShape[0];
      for (int64_t o = 0; o < g.outputs; ++o) {
        const float whole = reduceOutput(fn, g, o, x.data());
        std::vector<double> parts(kLanes);
        for (int lane = 0; lane < kLanes; ++lane)
          parts[lane] = reducePartial(fn, g, reduceBase(g, o), x.data(), lane, kLanes,
                                      reduceInitial(fn));
        const float split = reduceFinish(
            fn, g, treeSum(parts, [fn](double a, double b) { return reduceCombine(fn, a, b); }));
        ASSERT_NEAR(split, whole, 1e-6 * (1 + std::fabs(whole)))
            << "fn " << fn << " axis " << axis << " output " << o;
      }
    }
  }
}

TEST(SplitSums, CrossEntropyByLanesAgreesWithTheWholePosition) {
  std::mt19937 random(16);
  LossGeometry g;
  g.classes = 1000;
  g.positions = 6;
  g.counted = 5;
  const std::vector<float> logits = randomValues(random, 6000);
  const std::vector<int64_t> labels{3, 999, 0, -100, 512, 77};
  std::vector<float> logProbWhole(6000), logProbSplit(6000), gradWhole(6000), gradSplit(6000);
  const AxisLayout l = g.layout();
  for (int64_t p = 0; p < g.positions; ++p) {
    const double whole = crossEntropyPosition(g, p, logits.data(), labels[p], logProbWhole.data());
    const LaneSoftmax lanes = softmaxByLanes(l, p, logits.data());
    for (int lane = 0; lane < kLanes; ++lane)
      softmaxWrite(l, p, logits.data(), logProbSplit.data(), true, lanes.maximum, lanes.sum, lane,
                   kLanes);
    EXPECT_NEAR(crossEntropyPicked(g, p, logits.data(), labels[p], lanes.maximum, lanes.sum),
                whole, 1e-9);
    crossEntropyGradPosition(g, p, 0.5f, logProbWhole.data(), labels[p], gradWhole.data());
  }
  // The gradient element by element, as its CUDA kernel runs it.
  for (int64_t e = 0; e < 6000; ++e)
    gradSplit[e] = crossEntropyGradValue(g, 0.5f, logProbWhole[e], labels[e / 1000], e % 1000);
  expectClose(logProbSplit, logProbWhole, "log-probabilities");
  EXPECT_EQ(gradSplit, gradWhole);
}
