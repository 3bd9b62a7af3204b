//===- CudnnChoice.h - cuDNN descriptor dims and algorithm choice -*- C++ -*-===//
//
// The host-side decisions of the cuDNN convolutions (Cudnn.cpp), apart from
// any cuDNN call so that they are tested without a GPU (CudnnChoiceTest.cpp):
// a geometry's descriptor dims, and which of cuDNN's ranked algorithms runs.
// Needs cudnn.h for its types and constants only.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_CUDA_CUDNN_CHOICE_H
#define PIPE_RUNTIME_CUDA_CUDNN_CHOICE_H

#include "kernels/WindowMath.h"

#include <cudnn.h>

#include <cstddef>
#include <cstdint>

namespace piperun::cuda {

/// The most workspace a convolution's algorithm may ask for.
constexpr size_t kCudnnWorkspaceCap = size_t(256) << 20;

/// Dims of the descriptors: [N, C] then 2 spatial dims (1-D and 2-D
/// convolutions: cuDNN's 4-D path) or 3.
struct ConvDims {
  int spatial = 3;
  int x[5] = {}, w[5] = {}, y[5] = {}, pad[3] = {}, stride[3] = {}, dilation[3] = {};
};

/// `g`'s dims as cuDNN's ints; false when one does not fit an int.
inline bool convDims(const ConvGeometry &g, ConvDims &dims) {
  const bool flat = g.in[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && g.pad[0] == 0 &&
                    g.stride[0] == 1 && g.dilation[0] == 1;
  dims.spatial = flat ? 2 : 3;
  const int first = 3 - dims.spatial;
  auto narrow = [](int64_t v, int &to) {
    to = static_cast<int>(v);
    return v >= 0 && v <= INT32_MAX;
  };
  bool ok = narrow(g.batch, dims.x[0]) && narrow(g.channels, dims.x[1]) &&
            narrow(g.outChannels, dims.w[0]) && narrow(g.channelsPerGroup, dims.w[1]) &&
            narrow(g.batch, dims.y[0]) && narrow(g.outChannels, dims.y[1]);
  for (int i = 0; i < dims.spatial; ++i) {
    const int d = first + i;
    ok = ok && narrow(g.in[d], dims.x[2 + i]) && narrow(g.kernel[d], dims.w[2 + i]) &&
         narrow(g.out[d], dims.y[2 + i]) && narrow(g.pad[d], dims.pad[i]) &&
         narrow(g.stride[d], dims.stride[i]) && narrow(g.dilation[d], dims.dilation[i]);
  }
  return ok;
}

/// Packed strides of `dims` (rank n).
inline void packedStrides(const int *dims, int n, int *strides) {
  strides[n - 1] = 1;
  for (int i = n - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
}

/// The first of `count` ranked algorithms (cuDNN's perf results) that ran and
/// runs in FMA math (no tensor cores, so no TF32) within `cap` bytes of
/// workspace, deterministic ones first when `preferDeterministic`; -1 when
/// none does. `workspace` gets the chosen one's.
template <typename Perf>
int chooseAlgorithm(const Perf *perf, int count, bool preferDeterministic, size_t cap,
                    size_t &workspace) {
  for (int pass = preferDeterministic ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < count; ++i) {
      const Perf &p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.mathType == CUDNN_TENSOR_OP_MATH ||
          p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION || p.memory > cap)
        continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC)
        continue;
      workspace = p.memory;
      return static_cast<int>(p.algo);
    }
  return -1;
}

} // namespace piperun::cuda

#endif // PIPE_RUNTIME_CUDA_CUDNN_CHOICE_H
