//===- RandomBits.h - the counter-based generator, host and device -*- C++ -*-===//
//
// SplitMix64 (Steele, Lea, Flood 2014): value n of the stream keyed k is
// finalise(k + (n + 1) * golden), so any element of any stream can be drawn
// alone, on any rank, on the host or a GPU thread, in any order. Data,
// parameter initialisation and dropout masks draw from it (docs/runtime.md,
// "Data").
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_KERNELS_RANDOM_BITS_H
#define PIPE_RUNTIME_KERNELS_RANDOM_BITS_H

#include <cstdint>

#if defined(__CUDACC__)
#define PIPE_RANDOM_HD __host__ __device__
#else
#define PIPE_RANDOM_HD
#endif

namespace piperun {

/// Value `counter` of the stream keyed `key`.
PIPE_RANDOM_HD inline uint64_t randomBits(uint64_t key, uint64_t counter) {
  uint64_t z = key + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A double uniform in [0, 1) from randomBits.
PIPE_RANDOM_HD inline double uniform01(uint64_t bits) {
  return static_cast<double>(bits >> 11) * (1.0 / 9007199254740992.0);
}

/// What dropout multiplies a kept element by: 1 / (1 - ratio); ratio 1
/// drops everything (no division by zero).
inline float dropoutScale(double ratio) {
  return ratio < 1.0 ? static_cast<float>(1.0 / (1.0 - ratio)) : 0.0f;
}

/// Dropout of element i of stream `stream`: kept when its uniform draw is at
/// least `ratio`, then scaled; `keep` (may be null) records the choice.
PIPE_RANDOM_HD inline float dropoutElement(float x, uint64_t stream, int64_t i, double ratio,
                                           float scale, uint8_t *keep) {
  const bool kept = uniform01(randomBits(stream, static_cast<uint64_t>(i))) >= ratio;
  if (keep)
    *keep = kept ? 1 : 0;
  return kept ? x * scale : 0.0f;
}

} // namespace piperun

#endif // PIPE_RUNTIME_KERNELS_RANDOM_BITS_H
