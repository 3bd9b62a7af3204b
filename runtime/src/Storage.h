//===- Storage.h - one rank's counted allocations, per memory category -*- C++ -*-===//
//
// Every byte a rank holds is one Storage with one pipe_mem category; the
// MemoryAccount keeps the live and peak bytes of each category and of their sum,
// the figures pipe-run prints beside the memory model's prediction. Freed blocks
// stay in the account's BlockCache for the next allocation of the same size.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_STORAGE_H
#define PIPE_RUNTIME_STORAGE_H

#include "pipe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace piperun {

class Device;

/// Freed blocks kept by size for the next allocation of that size (one rank's,
/// used by its thread only). A step allocates the same sizes micro-batch after
/// micro-batch; without it each large block came fresh from the system and its
/// pages faulted in again (Inception-v3 on 2 ranks: 69,000 page faults in 6
/// steps). Holds at most as many bytes as the account's peak of live bytes (or
/// one block, which its rounding may make larger), so a rank reserves about
/// twice its peak at most. Sizes are the 64-byte multiples
/// allocateStorage asks for. Off in sanitized builds, whose allocator must see
/// every free. A cache over a Device (setDevice) keeps the device's blocks the
/// same way: the caching allocator of a device backend.
class PIPE_EXPORT BlockCache {
public:
  BlockCache() = default;
  BlockCache(const BlockCache &) = delete;
  BlockCache &operator=(const BlockCache &) = delete;
  ~BlockCache() { clear(); }

  /// A block of `bytes` (a multiple of 64, > 0), 64-byte aligned; nullptr when
  /// the system has none, even after the cache gave its own back.
  void *take(size_t bytes);
  /// Keeps `block` of `bytes` for take, or frees it when the cache, holding
  /// some already, would then hold more than `limit` bytes.
  void give(void *block, size_t bytes, int64_t limit);
  /// Frees every kept block.
  void clear();
  int64_t cachedBytes() const { return cached_; }
  /// False in sanitized builds: give frees at once.
  static bool enabled();
  /// Blocks come from `device` from now on (call while the cache is empty).
  void setDevice(Device *device) { device_ = device; }
  Device *device() const { return device_; }

private:
  void *fresh(size_t bytes);
  void drop(void *block);

  Device *device_ = nullptr; ///< null: host memory
  std::unordered_map<size_t, std::vector<void *>> free_;
  int64_t cached_ = 0;
};

/// Live and peak bytes per category; the total's peak is the peak of the sum at
/// one instant, not the sum of the peaks.
class PIPE_EXPORT MemoryAccount {
public:
  void add(int32_t category, int64_t bytes);
  void remove(int32_t category, int64_t bytes);
  /// A buffer changes role (pipe_save: WORKSPACE -> SAVED): the total is unchanged.
  void move(int32_t from, int32_t to, int64_t bytes);

  int64_t live(int32_t category) const { return live_[category]; }
  int64_t peak(int32_t category) const { return peak_[category]; }
  int64_t liveTotal() const { return liveTotal_; }
  int64_t peakTotal() const { return peakTotal_; }

  BlockCache cache;       ///< host blocks: allocateStorage and release go through it
  BlockCache deviceCache; ///< the rank's device blocks (allocateDeviceStorage), if any

private:
  int64_t live_[PIPE_MEM_CATEGORIES] = {};
  int64_t peak_[PIPE_MEM_CATEGORIES] = {};
  int64_t liveTotal_ = 0;
  int64_t peakTotal_ = 0;
};

/// One allocation, shared by a tensor and its views (one reference each). Only
/// its rank's thread touches it, so the count is a plain integer.
struct Storage {
  void *data = nullptr;
  int64_t bytes = 0; ///< what the account charges (0 for program constants)
  size_t capacity = 0; ///< the block's size (header and 64-byte rounding included)
  int32_t category = PIPE_MEM_WORKSPACE;
  int32_t references = 0;
  int32_t savedSlots = 0; ///< saved slots holding it; SAVED while > 0
  bool owned = true;      ///< false: `data` is the program's static memory
  bool onDevice = false;  ///< `data` is device memory (account.deviceCache's)
};

/// A new storage of `bytes` (64-byte aligned, one reference), or nullptr when
/// the system has no memory left. `uncharged` more bytes are allocated in
/// front without being counted (a message's header: the account measures
/// tensor bytes, as the memory model does, not bookkeeping).
Storage *allocateStorage(MemoryAccount &account, int64_t bytes, int32_t category,
                         int64_t uncharged = 0);
/// A new storage of `bytes` in the account's device memory (deviceCache), or
/// nullptr when the device has no room. Throws DeviceError on a device failure.
Storage *allocateDeviceStorage(MemoryAccount &account, int64_t bytes, int32_t category);
/// A storage over memory the runtime does not own (pipe_constant): no bytes charged.
Storage *externalStorage(MemoryAccount &account, const void *data, int32_t category);
void retain(Storage *storage);
/// Drops one reference; the last one frees the memory and uncharges it.
void release(MemoryAccount &account, Storage *storage);
/// Moves the storage's bytes to another category.
void recategorize(MemoryAccount &account, Storage *storage, int32_t category);

} // namespace piperun

#endif // PIPE_RUNTIME_STORAGE_H
