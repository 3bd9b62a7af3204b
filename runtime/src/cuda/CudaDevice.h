//===- CudaDevice.h - a rank's GPU: memory, stream, cuBLAS handle -*- C++ -*-===//
//
// Built only with the CUDA toolkit. The device of one rank: cudaMalloc'd
// memory of one GPU, the rank's own non-blocking stream, cuBLAS and cuDNN
// handles on that stream, and the launches of the native kernels (Kernels.cu,
// cuBLAS, cuDNN's convolutions: Cudnn.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_CUDA_CUDA_DEVICE_H
#define PIPE_RUNTIME_CUDA_CUDA_DEVICE_H

#include "Device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <map>
#include <memory>
#include <vector>

namespace piperun::cuda {

/// Throws DeviceError naming `call` when `error` is not cudaSuccess.
void check(const char *call, cudaError_t error);

/// The cuBLAS calls the backend makes, from the library loaded at first use.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) setStream = nullptr;
  decltype(&cublasSetMathMode) setMathMode = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasSgemmStridedBatched) sgemmStridedBatched = nullptr;
  decltype(&cublasGetStatusString) statusString = nullptr;
  std::string error; ///< why it could not be loaded ("" when it was)
};
/// Loads cuBLAS once (see `error`).
const Cublas &cublas();

/// The cuDNN calls the backend makes (convolutions), from the library loaded
/// at first use.
struct Cudnn {
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) setStream = nullptr;
  decltype(&cudnnGetErrorString) errorString = nullptr;
  decltype(&cudnnCreateTensorDescriptor) createTensor = nullptr;
  decltype(&cudnnSetTensorNdDescriptor) setTensor = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroyTensor = nullptr;
  decltype(&cudnnCreateFilterDescriptor) createFilter = nullptr;
  decltype(&cudnnSetFilterNdDescriptor) setFilter = nullptr;
  decltype(&cudnnDestroyFilterDescriptor) destroyFilter = nullptr;
  decltype(&cudnnCreateConvolutionDescriptor) createConvolution = nullptr;
  decltype(&cudnnSetConvolutionNdDescriptor) setConvolution = nullptr;
  decltype(&cudnnSetConvolutionGroupCount) setGroupCount = nullptr;
  decltype(&cudnnSetConvolutionMathType) setMathType = nullptr;
  decltype(&cudnnDestroyConvolutionDescriptor) destroyConvolution = nullptr;
  decltype(&cudnnGetConvolutionNdForwardOutputDim) outputDim = nullptr;
  decltype(&cudnnGetConvolutionForwardAlgorithm_v7) forwardAlgorithms = nullptr;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) forwardWorkspace = nullptr;
  decltype(&cudnnConvolutionForward) forward = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataAlgorithm_v7) dataAlgorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardDataWorkspaceSize) dataWorkspace = nullptr;
  decltype(&cudnnConvolutionBackwardData) backwardData = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterAlgorithm_v7) filterAlgorithms = nullptr;
  decltype(&cudnnGetConvolutionBackwardFilterWorkspaceSize) filterWorkspace = nullptr;
  decltype(&cudnnConvolutionBackwardFilter) backwardFilter = nullptr;
  std::string error; ///< why it could not be loaded, or PIPE_CUDNN=0 ("" when it was)
};
/// Loads cuDNN once (see `error`); $PIPE_CUDNN names the file, 0 turns it off.
const Cudnn &cudnn();

/// The dlopen'd library `name` (major version appended by the caller):
/// $environment's path when set, else the loader's search path, then the
/// toolkit's folders. Null with `error` set when none loads.
void *openCudaLibrary(const std::string &name, const char *environment, std::string &error);
/// Points `function` at `symbol` of the library `handle` (named `name`); the
/// first symbol missing is said in `error`.
template <typename Function>
void loadSymbol(void *handle, const std::string &name, Function &function, const char *symbol,
                std::string &error) {
  function = reinterpret_cast<Function>(dlsym(handle, symbol));
  if (!function && error.empty())
    error = name + " has no " + symbol;
}

/// One convolution pass of one geometry as cuDNN runs it: its descriptors and
/// chosen algorithm (Cudnn.cpp).
struct CudnnConvPlan;

class CudaDevice;

