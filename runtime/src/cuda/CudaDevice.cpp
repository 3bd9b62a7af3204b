//===- CudaDevice.cpp - a rank's GPU: cudaMalloc'd memory and its own stream ===//
//
// Built only with the CUDA toolkit (PIPE_RUNTIME_HAS_CUDA). Every call first
// makes the rank's GPU current for the calling thread (ranks run on threads of
// their own), then works on the rank's own non-blocking stream, so ranks that
// share a GPU do not serialise on the legacy default stream. Copies wait for
// their stream: the host sees the bytes when the call returns.
//
//===----------------------------------------------------------------------===//
#include "cuda/CudaDevice.h"

#include "cuda/Launch.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace piperun {
namespace cuda {
namespace {

std::string errorText(const char *call, cudaError_t error) {
  return std::string("CUDA: ") + call + ": " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")";
}

} // namespace

void *openCudaLibrary(const std::string &name, const char *environment, std::string &error) {
  std::vector<std::string> candidates;
  if (const char *explicitPath = std::getenv(environment))
    candidates.push_back(explicitPath);
  candidates.push_back(name);
  candidates.push_back(std::string(PIPE_CUDA_LIBRARY_DIR) + "/" + name);
  candidates.push_back("/usr/local/cuda/lib64/" + name);
  std::string why;
  for (const std::string &candidate : candidates) {
    if (void *handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL))
      return handle;
    if (why.empty())
      why = dlerror();
  }
  error = "cannot load " + name + " (" + why + "; set " + environment +
          " to its path, or add its folder to LD_LIBRARY_PATH)";
  return nullptr;
}

const Cublas &cublas() {
  // Loaded on first use: linked, cuBLAS would cost every process that loads
  // libpiperun 0.13 s and 220 MB at start (pipe-run --help, CPU runs included).
  static Cublas library;
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string name = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
    void *handle = openCudaLibrary(name, "PIPE_CUBLAS", library.error);
    if (!handle)
      return;
    auto load = [&](auto &function, const char *symbol) {
      loadSymbol(handle, name, function, symbol, library.error);
    };
    load(library.create, "cublasCreate_v2");
    load(library.destroy, "cublasDestroy_v2");
    load(library.setStream, "cublasSetStream_v2");
    load(library.setMathMode, "cublasSetMathMode");
    load(library.sgemm, "cublasSgemm_v2");
    load(library.sgemmStridedBatched, "cublasSgemmStridedBatched");
    load(library.statusString, "cublasGetStatusString");
  });
  return library;
}

void check(const char *call, cudaError_t error) {
  if (error != cudaSuccess)
    throw DeviceError(errorText(call, error));
}

CudaDevice::CudaDevice(int ordinal) : ordinal_(ordinal) {
  check("cudaSetDevice", cudaSetDevice(ordinal_));
  cudaDeviceProp properties{};
  check("cudaGetDeviceProperties", cudaGetDeviceProperties(&properties, ordinal_));
  name_ = std::string(properties.name) + " (device " + std::to_string(ordinal_) + ", " +
          std::to_string(properties.totalGlobalMem >> 30) + " GiB)";
  capacity_ = static_cast<int64_t>(properties.totalGlobalMem);
  check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  if (blas_)
    cublas().destroy(blas_);
  if (dnn_)
    cudnn().destroy(dnn_);
  cudaStreamDestroy(stream_);
}

void CudaDevice::current() const { check("cudaSetDevice", cudaSetDevice(ordinal_)); }

void *CudaDevice::allocate(size_t bytes) {
  current();
  void *block = nullptr;
  cudaError_t error = cudaMalloc(&block, bytes);
  if (error == cudaErrorMemoryAllocation) {
    cudaGetLastError(); // not sticky: clear it
    return nullptr;
  }
  check("cudaMalloc", error);
  return block;
}

void CudaDevice::release(void *block) {
  // Never throws: it runs from caches' destructors and teardown, where a
  // failure (after a kernel fault made the context unusable) must not hide
  // the fault's own message.
  if (cudaSetDevice(ordinal_) != cudaSuccess || cudaFree(block) != cudaSuccess)
    cudaGetLastError();
}

