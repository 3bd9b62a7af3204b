//===- Device.cpp - the device entry points of a build without CUDA -------===//
//
// With the CUDA toolkit, src/cuda/CudaDevice.cpp defines these instead.
//
//===----------------------------------------------------------------------===//
#include "Device.h"

#ifndef PIPE_RUNTIME_HAS_CUDA
namespace piperun {

int cudaDeviceCount(std::string &why) {
  why = "this runtime was built without CUDA (configure it where the CUDA toolkit is installed)";
  return 0;
}

std::unique_ptr<Device> makeDevice(Backend backend, int /*rank*/, int64_t emulatedBytes) {
  if (backend == Backend::Emulated)
    return makeEmulatedDevice(emulatedBytes);
  if (backend == Backend::Cuda) {
    std::string why;
    cudaDeviceCount(why);
    throw DeviceError("no CUDA device: " + why);
  }
  return nullptr;
}

} // namespace piperun
#endif
