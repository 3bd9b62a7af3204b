//===- Dropout.cpp - dropout with a counter-based mask --------------------===//
//
// Dropout with a counter-based mask: element i is kept when uniform01(randomBits(
// streamKey(seed, step, microbatch, key), i)) >= ratio (kernels/RandomBits.h),
// so a device computes the same mask.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

void piperun::cpu::dropoutChecks(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *y,
                                 const pipe_tensor *mask, double ratio) {
  const char *op = "dropout";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireDtype(r, op, "x", x, PIPE_F32);
  requireDtype(r, op, "y", y, PIPE_F32);
  requireSameShape(r, op, "x", x, "y", y);
  if (mask) {
    requireTensor(r, op, "mask", mask);
    requireDtype(r, op, "mask", mask, PIPE_BOOL);
    requireSameShape(r, op, "x", x, "mask", mask);
  }
  if (!(ratio >= 0.0 && ratio <= 1.0))
    fail(r, "%s: ratio %g is outside [0, 1]", op, ratio);
}

extern "C" {

void pipe_k_dropout(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *mask,
                    double ratio, int32_t microbatch, int64_t key) {
  PIPE_DEVICE_KERNEL(r, dropout, pipe_k_dropout, x, y, mask, ratio, microbatch, key);
  dropoutChecks(r, x, y, mask, ratio);
  const float *in = static_cast<const float *>(x->data);
  float *out = static_cast<float *>(y->data);
  uint8_t *keep = mask ? static_cast<uint8_t *>(mask->data) : nullptr;
  const int64_t n = x->numel;
  if (ratio == 0.0) {
    // Identity, every element kept.
    if (n > 0 && out != in)
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
    if (keep)
      std::fill(keep, keep + n, uint8_t(1));
    return;
  }
  const uint64_t stream = streamKey(runSeed(r), currentStep(r), stepMicrobatch(r, microbatch), key);
  const float scale = dropoutScale(ratio);
  const int threads = threadsFor(r, n * 4);
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t i = 0; i < n; ++i)
    out[i] = dropoutElement(in[i], stream, i, ratio, scale, keep ? keep + i : nullptr);
}

} // extern "C"
