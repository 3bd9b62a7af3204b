//===- HostAccess.h - host bytes of tensors that may live on a device -*- C++ -*-===//
//
// The runtime's host code (parameter loading, data, the optimizer, transfers,
// and the CPU kernels a device backend runs staged) reads and writes tensors
// through a HostAccess. On the CPU backend it hands out the tensors' own
// bytes. On a device it downloads a tensor once, hands out the host copy, and
// commit() uploads the copies that were asked for writing: a kernel without a
// device implementation runs on the host, between a download of its inputs
// and an upload of its outputs (runStaged).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_HOST_ACCESS_H
#define PIPE_RUNTIME_HOST_ACCESS_H

#include "Device.h"
#include "pipe_runtime.h"

#include <memory>
#include <tuple>
#include <type_traits>
#include <vector>

namespace piperun {

/// The device the rank's tensors live on: null on the CPU backend, and inside
/// a staged kernel (whose tensors and workspace are host memory).
Device *deviceOf(pipe_rank *r);

/// Runs `body` and turns a DeviceError into the rank's failure.
template <typename F> auto onDevice(pipe_rank *r, F &&body) -> decltype(body());
[[noreturn]] void failOnDevice(pipe_rank *r, const DeviceError &error);

class HostAccess {
public:
  explicit HostAccess(pipe_rank *r);
  HostAccess(const HostAccess &) = delete;
  HostAccess &operator=(const HostAccess &) = delete;
  ~HostAccess();

  /// `t`'s bytes, to read.
  const void *read(const pipe_tensor *t) { return copyOf(t, Use::Read)->host.data; }
  /// `t`'s bytes, to read and change (uploaded by commit).
  void *write(pipe_tensor *t) { return copyOf(t, Use::Write)->host.data; }
  /// Room for all of `t`'s bytes, to be written whole (uploaded by commit).
  void *overwrite(pipe_tensor *t) { return copyOf(t, Use::Overwrite)->host.data; }
  /// A host tensor with `t`'s shape and bytes, for a CPU kernel (null stays null).
  const pipe_tensor *mirror(const pipe_tensor *t) {
    return t ? &copyOf(t, Use::Read)->host : nullptr;
  }
  pipe_tensor *mirrorWritable(pipe_tensor *t) {
    return t ? &copyOf(t, Use::Write)->host : nullptr;
  }
  pipe_tensor *mirrorOverwrite(pipe_tensor *t) {
    return t ? &copyOf(t, Use::Overwrite)->host : nullptr;
  }
  /// Uploads the copies asked for writing (nothing on the CPU backend).
  void commit();

private:
  enum class Use { Read, Write, Overwrite };
  struct Copy {
    Copy() = default;
    Copy(const Copy &) = delete;
    Copy &operator=(const Copy &) = delete;
    ~Copy();
    pipe_tensor host{};             ///< the tensor over the host bytes
    const pipe_tensor *of = nullptr; ///< the device tensor
    size_t bytes = 0;
    bool upload = false;
    void *block = nullptr; ///< owned host bytes (device only)
  };
  Copy *copyOf(const pipe_tensor *t, Use use);

  pipe_rank *r_;
  Device *device_;
  std::vector<std::unique_ptr<Copy>> copies_;
};

/// Marks the rank's thread as running a CPU kernel on host copies: deviceOf is
/// null meanwhile, so the kernel's own workspace (pipe_alloc) is host memory.
class HostKernelScope {
public:
  explicit HostKernelScope(pipe_rank *r);
  ~HostKernelScope();

private:
  pipe_rank *r_;
};

namespace detail {
template <typename Param, typename Arg> Param stagedArgument(HostAccess &host, Arg arg) {
  if constexpr (std::is_same_v<Param, const pipe_tensor *>)
    return host.mirror(arg);
  else if constexpr (std::is_same_v<Param, pipe_tensor *>)
    return host.mirrorWritable(arg);
  else
    return static_cast<Param>(arg);
}
} // namespace detail

/// Runs the CPU kernel `kernel` on host copies of its tensor arguments and
/// uploads the ones it may write (its non-const tensors). The device backends'
/// path for every kernel that has no device implementation yet.
template <typename... Params, typename... Args>
void runStaged(pipe_rank *r, void (*kernel)(pipe_rank *, Params...), Args... args) {
  static_assert(sizeof...(Params) == sizeof...(Args), "one argument per parameter");
  HostAccess host(r);
  std::tuple<Params...> staged{detail::stagedArgument<Params>(host, args)...};
  {
    HostKernelScope scope(r);
    std::apply([&](Params... a) { kernel(r, a...); }, staged);
  }
  host.commit();
}

/// The native kernels of `device` to use: its own, unless the environment
/// says PIPE_RUN_DEVICE_KERNELS=staged (every kernel staged: the reference a
/// native kernel is checked against on a GPU). Null when none.
const DeviceKernels *nativeKernels(Device *device);

/// Counts a kernel call run natively / staged (the run's report says how many).
void countNative(pipe_rank *r);
void countStaged(pipe_rank *r, const char *kernel);

/// A kernel's first line: on a device backend, run it staged and return.
#define PIPE_DEVICE_STAGED(r, kernel, ...)                                                       \
  do {                                                                                           \
    if (::piperun::deviceOf(r)) {                                                                \
      ::piperun::countStaged(r, #kernel);                                                        \
      ::piperun::runStaged(r, &kernel, __VA_ARGS__);                                             \
      return;                                                                                    \
    }                                                                                            \
  } while (false)

/// A kernel's first line where devices may have a native version (the
/// DeviceKernels entry `member`): on a device backend, run that, or the kernel
/// staged where the device does not handle the case, and return.
#define PIPE_DEVICE_KERNEL(r, member, kernel, ...)                                               \
  do {                                                                                           \
    if (::piperun::Device *device_ = ::piperun::deviceOf(r)) {                                   \
      const ::piperun::DeviceKernels *native_ = ::piperun::nativeKernels(device_);               \
      if (native_ && native_->member &&                                                          \
          ::piperun::onDevice(r, [&] { return native_->member(r, __VA_ARGS__); })) {             \
        ::piperun::countNative(r);                                                               \
      } else {                                                                                   \
        ::piperun::countStaged(r, #kernel);                                                      \
        ::piperun::runStaged(r, &kernel, __VA_ARGS__);                                           \
      }                                                                                          \
      return;                                                                                    \
    }                                                                                            \
  } while (false)

/// Zeroes all of `t`'s bytes (on the device or the host).
void zeroTensor(pipe_rank *r, pipe_tensor *t);
/// Copies `from`'s bytes into `to` (same byte size), wherever they live.
void copyTensor(pipe_rank *r, pipe_tensor *to, const pipe_tensor *from);
/// Copies `t`'s bytes into host memory at `host`.
void downloadTensor(pipe_rank *r, void *host, const pipe_tensor *t);
/// Copies `bytes` host bytes at `host` into `t`.
void uploadTensor(pipe_rank *r, pipe_tensor *t, const void *host);

template <typename F> auto onDevice(pipe_rank *r, F &&body) -> decltype(body()) {
  try {
    return body();
  } catch (const DeviceError &error) {
    failOnDevice(r, error);
  }
}

} // namespace piperun

#endif // PIPE_RUNTIME_HOST_ACCESS_H
