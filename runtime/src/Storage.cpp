//===- Storage.cpp - one rank's counted allocations, per memory category -===//
//
// See Storage.h. The account is the runtime's measurement of the memory model's
// categories (docs/runtime-abi.md, "Memory accounting").
//
//===----------------------------------------------------------------------===//
#include "Storage.h"

#include <algorithm>
#include <cstdlib>

namespace piperun {

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

Storage *allocateStorage(MemoryAccount &account, int64_t bytes, int32_t category,
                         int64_t uncharged) {
  constexpr size_t alignment = 64;
  // aligned_alloc wants a multiple of the alignment; a zero-byte tensor still
  // gets a distinct, valid pointer.
  size_t rounded = (static_cast<size_t>(bytes + uncharged) + alignment - 1) / alignment * alignment;
  void *data = std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
  if (!data)
    return nullptr;
  auto *storage = new Storage;
  storage->data = data;
  storage->bytes = bytes;
  storage->category = category;
  storage->references = 1;
  account.add(category, bytes);
  return storage;
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
    std::free(storage->data);
  delete storage;
}

void recategorize(MemoryAccount &account, Storage *storage, int32_t category) {
  account.move(storage->category, category, storage->bytes);
  storage->category = category;
}

} // namespace piperun
