//===- Storage.cpp - one rank's counted allocations, per memory category -===//
//
// See Storage.h. The account is the runtime's measurement of the memory model's
// categories (docs/runtime-abi.md, "Memory accounting").
//
//===----------------------------------------------------------------------===//
#include "Storage.h"

#include "Device.h"

#include <algorithm>
#include <cstdlib>

namespace piperun {

namespace {
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kCacheBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
constexpr bool kCacheBlocks = false;
#else
constexpr bool kCacheBlocks = true;
#endif
#else
constexpr bool kCacheBlocks = true;
#endif
constexpr size_t kAlignment = 64;
} // namespace

bool BlockCache::enabled() { return kCacheBlocks; }

void *BlockCache::take(size_t bytes) {
  auto it = free_.find(bytes);
  if (it != free_.end() && !it->second.empty()) {
    void *block = it->second.back();
    it->second.pop_back();
    cached_ -= static_cast<int64_t>(bytes);
    return block;
  }
  void *block = fresh(bytes);
  if (!block && cached_ > 0) {
    clear(); // blocks of other sizes may make room
    block = fresh(bytes);
  }
  return block;
}

void *BlockCache::fresh(size_t bytes) {
  return device_ ? device_->allocate(bytes) : std::aligned_alloc(kAlignment, bytes);
}

void BlockCache::drop(void *block) {
  if (device_)
    device_->release(block);
  else
    std::free(block);
}

void BlockCache::give(void *block, size_t bytes, int64_t limit) {
  // An empty cache keeps one block whatever its size: a block's 64-byte
  // rounding can make it larger than the peak of the bytes it holds.
  if (!kCacheBlocks || (cached_ > 0 && cached_ + static_cast<int64_t>(bytes) > limit)) {
    drop(block);
    return;
  }
  free_[bytes].push_back(block);
  cached_ += static_cast<int64_t>(bytes);
}

void BlockCache::clear() {
  for (auto &[bytes, blocks] : free_)
    for (void *block : blocks)
      drop(block);
  free_.clear();
  cached_ = 0;
}

void MemoryAccount::add(int32_t category, int64_t bytes) {
  live_[category] += bytes;
  liveTotal_ += bytes;
  peak_[category] = std::max(peak_[category], live_[category]);
  peakTotal_ = std::max(peakTotal_, liveTotal_);
}

void MemoryAccount::remove(int32_t category, int64_t bytes) {
  live_[category] -= bytes;
  liveTotal_ -= bytes;
}

void MemoryAccount::move(int32_t from, int32_t to, int64_t bytes) {
  if (from == to)
    return;
  live_[from] -= bytes;
  live_[to] += bytes;
  peak_[to] = std::max(peak_[to], live_[to]);
}

namespace {

/// A storage of `bytes` charged (and `uncharged` more) from `cache`: host or
/// device memory.
Storage *storageFrom(MemoryAccount &account, BlockCache &cache, int64_t bytes, int64_t uncharged,
                     int32_t category) {
  // aligned_alloc wants a multiple of the alignment; a zero-byte tensor still
  // gets a distinct, valid pointer.
  size_t rounded =
      (static_cast<size_t>(bytes + uncharged) + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0)
    rounded = kAlignment;
  void *data = cache.take(rounded);
  if (!data)
    return nullptr;
  auto *storage = new Storage;
  storage->data = data;
  storage->capacity = rounded;
  storage->bytes = bytes;
  storage->category = category;
  storage->references = 1;
  storage->onDevice = &cache == &account.deviceCache;
  account.add(category, bytes);
  return storage;
}

} // namespace

Storage *allocateStorage(MemoryAccount &account, int64_t bytes, int32_t category,
                         int64_t uncharged) {
  return storageFrom(account, account.cache, bytes, uncharged, category);
}

Storage *allocateDeviceStorage(MemoryAccount &account, int64_t bytes, int32_t category) {
  return storageFrom(account, account.deviceCache, bytes, 0, category);
}

Storage *externalStorage(MemoryAccount &account, const void *data, int32_t category) {
  auto *storage = new Storage;
  storage->data = const_cast<void *>(data);
  storage->bytes = 0;
  storage->category = category;
  storage->references = 1;
  storage->owned = false;
  account.add(category, 0);
  return storage;
}

void retain(Storage *storage) { ++storage->references; }

void release(MemoryAccount &account, Storage *storage) {
  if (--storage->references > 0)
    return;
  account.remove(storage->category, storage->bytes);
  if (storage->owned)
    (storage->onDevice ? account.deviceCache : account.cache)
        .give(storage->data, storage->capacity, account.peakTotal());
  delete storage;
}

void recategorize(MemoryAccount &account, Storage *storage, int32_t category) {
  account.move(storage->category, category, storage->bytes);
  storage->category = category;
}

} // namespace piperun