/// The native kernels' launches on a CUDA device: Kernels.cu and cuBLAS on
/// the rank's stream.
class CudaLauncher final : public KernelLauncher {
public:
  explicit CudaLauncher(CudaDevice &device) : device_(device) {}
  void fill(float *y, float value, int64_t n) override;
  void unary(int32_t fn, const float *x, float *y, int64_t n, double alpha,
             double beta) override;
  void unaryGrad(int32_t fn, const float *saved, const float *dy, float *dx, int64_t n,
                 double alpha, double beta) override;
  void binary(int32_t fn, int32_t dtype, const OperandPlan &plan, void *y, const void *a,
              const void *b) override;
  void select(const OperandPlan &plan, size_t elementSize, void *y, const uint8_t *cond,
              const void *x, const void *z) override;
  void broadcastScaled(const float *c, int64_t rowStride, int64_t columnStride, float scale,
                       float *y, int64_t m, int64_t n) override;
  void accumulate(float *into, const float *from, int64_t n) override;
  void sgd(float *p, const float *g, float *buffer, int64_t n, float lr, float decay,
           float momentum, bool firstStep) override;
  void adam(float *p, const float *g, float *m, float *v, int64_t n,
            const AdamStep &step) override;
  void softmax(const AxisLayout &l, const float *x, float *y, bool logForm) override;
  void softmaxGrad(const AxisLayout &l, const float *y, const float *dy, float *dx,
                   bool logForm) override;
  void layerNorm(int64_t rows, int64_t width, const float *x, const float *gamma,
                 const float *beta, double epsilon, float *y, float *mean,
                 float *invstd) override;
  void layerNormGrad(int64_t rows, int64_t width, const float *x, const float *dy,
                     const float *gamma, const float *mean, const float *invstd, float *dx,
                     float *dscale, float *dbias) override;
  void reduce(int32_t fn, const ReduceGeometry &g, const float *x, float *y) override;
  void copyStrided(const OperandPlan &plan, void *dst, const void *src,
                   size_t elementSize) override;
  void trilu(const void *x, void *y, size_t elementSize, int64_t matrices, int64_t rows,
             int64_t columns, int64_t k, bool upper) override;
  void gather(const GatherGeometry &g, const int64_t *index, const void *x, void *y,
              size_t elementSize) override;
  void gatherGrad(const GatherGeometry &g, const int64_t *index, const float *dy,
                  float *dx) override;
  void dropout(const float *x, float *y, uint8_t *mask, int64_t n, uint64_t stream, double ratio,
               float scale) override;
  void crossEntropy(const LossGeometry &g, const float *logits, const int64_t *labels,
                    float *logProb, double *picked, float *loss) override;
  void crossEntropyGrad(const LossGeometry &g, const float *dloss, const float *logProb,
                        const int64_t *labels, float *dlogits) override;
  void pad(const PadGeometry &g, const void *x, void *y, size_t elementSize,
           uint64_t fill) override;
  void cast(int32_t from, int32_t to, const void *x, void *y, int64_t n) override;
  void batchNormTrain(const ChannelLayout &l, const float *x, const float *gamma,
                      const float *beta, double epsilon, double momentum, float *savedMean,
                      float *savedInvstd, float *runningMean, float *runningVar, double *ab,
                      float *y) override;
  void batchNormInfer(const ChannelLayout &l, const float *x, const float *gamma,
                      const float *beta, const float *mean, const float *var, double epsilon,
                      double *ab, float *y) override;
  void batchNormGrad(const ChannelLayout &l, const float *x, const float *dy, const float *gamma,
                     const float *savedMean, const float *savedInvstd, double *terms, float *dx,
                     float *dscale, float *dbias) override;
  void im2col(const ConvGeometry &g, const float *x, float *col) override;
  void col2im(const ConvGeometry &g, const float *col, float *x) override;
  void maxPool(const PoolGeometry &g, const float *x, float *y, int64_t *indices) override;
  void averagePool(const PoolGeometry &g, const float *x, float *y,
                   bool countIncludePad) override;
  void averagePoolGrad(const PoolGeometry &g, const float *dy, float *dx,
                       bool countIncludePad) override;
  void maxPoolGrad(int64_t planes, int64_t outPlane, int64_t inPlane, const float *dy,
                   const int64_t *index, float *dx) override;
  bool hasGemm() override;
  void gemm(const ColumnMajorGemm &gemm) override;
  int64_t libraryConvWorkspace(ConvPass pass, const ConvGeometry &g) override;
  void libraryConv(ConvPass pass, const ConvGeometry &g, const float *a, const float *b,
                   float *out, void *workspace, int64_t workspaceBytes) override;
  void finish(const char *what) override;

private:
  cudaStream_t stream();
  /// The plan of `pass` of `g` (made on first use; null when cuDNN does not take it).
  const CudnnConvPlan *convPlan(ConvPass pass, const ConvGeometry &g);
  CudaDevice &device_;
  std::map<std::vector<int64_t>, std::shared_ptr<CudnnConvPlan>> convPlans_;
  bool cudnnFailed_ = false; ///< its handle could not be made: no cuDNN for this rank
};

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int ordinal);
  ~CudaDevice() override;

  std::string name() const override { return name_; }
  int64_t capacity() const override { return capacity_; }
  void *allocate(size_t bytes) override;
  void release(void *block) override;
  void toDevice(void *device, const void *host, size_t bytes) override;
  void toHost(void *host, const void *device, size_t bytes) override;
  void withinDevice(void *to, const void *from, size_t bytes) override;
  void zero(void *device, size_t bytes) override;
  Backend backend() const override { return Backend::Cuda; }
  void fromPeer(void *to, const Device &source, const void *from, size_t bytes) override;
  KernelLauncher *launcher() override { return &launcher_; }

  /// Makes this GPU the calling thread's current one (ranks run on threads).
  void current() const;
  cudaStream_t stream() const { return stream_; }
  /// The cuBLAS handle on the rank's stream (made on first use).
  cublasHandle_t blas();
  /// The cuDNN handle on the rank's stream (made on first use).
  cudnnHandle_t dnn();
  /// Waits for the stream; throws DeviceError naming `what` when a kernel
  /// launched since the last wait failed.
  void finish(const char *what);

private:
  void copy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind);

  int ordinal_;
  std::string name_;
  int64_t capacity_ = 0;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  cudnnHandle_t dnn_ = nullptr;
  CudaLauncher launcher_{*this};
};

} // namespace piperun::cuda

#endif // PIPE_RUNTIME_CUDA_CUDA_DEVICE_H
