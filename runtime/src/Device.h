//===- Device.h - the memory and copies of an accelerator a rank runs on -*- C++ -*-===//
//
// A rank of the CPU backend holds its tensors in host memory. A rank of a
// device backend holds them in its Device's memory: the host never reads a
// tensor's `data` there, it copies bytes in and out through these calls
// (HostAccess.h). Two devices exist:
//  - the CUDA device (backend "cuda"): cudaMalloc'd memory of one GPU, copies on
//    the rank's own stream (src/cuda/CudaDevice.cpp, built with the toolkit);
//  - the emulated device (backend "emulated"): host memory behind addresses the
//    host cannot touch (reading one faults at once), so every path of a device
//    backend (allocation and accounting, uploads, downloads, transfers) runs
//    and is tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_DEVICE_H
#define PIPE_RUNTIME_DEVICE_H

#include "pipe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace piperun {

/// A device call that failed for another reason than memory running out (a
/// foreign pointer, a driver error): the caller turns it into the rank's failure.
class PIPE_EXPORT DeviceError : public std::runtime_error {
public:
  explicit DeviceError(const std::string &message) : std::runtime_error(message) {}
};

class PIPE_EXPORT Device {
public:
  virtual ~Device() = default;
  /// "emulated device (4096 MiB)", "NVIDIA H200 (device 0, 139 GiB)".
  virtual std::string name() const = 0;
  /// Bytes of memory the device has in all.
  virtual int64_t capacity() const = 0;
  /// `bytes` (> 0) of device memory, 256-byte aligned; nullptr when it has no
  /// room. Throws DeviceError on any other failure.
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *block) = 0;
  /// Copies; each returns once the bytes are at their destination.
  virtual void toDevice(void *device, const void *host, size_t bytes) = 0;
  virtual void toHost(void *host, const void *device, size_t bytes) = 0;
  virtual void withinDevice(void *to, const void *from, size_t bytes) = 0;
  virtual void zero(void *device, size_t bytes) = 0;
};

/// The backends a run can use.
enum class Backend { Cpu, Cuda, Emulated };

/// "cpu", "cuda", "emulated".
PIPE_EXPORT const char *backendName(Backend backend);
/// Parses a backend's name; false when unknown.
PIPE_EXPORT bool parseBackend(const std::string &name, Backend &backend);

/// Whether this library was built with the CUDA backend.
PIPE_EXPORT bool cudaBuilt();
/// The number of CUDA devices this process sees; 0 with `why` set when there
/// is none or the driver cannot be used (or the library was built without CUDA).
PIPE_EXPORT int cudaDeviceCount(std::string &why);

/// The device of rank `rank` of a run with `ranks` ranks: CUDA device
/// rank % count (so in-process ranks share the GPUs round-robin), or an
/// emulated device of `emulatedBytes`. Throws DeviceError when it cannot be made.
PIPE_EXPORT std::unique_ptr<Device> makeDevice(Backend backend, int rank, int64_t emulatedBytes);

/// An emulated device of `capacityBytes` (tests use it directly).
PIPE_EXPORT std::unique_ptr<Device> makeEmulatedDevice(int64_t capacityBytes);

} // namespace piperun

#endif // PIPE_RUNTIME_DEVICE_H
