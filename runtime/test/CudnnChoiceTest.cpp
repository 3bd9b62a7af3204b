//===- CudnnChoiceTest.cpp - cuDNN's descriptor dims and algorithm choice ---===//
//
// What the cuDNN convolutions decide on the host (cuda/CudnnChoice.h), without
// a GPU: a 1-D or 2-D geometry takes cuDNN's 4-D descriptors and a 3-D one the
// 5-D ones, dims that do not fit an int are refused, and of cuDNN's ranked
// algorithms the first that ran, in FMA math, within the workspace cap is
// chosen, deterministic ones first for the gradients. Built where the CUDA
// toolkit is (its headers only).
//
//===----------------------------------------------------------------------===//
#include "cuda/CudnnChoice.h"

#include <gtest/gtest.h>

#include <vector>

using namespace piperun;
using namespace piperun::cuda;

namespace {

/// A geometry of `spatial` dims (right-aligned, as convChecks fills them).
ConvGeometry geometry(int spatial, int64_t size) {
  ConvGeometry g;
  g.batch = 2;
  g.channels = 4;
  g.outChannels = 6;
  g.group = 2;
  g.channelsPerGroup = 2;
  g.outPerGroup = 3;
  for (int d = 3 - spatial; d < 3; ++d) {
    g.in[d] = size;
    g.kernel[d] = 3;
    g.pad[d] = 1;
    g.stride[d] = 1;
    g.dilation[d] = 1;
    g.out[d] = size;
  }
  return g;
}

std::vector<int> dimsOf(const int *dims, int n) { return std::vector<int>(dims, dims + n); }

} // namespace

TEST(CudnnChoice, OneAndTwoSpatialDimsTakeFourDimensionalDescriptors) {
  ConvDims dims;
  ASSERT_TRUE(convDims(geometry(1, 7), dims));
  EXPECT_EQ(dims.spatial, 2);
  EXPECT_EQ(dimsOf(dims.x, 4), (std::vector<int>{2, 4, 1, 7}));
  EXPECT_EQ(dimsOf(dims.w, 4), (std::vector<int>{6, 2, 1, 3}));
  EXPECT_EQ(dimsOf(dims.y, 4), (std::vector<int>{2, 6, 1, 7}));
  EXPECT_EQ(dimsOf(dims.pad, 2), (std::vector<int>{0, 1})) << "the added dim is not padded";
  ASSERT_TRUE(convDims(geometry(2, 5), dims));
  EXPECT_EQ(dims.spatial, 2);
  EXPECT_EQ(dimsOf(dims.x, 4), (std::vector<int>{2, 4, 5, 5}));
  ASSERT_TRUE(convDims(geometry(3, 5), dims));
  EXPECT_EQ(dims.spatial, 3);
  EXPECT_EQ(dimsOf(dims.x, 5), (std::vector<int>{2, 4, 5, 5, 5}));
  EXPECT_EQ(dimsOf(dims.stride, 3), (std::vector<int>{1, 1, 1}));
  // A 3-D geometry whose depth is 1 but padded stays 3-D.
  ConvGeometry padded = geometry(3, 5);
  padded.in[0] = padded.out[0] = padded.kernel[0] = 1;
  ASSERT_TRUE(convDims(padded, dims));
  EXPECT_EQ(dims.spatial, 3);
  int strides[4];
  packedStrides(std::vector<int>{2, 4, 5, 5}.data(), 4, strides);
  EXPECT_EQ(dimsOf(strides, 4), (std::vector<int>{100, 25, 5, 1}));
}

TEST(CudnnChoice, DimsBeyondAnIntAreRefused) {
  ConvGeometry g = geometry(2, 5);
  g.batch = int64_t(1) << 31;
  ConvDims dims;
  EXPECT_FALSE(convDims(g, dims));
}

TEST(CudnnChoice, TheFirstRankedAlgorithmInFmaMathWithinTheCapDeterministicFirstForGradients) {
  auto perf = [](int algo, cudnnStatus_t status, cudnnMathType_t math, size_t memory,
                 cudnnDeterminism_t determinism) {
    cudnnConvolutionBwdFilterAlgoPerf_t p{};
    p.algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo);
    p.status = status;
    p.mathType = math;
    p.memory = memory;
    p.determinism = determinism;
    return p;
  };
  const size_t cap = 1000;
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> ranked{
      perf(0, CUDNN_STATUS_NOT_SUPPORTED, CUDNN_FMA_MATH, 0, CUDNN_DETERMINISTIC),
      perf(1, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH, 0, CUDNN_DETERMINISTIC),
      perf(2, CUDNN_STATUS_SUCCESS, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, 0, CUDNN_DETERMINISTIC),
      perf(3, CUDNN_STATUS_SUCCESS, CUDNN_FMA_MATH, 5000, CUDNN_DETERMINISTIC),
      perf(4, CUDNN_STATUS_SUCCESS, CUDNN_DEFAULT_MATH, 100, CUDNN_NON_DETERMINISTIC),
      perf(5, CUDNN_STATUS_SUCCESS, CUDNN_FMA_MATH, 200, CUDNN_DETERMINISTIC)};
  size_t workspace = 0;
  EXPECT_EQ(chooseAlgorithm(ranked.data(), 6, false, cap, workspace), 4)
      << "the forward takes the first that ran in FMA math within the cap";
  EXPECT_EQ(workspace, 100u);
  EXPECT_EQ(chooseAlgorithm(ranked.data(), 6, true, cap, workspace), 5)
      << "a gradient takes a deterministic one first";
  EXPECT_EQ(workspace, 200u);
  EXPECT_EQ(chooseAlgorithm(ranked.data(), 5, true, cap, workspace), 4)
      << "and a non-deterministic one when no deterministic one qualifies";
  EXPECT_EQ(chooseAlgorithm(ranked.data(), 4, false, cap, workspace), -1)
      << "none: failed, tensor cores, over the cap";
  EXPECT_EQ(chooseAlgorithm(ranked.data(), 4, false, 10000, workspace), 3);
}
