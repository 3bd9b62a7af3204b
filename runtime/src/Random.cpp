//===- Random.cpp - the counter-based generator of data and masks ---------===//
//
// SplitMix64 (Steele, Lea, Flood 2014): value n of the stream seeded with k is
// finalise(k + (n + 1) * golden). A stream's key mixes the run's seed, the step,
// the micro-batch and a stream id the same way, so any element of any stream can
// be drawn alone, on any rank, in any order (docs/runtime.md, "Data").
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

namespace piperun {

namespace {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

uint64_t finalise(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
} // namespace

uint64_t randomBits(uint64_t key, uint64_t counter) {
  return finalise(key + (counter + 1) * kGolden);
}

uint64_t streamKey(uint64_t seed, int64_t step, int64_t microbatch, int64_t id) {
  uint64_t key = randomBits(seed, 0);
  key = randomBits(key, static_cast<uint64_t>(step));
  key = randomBits(key, static_cast<uint64_t>(microbatch));
  return randomBits(key, static_cast<uint64_t>(id));
}

} // namespace piperun
