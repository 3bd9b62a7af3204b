//===- Cudnn.cpp - convolutions by cuDNN on a rank's stream ---------------===//
//
// The native convolution kernels (NativeKernels.cpp) ask the device's library
// first: cuDNN's legacy convolution API, loaded at first use, fp32 data with
// FMA math only (no TF32), so that its results stay within float rounding of
// the CPU's GEMMs. A geometry it cannot express (pads that differ between the
// two ends of a dim and change the output size), a library that does not load,
// or PIPE_CUDNN=0 leave the convolution to im2col and cuBLAS. Each (pass,
// geometry) gets its descriptors and algorithm once: the one cuDNN's
// heuristics rank first among those that run in FMA math within the workspace
// cap, deterministic ones first for the two gradients (as torch's default,
// benchmark off).
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaDevice.h"
#include "cuda/CudnnChoice.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace piperun::cuda {

namespace {
std::string statusText(const Cudnn &library, cudnnStatus_t status) {
  return library.errorString ? library.errorString(status) : std::to_string(status);
}
} // namespace

const Cudnn &cudnn() {
  static Cudnn library;
  static std::once_flag once;
  std::call_once(once, [] {
    if (const char *setting = std::getenv("PIPE_CUDNN"); setting && std::string(setting) == "0") {
      library.error = "turned off by PIPE_CUDNN=0";
      return;
    }
    const std::string name = "libcudnn.so." + std::to_string(CUDNN_MAJOR);
    void *handle = openCudaLibrary(name, "PIPE_CUDNN", library.error);
    if (handle) {
      auto load = [&](auto &function, const char *symbol) {
        loadSymbol(handle, name, function, symbol, library.error);
      };
      load(library.create, "cudnnCreate");
      load(library.destroy, "cudnnDestroy");
      load(library.setStream, "cudnnSetStream");
      load(library.errorString, "cudnnGetErrorString");
      load(library.createTensor, "cudnnCreateTensorDescriptor");
      load(library.setTensor, "cudnnSetTensorNdDescriptor");
      load(library.destroyTensor, "cudnnDestroyTensorDescriptor");
      load(library.createFilter, "cudnnCreateFilterDescriptor");
      load(library.setFilter, "cudnnSetFilterNdDescriptor");
      load(library.destroyFilter, "cudnnDestroyFilterDescriptor");
      load(library.createConvolution, "cudnnCreateConvolutionDescriptor");
      load(library.setConvolution, "cudnnSetConvolutionNdDescriptor");
      load(library.setGroupCount, "cudnnSetConvolutionGroupCount");
      load(library.setMathType, "cudnnSetConvolutionMathType");
      load(library.destroyConvolution, "cudnnDestroyConvolutionDescriptor");
      load(library.outputDim, "cudnnGetConvolutionNdForwardOutputDim");
      load(library.forwardAlgorithms, "cudnnGetConvolutionForwardAlgorithm_v7");
      load(library.forwardWorkspace, "cudnnGetConvolutionForwardWorkspaceSize");
      load(library.forward, "cudnnConvolutionForward");
      load(library.dataAlgorithms, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      load(library.dataWorkspace, "cudnnGetConvolutionBackwardDataWorkspaceSize");
      load(library.backwardData, "cudnnConvolutionBackwardData");
      load(library.filterAlgorithms, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      load(library.filterWorkspace, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
      load(library.backwardFilter, "cudnnConvolutionBackwardFilter");
    }
    if (!library.error.empty()) // PIPE_CUDNN=0 returned above, silently
      std::fprintf(stderr,
                   "pipe-run: warning: cuDNN: %s: convolutions run as im2col and cuBLAS GEMMs\n",
                   library.error.c_str());
  });
  return library;
}

/// Descriptors of x [N, C, spatial...], w [K, C / group, kernel...] and y [N,
/// K, out...] (dy and dx share y's and x's), the convolution, and the chosen
/// algorithm of one pass with its workspace.
struct CudnnConvPlan {
  explicit CudnnConvPlan(const Cudnn &library) : library(library) {}
  ~CudnnConvPlan() {
    if (x)
      library.destroyTensor(x);
    if (y)
      library.destroyTensor(y);
    if (w)
      library.destroyFilter(w);
    if (conv)
      library.destroyConvolution(conv);
  }
  CudnnConvPlan(const CudnnConvPlan &) = delete;
  CudnnConvPlan &operator=(const CudnnConvPlan &) = delete;

  const Cudnn &library;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algorithm = 0;
  size_t workspace = 0;
};

namespace {

/// The plan of `pass` of `g`, or null when cuDNN does not take it.
std::shared_ptr<CudnnConvPlan> makePlan(cudnnHandle_t handle, ConvPass pass,
                                        const ConvGeometry &g) {
  const Cudnn &library = cudnn();
  ConvDims dims;
  if (!convDims(g, dims))
    return nullptr;
  const int rank = 2 + dims.spatial;
  auto plan = std::make_shared<CudnnConvPlan>(library);
  int xStrides[5], yStrides[5];
  packedStrides(dims.x, rank, xStrides);
  packedStrides(dims.y, rank, yStrides);
  auto ok = [](cudnnStatus_t status) { return status == CUDNN_STATUS_SUCCESS; };
  if (!ok(library.createTensor(&plan->x)) || !ok(library.createTensor(&plan->y)) ||
      !ok(library.createFilter(&plan->w)) || !ok(library.createConvolution(&plan->conv)) ||
      !ok(library.setTensor(plan->x, CUDNN_DATA_FLOAT, rank, dims.x, xStrides)) ||
      !ok(library.setTensor(plan->y, CUDNN_DATA_FLOAT, rank, dims.y, yStrides)) ||
      !ok(library.setFilter(plan->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, rank, dims.w)) ||
      !ok(library.setConvolution(plan->conv, dims.spatial, dims.pad, dims.stride, dims.dilation,
                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
      !ok(library.setGroupCount(plan->conv, static_cast<int>(g.group))) ||
      !ok(library.setMathType(plan->conv, CUDNN_FMA_MATH)))
    return nullptr;
  // Pads applied at both ends must give y's own size (symmetricPadsGiveTheOutput).
  int out[5];
  if (!ok(library.outputDim(plan->conv, plan->x, plan->w, rank, out)))
    return nullptr;
  for (int i = 0; i < rank; ++i)
    if (out[i] != dims.y[i])
      return nullptr;
  int returned = 0;
  switch (pass) {
  case ConvPass::Forward: {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    if (!ok(library.forwardAlgorithms(handle, plan->x, plan->w, plan->conv, plan->y,
                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf)))
      return nullptr;
    plan->algorithm = chooseAlgorithm(perf, returned, false, kCudnnWorkspaceCap, plan->workspace);
    if (plan->algorithm < 0 ||
        !ok(library.forwardWorkspace(handle, plan->x, plan->w, plan->conv, plan->y,
                                     static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm),
                                     &plan->workspace)))
      return nullptr;
    break;
  }
  case ConvPass::GradInput: {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    if (!ok(library.dataAlgorithms(handle, plan->w, plan->y, plan->conv, plan->x,
                                   CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf)))
      return nullptr;
    plan->algorithm = chooseAlgorithm(perf, returned, true, kCudnnWorkspaceCap, plan->workspace);
    if (plan->algorithm < 0 ||
        !ok(library.dataWorkspace(handle, plan->w, plan->y, plan->conv, plan->x,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algorithm),
                                  &plan->workspace)))
      return nullptr;
    break;
  }
  case ConvPass::GradWeight: {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    if (!ok(library.filterAlgorithms(handle, plan->x, plan->y, plan->conv, plan->w,
                                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf)))
      return nullptr;
    plan->algorithm = chooseAlgorithm(perf, returned, true, kCudnnWorkspaceCap, plan->workspace);
    if (plan->algorithm < 0 ||
        !ok(library.filterWorkspace(handle, plan->x, plan->y, plan->conv, plan->w,
                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algorithm),
                                    &plan->workspace)))
      return nullptr;
    break;
  }
  }
  return plan;
}

} // namespace

const CudnnConvPlan *CudaLauncher::convPlan(ConvPass pass, const ConvGeometry &g) {
  std::vector<int64_t> key{static_cast<int64_t>(pass), g.batch, g.channels, g.outChannels,
                           g.group};
  for (int d = 0; d < 3; ++d)
    key.insert(key.end(), {g.in[d], g.out[d], g.kernel[d], g.stride[d], g.pad[d], g.dilation[d]});
  auto found = convPlans_.find(key);
  if (found == convPlans_.end()) {
    stream();
    found = convPlans_.emplace(key, makePlan(device_.dnn(), pass, g)).first;
  }
  return found->second.get();
}

int64_t CudaLauncher::libraryConvWorkspace(ConvPass pass, const ConvGeometry &g) {
  if (cudnnFailed_ || !cudnn().error.empty() || !symmetricPadsGiveTheOutput(g))
    return -1;
  try {
    const CudnnConvPlan *plan = convPlan(pass, g);
    return plan ? static_cast<int64_t>(plan->workspace) : -1;
  } catch (const DeviceError &error) {
    // No handle (cudnnCreate failed): this rank's convolutions go to the GEMMs.
    cudnnFailed_ = true;
    std::fprintf(stderr, "pipe-run: warning: %s: convolutions run as im2col and cuBLAS GEMMs\n",
                 error.what());
    return -1;
  }
}

void CudaLauncher::libraryConv(ConvPass pass, const ConvGeometry &g, const float *a,
                               const float *b, float *out, void *workspace,
                               int64_t workspaceBytes) {
  const CudnnConvPlan *plan = convPlan(pass, g);
  if (!plan || workspaceBytes < static_cast<int64_t>(plan->workspace))
    throw DeviceError("cuDNN: a convolution it was not planned for");
  stream();
  cudnnHandle_t handle = device_.dnn();
  const Cudnn &library = cudnn();
  const float one = 1.0f, zero = 0.0f;
  const size_t bytes = static_cast<size_t>(workspaceBytes);
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  const char *call = "";
  switch (pass) {
  case ConvPass::Forward:
    call = "cudnnConvolutionForward";
    status = library.forward(handle, &one, plan->x, a, plan->w, b, plan->conv,
                             static_cast<cudnnConvolutionFwdAlgo_t>(plan->algorithm), workspace,
                             bytes, &zero, plan->y, out);
    break;
  case ConvPass::GradInput:
    call = "cudnnConvolutionBackwardData";
    status = library.backwardData(handle, &one, plan->w, b, plan->y, a, plan->conv,
                                  static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->algorithm),
                                  workspace, bytes, &zero, plan->x, out);
    break;
  case ConvPass::GradWeight:
    call = "cudnnConvolutionBackwardFilter";
    status = library.backwardFilter(handle, &one, plan->x, a, plan->y, b, plan->conv,
                                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->algorithm),
                                    workspace, bytes, &zero, plan->w, out);
    break;
  }
  if (status != CUDNN_STATUS_SUCCESS)
    throw DeviceError(std::string("cuDNN: ") + call + ": " + statusText(library, status));
}

} // namespace piperun::cuda
