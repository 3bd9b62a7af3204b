//===- CudaDevice.cpp - a rank's GPU: cudaMalloc'd memory and its own stream ===//
//
// Built only with the CUDA toolkit (PIPE_RUNTIME_HAS_CUDA). Every call first
// makes the rank's GPU current for the calling thread (ranks run on threads of
// their own), then works on the rank's own non-blocking stream, so ranks that
// share a GPU do not serialise on the legacy default stream. Copies wait for
// their stream: the host sees the bytes when the call returns.
//
//===----------------------------------------------------------------------===//
#include "Device.h"

#include <cuda_runtime_api.h>

namespace piperun {
namespace {

std::string errorText(const char *call, cudaError_t error) {
  return std::string("CUDA: ") + call + ": " + cudaGetErrorName(error) + " (" +
         cudaGetErrorString(error) + ")";
}

void check(const char *call, cudaError_t error) {
  if (error != cudaSuccess)
    throw DeviceError(errorText(call, error));
}

class CudaDevice final : public Device {
public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    check("cudaSetDevice", cudaSetDevice(ordinal_));
    cudaDeviceProp properties{};
    check("cudaGetDeviceProperties", cudaGetDeviceProperties(&properties, ordinal_));
    name_ = std::string(properties.name) + " (device " + std::to_string(ordinal_) + ", " +
            std::to_string(properties.totalGlobalMem >> 30) + " GiB)";
    capacity_ = static_cast<int64_t>(properties.totalGlobalMem);
    check("cudaStreamCreateWithFlags", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return name_; }
  int64_t capacity() const override { return capacity_; }

  void *allocate(size_t bytes) override {
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
  void release(void *block) override {
    current();
    check("cudaFree", cudaFree(block));
  }
  void toDevice(void *device, const void *host, size_t bytes) override {
    copy(device, host, bytes, cudaMemcpyHostToDevice);
  }
  void toHost(void *host, const void *device, size_t bytes) override {
    copy(host, device, bytes, cudaMemcpyDeviceToHost);
  }
  void withinDevice(void *to, const void *from, size_t bytes) override {
    copy(to, from, bytes, cudaMemcpyDeviceToDevice);
  }
  void zero(void *device, size_t bytes) override {
    if (!bytes)
      return;
    current();
    check("cudaMemsetAsync", cudaMemsetAsync(device, 0, bytes, stream_));
    check("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

private:
  void current() { check("cudaSetDevice", cudaSetDevice(ordinal_)); }
  void copy(void *to, const void *from, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes)
      return;
    current();
    check("cudaMemcpyAsync", cudaMemcpyAsync(to, from, bytes, kind, stream_));
    check("cudaStreamSynchronize", cudaStreamSynchronize(stream_));
  }

  int ordinal_;
  std::string name_;
  int64_t capacity_ = 0;
  cudaStream_t stream_ = nullptr;
};

} // namespace

bool cudaBuilt() { return true; }

int cudaDeviceCount(std::string &why) {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    why = errorText("cudaGetDeviceCount", error);
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
  return std::make_unique<CudaDevice>(rank % count);
}

} // namespace piperun
