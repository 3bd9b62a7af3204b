//===- Random.cpp - the counter-based generator of data and masks ---------===//
//
// A stream's key mixes the run's seed, the step, the micro-batch and a stream
// id with the generator itself (kernels/RandomBits.h), so any element of any
// stream can be drawn alone, on any rank, in any order (docs/runtime.md, "Data").
//
//===----------------------------------------------------------------------===//
#include "Internal.h"

namespace piperun {

uint64_t streamKey(uint64_t seed, int64_t step, int64_t microbatch, int64_t id) {
  uint64_t key = randomBits(seed, 0);
  key = randomBits(key, static_cast<uint64_t>(step));
  key = randomBits(key, static_cast<uint64_t>(microbatch));
  return randomBits(key, static_cast<uint64_t>(id));
}

} // namespace piperun
