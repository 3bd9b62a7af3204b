//===- HostAccess.cpp - host bytes of tensors that may live on a device ----===//
#include "HostAccess.h"

#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <cstdlib>
#include <cstring>

namespace piperun {

Device *deviceOf(pipe_rank *r) { return r->hostKernelDepth > 0 ? nullptr : r->device.get(); }

const DeviceKernels *nativeKernels(Device *device) {
  static const bool stagedOnly = [] {
    const char *value = std::getenv("PIPE_RUN_DEVICE_KERNELS");
    return value && std::string(value) == "staged";
  }();
  return stagedOnly || !device->launcher() ? nullptr : &nativeKernelTable();
}

void failOnDevice(pipe_rank *r, const DeviceError &error) {
  fail(r, "%s: %s", r->device ? r->device->name().c_str() : "device", error.what());
}

void countNative(pipe_rank *r) { ++r->nativeKernelCalls; }
void countStaged(pipe_rank *r, const char *kernel) { ++r->stagedKernelCalls[kernel]; }

HostAccess::HostAccess(pipe_rank *r) : r_(r), device_(deviceOf(r)) {}

HostAccess::~HostAccess() = default;

// Owns its block, so a download that fails (and throws) frees it too.
HostAccess::Copy::~Copy() { std::free(block); }

HostAccess::Copy *HostAccess::copyOf(const pipe_tensor *t, Use use) {
  if (!t)
    fail(r_, "a NULL tensor where one is needed");
  for (auto &copy : copies_)
    if (copy->of == t || (copy->host.data && copy->of->data == t->data &&
                          copy->of->dtype == t->dtype && copy->of->numel == t->numel)) {
      // The same bytes again (an argument passed twice, or a view of them).
      if (use != Use::Read)
        copy->upload = true;
      return copy.get();
    }
  auto copy = std::make_unique<Copy>();
  copy->of = t;
  copy->host = *t;
  copy->host.storage = nullptr;
  bool wellFormed = t->rank >= 0 && t->rank <= PIPE_MAX_RANK && t->numel >= 0 &&
                    t->dtype >= PIPE_F32 && t->dtype <= PIPE_BOOL;
  int64_t numel = 1;
  for (int d = 0; wellFormed && d < t->rank; ++d) {
    wellFormed = t->shape[d] >= 0;
    numel *= t->shape[d];
  }
  if (!wellFormed || numel != t->numel) {
    // No bytes to copy: the kernel's own checks refuse the tensor, by name.
    copy->host.data = nullptr;
    copies_.push_back(std::move(copy));
    return copies_.back().get();
  }
  copy->bytes = static_cast<size_t>(tensorBytes(r_, t));
  if (device_) {
    copy->block = std::aligned_alloc(64, (copy->bytes + 63) / 64 * 64 + 64);
    if (!copy->block)
      fail(r_, "out of host memory for a %zu-byte copy of %s", copy->bytes, describe(t).c_str());
    copy->host.data = copy->block;
    if (use != Use::Overwrite)
      onDevice(r_, [&] { device_->toHost(copy->block, t->data, copy->bytes); });
  }
  copy->upload = use != Use::Read;
  copies_.push_back(std::move(copy));
  return copies_.back().get();
}

void HostAccess::commit() {
  if (!device_)
    return;
  for (auto &copy : copies_)
    if (copy->upload) {
      onDevice(r_, [&] { device_->toDevice(copy->of->data, copy->block, copy->bytes); });
      copy->upload = false;
    }
}

HostKernelScope::HostKernelScope(pipe_rank *r) : r_(r) { ++r_->hostKernelDepth; }
HostKernelScope::~HostKernelScope() { --r_->hostKernelDepth; }

void zeroTensor(pipe_rank *r, pipe_tensor *t) {
  const auto bytes = static_cast<size_t>(tensorBytes(r, t));
  if (Device *device = deviceOf(r))
    onDevice(r, [&] { device->zero(t->data, bytes); });
  else if (bytes)
    std::memset(t->data, 0, bytes);
}

void copyTensor(pipe_rank *r, pipe_tensor *to, const pipe_tensor *from) {
  const auto bytes = static_cast<size_t>(tensorBytes(r, from));
  if (static_cast<size_t>(tensorBytes(r, to)) != bytes)
    fail(r, "copying %s into %s", describe(from).c_str(), describe(to).c_str());
  if (Device *device = deviceOf(r))
    onDevice(r, [&] { device->withinDevice(to->data, from->data, bytes); });
  else if (bytes)
    std::memcpy(to->data, from->data, bytes);
}

void downloadTensor(pipe_rank *r, void *host, const pipe_tensor *t) {
  const auto bytes = static_cast<size_t>(tensorBytes(r, t));
  if (Device *device = deviceOf(r))
    onDevice(r, [&] { device->toHost(host, t->data, bytes); });
  else if (bytes)
    std::memcpy(host, t->data, bytes);
}

void uploadTensor(pipe_rank *r, pipe_tensor *t, const void *host) {
  const auto bytes = static_cast<size_t>(tensorBytes(r, t));
  if (Device *device = deviceOf(r))
    onDevice(r, [&] { device->toDevice(t->data, host, bytes); });
  else if (bytes)
    std::memcpy(t->data, host, bytes);
}

} // namespace piperun
