//===- EmulatedDevice.cpp - device memory the host cannot touch ------------===//
//
// The emulated device hands out addresses inside a reserved, inaccessible
// range (PROT_NONE): host code that reads or writes a tensor's `data` instead
// of copying it faults at once, as it would on a GPU. Its bytes live in a
// second, readable mapping at the same offsets; the copies translate. Blocks
// are placed first-fit in offset order and freed ranges merge, so the device
// runs out of memory at its capacity, as a real one does.
//
//===----------------------------------------------------------------------===//
#include "Device.h"

#include <cstring>
#include <iterator>
#include <map>

#include <sys/mman.h>

namespace piperun {
namespace {

constexpr uint64_t kAlignment = 256;

class EmulatedDevice final : public Device {
public:
  explicit EmulatedDevice(int64_t capacityBytes)
      : capacity_((static_cast<uint64_t>(capacityBytes) + kAlignment - 1) / kAlignment *
                  kAlignment) {
    if (capacityBytes <= 0)
      throw DeviceError("an emulated device needs a positive capacity");
    void *addresses =
        mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *bytes = mmap(nullptr, capacity_, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addresses == MAP_FAILED || bytes == MAP_FAILED) {
      if (addresses != MAP_FAILED)
        munmap(addresses, capacity_);
      if (bytes != MAP_FAILED)
        munmap(bytes, capacity_);
      throw DeviceError("cannot map " + std::to_string(capacity_ >> 20) +
                        " MiB for an emulated device");
    }
    addresses_ = static_cast<char *>(addresses);
    bytes_ = static_cast<char *>(bytes);
    free_[0] = capacity_;
  }
  ~EmulatedDevice() override {
    munmap(addresses_, capacity_);
    munmap(bytes_, capacity_);
  }

  std::string name() const override {
    return "emulated device (" + std::to_string(capacity_ >> 20) + " MiB)";
  }
  int64_t capacity() const override { return static_cast<int64_t>(capacity_); }

  void *allocate(size_t bytes) override {
    const uint64_t size = (static_cast<uint64_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
    if (size == 0)
      throw DeviceError("a zero-byte device allocation");
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < size)
        continue;
      const uint64_t offset = it->first, rest = it->second - size;
      free_.erase(it);
      if (rest > 0)
        free_[offset + size] = rest;
      used_[offset] = size;
      return addresses_ + offset;
    }
    return nullptr;
  }

  void release(void *block) override {
    const uint64_t offset = offsetOf(block, 0, "release");
    auto used = used_.find(offset);
    if (used == used_.end())
      throw DeviceError("release of a device address that is not a block's start");
    uint64_t start = offset, size = used->second;
    used_.erase(used);
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == start) {
        start = before->first;
        size += before->second;
        free_.erase(before);
      }
    }
    free_[start] = size;
  }

  void toDevice(void *device, const void *host, size_t bytes) override {
    if (bytes)
      std::memcpy(bytesAt(device, bytes, "toDevice"), host, bytes);
  }
  void toHost(void *host, const void *device, size_t bytes) override {
    if (bytes)
      std::memcpy(host, bytesAt(device, bytes, "toHost"), bytes);
  }
  void withinDevice(void *to, const void *from, size_t bytes) override {
    if (bytes)
      std::memmove(bytesAt(to, bytes, "withinDevice"), bytesAt(from, bytes, "withinDevice"),
                   bytes);
  }
  void zero(void *device, size_t bytes) override {
    if (bytes)
      std::memset(bytesAt(device, bytes, "zero"), 0, bytes);
  }

private:
  /// The offset of [address, address + bytes) in the device's range; throws
  /// when the range is not the device's (a host pointer, say).
  uint64_t offsetOf(const void *address, size_t bytes, const char *what) const {
    const char *p = static_cast<const char *>(address);
    if (p < addresses_ || p > addresses_ + capacity_ ||
        static_cast<uint64_t>(p - addresses_) + bytes > capacity_)
      throw DeviceError(std::string("emulated device: ") + what +
                        " of an address that is not device memory");
    return static_cast<uint64_t>(p - addresses_);
  }
  char *bytesAt(const void *address, size_t bytes, const char *what) const {
    return bytes_ + offsetOf(address, bytes, what);
  }

  uint64_t capacity_;
  char *addresses_ = nullptr; ///< what allocate hands out (inaccessible)
  char *bytes_ = nullptr;     ///< where the bytes are
  std::map<uint64_t, uint64_t> free_; ///< offset -> size, merged
  std::map<uint64_t, uint64_t> used_; ///< offset -> size
};

} // namespace

std::unique_ptr<Device> makeEmulatedDevice(int64_t capacityBytes) {
  return std::make_unique<EmulatedDevice>(capacityBytes);
}

const char *backendName(Backend backend) {
  switch (backend) {
  case Backend::Cpu:
    return "cpu";
  case Backend::Cuda:
    return "cuda";
  case Backend::Emulated:
    return "emulated";
  }
  return "unknown";
}

bool parseBackend(const std::string &name, Backend &backend) {
  for (Backend b : {Backend::Cpu, Backend::Cuda, Backend::Emulated})
    if (name == backendName(b)) {
      backend = b;
      return true;
    }
  return false;
}

} // namespace piperun