void CudaDevice::copy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind) {
  if (!bytes)
    return;
  current();
  check("cudaMemcpyAsync", cudaMemcpyAsync(to, from, bytes, kind, stream_));
  check("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
}

void CudaDevice::toDevice(void *device, const void *host, size_t bytes) {
  copy(device, host, bytes, cudaMemcpyHostToDevice);
}

void CudaDevice::toHost(void *host, const void *device, size_t bytes) {
  copy(host, device, bytes, cudaMemcpyDeviceToHost);
}

void CudaDevice::withinDevice(void *to, const void *from, size_t bytes) {
  copy(to, from, bytes, cudaMemcpyDeviceToDevice);
}

void CudaDevice::fromPeer(void *to, const Device &source, const void *from, size_t bytes) {
  if (source.backend() != Backend::Cuda)
    throw DeviceError(name_ + ": a copy from " + source.name() + ", which is not a CUDA device");
  if (!bytes)
    return;
  // The same GPU or another one: the peer copy takes the direct path where the
  // two can reach each other and goes through the host where they cannot.
  const int sourceOrdinal = static_cast<const CudaDevice &>(source).ordinal_;
  current();
  check("cudaMemcpyPeerAsync",
        cudaMemcpyPeerAsync(to, ordinal_, from, sourceOrdinal, bytes, stream_));
  check("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
}

void CudaDevice::zero(void *device, size_t bytes) {
  if (!bytes)
    return;
  current();
  check("cudaMemsetAsync", cudaMemsetAsync(device, 0, bytes, stream_));
  check("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
}


cublasHandle_t CudaDevice::blas() {
  if (!blas_) {
    current();
    const Cublas &library = cublas();
    if (!library.error.empty())
      throw DeviceError("cuBLAS: " + library.error);
    cublasHandle_t handle = nullptr;
    if (library.create(&handle) != CUBLAS_STATUS_SUCCESS)
      throw DeviceError("cuBLAS: cublasCreate failed");
    // fp32 GEMMs in fp32 (no TF32), as the CPU backend and torch's default compute them.
    if (library.setStream(handle, stream_) != CUBLAS_STATUS_SUCCESS ||
        library.setMathMode(handle, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
      library.destroy(handle);
      throw DeviceError("cuBLAS: cannot bind the handle to the rank's stream");
    }
    blas_ = handle;
  }
  return blas_;
}

cudnnHandle_t CudaDevice::dnn() {
  if (!dnn_) {
    current();
    const Cudnn &library = cudnn();
    if (!library.error.empty())
      throw DeviceError("cuDNN: " + library.error);
    cudnnHandle_t handle = nullptr;
    cudnnStatus_t status = library.create(&handle);
    if (status != CUDNN_STATUS_SUCCESS)
      throw DeviceError(std::string("cuDNN: cudnnCreate: ") + library.errorString(status));
    status = library.setStream(handle, stream_);
    if (status != CUDNN_STATUS_SUCCESS) {
      library.destroy(handle);
      throw DeviceError(std::string("cuDNN: cudnnSetStream: ") + library.errorString(status));
    }
    dnn_ = handle;
  }
  return dnn_;
}

void CudaDevice::finish(const char *what) {
  cudaError_t launch = cudaGetLastError();
  if (launch != cudaSuccess)
    throw DeviceError(std::string(what) + ": " + errorText("kernel launch", launch));
  cudaError_t run = cudaStreamSynchronize(stream_);
  if (run != cudaSuccess)
    throw DeviceError(std::string(what) + ": " + errorText("cudaStreamSynchronize", run));
}

cudaStream_t CudaLauncher::stream() {
  device_.current();
  return device_.stream();
}

void CudaLauncher::fill(float *y, float value, int64_t n) { launchFill(stream(), y, value, n); }

void CudaLauncher::unary(int32_t fn, const float *x, float *y, int64_t n, double alpha,
                         double beta) {
  launchUnary(stream(), fn, x, y, n, alpha, beta);
}

void CudaLauncher::unaryGrad(int32_t fn, const float *saved, const float *dy, float *dx,
                             int64_t n, double alpha, double beta) {
  launchUnaryGrad(stream(), fn, saved, dy, dx, n, alpha, beta);
}

void CudaLauncher::binary(int32_t fn, int32_t dtype, const OperandPlan &plan, void *y,
                          const void *a, const void *b) {
  launchBinary(stream(), fn, dtype, plan, y, a, b);
}

void CudaLauncher::select(const OperandPlan &plan, size_t elementSize, void *y,
                          const uint8_t *cond, const void *x, const void *z) {
  launchSelect(stream(), plan, elementSize, y, cond, x, z);
}

void CudaLauncher::broadcastScaled(const float *c, int64_t rowStride, int64_t columnStride,
                                   float scale, float *y, int64_t m, int64_t n) {
  launchBroadcastScaled(stream(), c, rowStride, columnStride, scale, y, m, n);
}

void CudaLauncher::accumulate(float *into, const float *from, int64_t n) {
  launchAccumulate(stream(), into, from, n);
}

void CudaLauncher::sgd(float *p, const float *g, float *buffer, int64_t n, float lr, float decay,
                       float momentum, bool firstStep) {
  launchSgd(stream(), p, g, buffer, n, lr, decay, momentum, firstStep);
}

void CudaLauncher::adam(float *p, const float *g, float *m, float *v, int64_t n,
                        const AdamStep &step) {
  launchAdam(stream(), p, g, m, v, n, step);
}

void CudaLauncher::softmax(const AxisLayout &l, const float *x, float *y, bool logForm) {
  launchSoftmax(stream(), l, x, y, logForm);
}

void CudaLauncher::softmaxGrad(const AxisLayout &l, const float *y, const float *dy, float *dx,
                               bool logForm) {
  launchSoftmaxGrad(stream(), l, y, dy, dx, logForm);
}

void CudaLauncher::layerNorm(int64_t rows, int64_t width, const float *x, const float *gamma,
                             const float *beta, double epsilon, float *y, float *mean,
                             float *invstd) {
  launchLayerNorm(stream(), rows, width, x, gamma, beta, epsilon, y, mean, invstd);
}

void CudaLauncher::layerNormGrad(int64_t rows, int64_t width, const float *x, const float *dy,
                                 const float *gamma, const float *mean, const float *invstd,
                                 float *dx, float *dscale, float *dbias) {
  launchLayerNormGrad(stream(), rows, width, x, dy, gamma, mean, invstd, dx, dscale, dbias);
}

void CudaLauncher::reduce(int32_t fn, const ReduceGeometry &g, const float *x, float *y) {
  launchReduce(stream(), fn, g, x, y);
}

void CudaLauncher::copyStrided(const OperandPlan &plan, void *dst, const void *src,
                               size_t elementSize) {
  launchStridedCopy(stream(), plan, dst, src, elementSize);
}

void CudaLauncher::trilu(const void *x, void *y, size_t elementSize, int64_t matrices,
                         int64_t rows, int64_t columns, int64_t k, bool upper) {
  launchTrilu(stream(), x, y, elementSize, matrices, rows, columns, k, upper);
}

void CudaLauncher::gather(const GatherGeometry &g, const int64_t *index, const void *x, void *y,
                          size_t elementSize) {
  launchGather(stream(), g, index, x, y, elementSize);
}

void CudaLauncher::gatherGrad(const GatherGeometry &g, const int64_t *index, const float *dy,
                              float *dx) {
  launchGatherGrad(stream(), g, index, dy, dx);
}

void CudaLauncher::pad(const PadGeometry &g, const void *x, void *y, size_t elementSize,
                       uint64_t fill) {
  launchPad(stream(), g, x, y, elementSize, fill);
}

void CudaLauncher::cast(int32_t from, int32_t to, const void *x, void *y, int64_t n) {
  launchCast(stream(), from, to, x, y, n);
}

void CudaLauncher::batchNormTrain(const ChannelLayout &l, const float *x, const float *gamma,
                                  const float *beta, double epsilon, double momentum,
                                  float *savedMean, float *savedInvstd, float *runningMean,
                                  float *runningVar, double *ab, float *y) {
  launchBatchNormTrain(stream(), l, x, gamma, beta, epsilon, momentum, savedMean, savedInvstd,
                       runningMean, runningVar, ab, y);
}

void CudaLauncher::batchNormInfer(const ChannelLayout &l, const float *x, const float *gamma,
                                  const float *beta, const float *mean, const float *var,
                                  double epsilon, double *ab, float *y) {
  launchBatchNormInfer(stream(), l, x, gamma, beta, mean, var, epsilon, ab, y);
}

void CudaLauncher::batchNormGrad(const ChannelLayout &l, const float *x, const float *dy,
                                 const float *gamma, const float *savedMean,
                                 const float *savedInvstd, double *terms, float *dx,
                                 float *dscale, float *dbias) {
  launchBatchNormGrad(stream(), l, x, dy, gamma, savedMean, savedInvstd, terms, dx, dscale,
                      dbias);
}

void CudaLauncher::im2col(const ConvGeometry &g, const float *x, float *col) {
  launchIm2col(stream(), g, x, col);
}

void CudaLauncher::col2im(const ConvGeometry &g, const float *col, float *x) {
  launchCol2im(stream(), g, col, x);
}

void CudaLauncher::maxPool(const PoolGeometry &g, const float *x, float *y, int64_t *indices) {
  launchMaxPool(stream(), g, x, y, indices);
}

void CudaLauncher::averagePool(const PoolGeometry &g, const float *x, float *y,
                               bool countIncludePad) {
  launchAveragePool(stream(), g, x, y, countIncludePad);
}

void CudaLauncher::averagePoolGrad(const PoolGeometry &g, const float *dy, float *dx,
                                   bool countIncludePad) {
  launchAveragePoolGrad(stream(), g, dy, dx, countIncludePad);
}

void CudaLauncher::maxPoolGrad(int64_t planes, int64_t outPlane, int64_t inPlane,
                               const float *dy, const int64_t *index, float *dx) {
  launchMaxPoolGrad(stream(), planes, outPlane, inPlane, dy, index, dx);
}

void CudaLauncher::dropout(const float *x, float *y, uint8_t *mask, int64_t n, uint64_t key,
                           double ratio, float scale) {
  launchDropout(stream(), x, y, mask, n, key, ratio, scale);
}

void CudaLauncher::crossEntropy(const LossGeometry &g, const float *logits,
                                const int64_t *labels, float *logProb, double *picked,
                                float *loss) {
  launchCrossEntropy(stream(), g, logits, labels, logProb, picked, loss);
}

void CudaLauncher::crossEntropyGrad(const LossGeometry &g, const float *dloss,
                                    const float *logProb, const int64_t *labels,
                                    float *dlogits) {
  launchCrossEntropyGrad(stream(), g, dloss, logProb, labels, dlogits);
}

bool CudaLauncher::hasGemm() {
  const Cublas &library = cublas();
  if (library.error.empty())
    return true;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    std::fprintf(stderr, "pipe-run: warning: cuBLAS: %s: matrix products run on the host\n",
                 library.error.c_str());
  });
  return false;
}

void CudaLauncher::gemm(const ColumnMajorGemm &g) {
  stream();
  cublasHandle_t blas = device_.blas();
  const Cublas &library = cublas();
  const cublasOperation_t opA = g.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t status;
  if (g.batches == 1)
    status = library.sgemm(blas, opA, opB, static_cast<int>(g.m), static_cast<int>(g.n),
                           static_cast<int>(g.k), &g.alpha, g.a, static_cast<int>(g.lda), g.b,
                           static_cast<int>(g.ldb), &g.beta, g.c, static_cast<int>(g.ldc));
  else
    status = library.sgemmStridedBatched(
        blas, opA, opB, static_cast<int>(g.m), static_cast<int>(g.n), static_cast<int>(g.k),
        &g.alpha, g.a, static_cast<int>(g.lda), g.strideA, g.b, static_cast<int>(g.ldb),
        g.strideB, &g.beta, g.c, static_cast<int>(g.ldc), g.strideC,
        static_cast<int>(g.batches));
  if (status != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("cuBLAS: sgemm failed: ") + library.statusString(status));
}

void CudaLauncher::finish(const char *what) { device_.finish(what); }

} // namespace cuda

int cudaDeviceCount(std::string &why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    why = cuda::errorText("cudaGetDeviceCount", error);
    if (error == cudaErrorInsufficientDriver || error == cudaErrorNoDevice)
      why = "no usable GPU on this machine (no NVIDIA GPU, no driver, or a driver older than "
            "this CUDA runtime): " + why;
    return 0;
  }
  if (count == 0)
    why = "no CUDA device is visible to this process";
  return count;
}

std::unique_ptr<Device> makeDevice(Backend backend, int rank, int64_t emulatedBytes) {
  if (backend == Backend::Emulated)
    return makeEmulatedDevice(emulatedBytes);
  if (backend != Backend::Cuda)
    return nullptr;
  std::string why;
  int count = cudaDeviceCount(why);
  if (count == 0)
    throw DeviceError("no CUDA device: " + why);
  // Under an MPI launcher a process's GPU follows its rank on its own node.
  int local = rank;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *value = std::getenv(name)) {
      local = std::atoi(value);
      break;
    }
  return std::make_unique<cuda::CudaDevice>(local % count);
}

} // namespace piperun
