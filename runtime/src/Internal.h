//===- Internal.h - what the kernels need from the rank -----------*- C++ -*-===//
//
// The runtime's private contract between the rank (allocation, errors,
// run-wide settings; src/*.cpp) and the CPU kernels (src/cpu/*.cpp). Nothing
// here is part of the C ABI.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_INTERNAL_H
#define PIPE_RUNTIME_INTERNAL_H

#include "kernels/RandomBits.h"
#include "pipe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace piperun {

/// What fail() throws: the complete one-line message. The top of the rank (its
/// thread, or the MPI process) catches it and stops the run; a standalone rank
/// lets it reach the caller, so tests can catch it as std::runtime_error.
class PIPE_EXPORT Failure : public std::runtime_error {
public:
  explicit Failure(const std::string &message) : std::runtime_error(message) {}
};

/// Stops every rank of the run with one message: "rank R, node NAME: <text>".
/// Never returns: it throws Failure, which unwinds the rank to its top (the
/// thread transport then stops the other ranks; MPI aborts the world). Call it
/// from the rank's own thread only, never inside an OpenMP parallel region
/// (check shapes before the loop).
[[noreturn]] void fail(pipe_rank *r, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/// Bytes of one element of `dtype`; fails on a dtype the runtime cannot hold.
size_t dtypeSize(pipe_rank *r, int32_t dtype);
/// "f32", "i64", ... for messages.
const char *dtypeName(int32_t dtype);

/// The run's seed and the current step (0 for a standalone rank), for the
/// counter-based generator of dropout masks and synthetic data.
uint64_t runSeed(pipe_rank *r);
int64_t currentStep(pipe_rank *r);

/// The step's index of this replica's micro-batch `microbatch`: data and
/// dropout masks are drawn per step's micro-batch, and replica j of a run with
/// replicas runs micro-batches j * m .. (j + 1) * m - 1 of the step (m per
/// replica), so replicas train on what one pipeline would.
int32_t stepMicrobatch(pipe_rank *r, int32_t microbatch);

/// Threads a kernel of this rank may use (OpenMP / BLAS), so that several ranks
/// in one process do not oversubscribe the cores.
int kernelThreads(pipe_rank *r);

/// The key of a stream: seed, step, micro-batch, stream id mixed together
/// with the counter-based generator (kernels/RandomBits.h).
uint64_t streamKey(uint64_t seed, int64_t step, int64_t microbatch, int64_t id);

} // namespace piperun

#endif // PIPE_RUNTIME_INTERNAL_H
