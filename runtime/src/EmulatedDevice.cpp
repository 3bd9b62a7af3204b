//===- EmulatedDevice.cpp - device memory the host cannot touch ------------===//
//
// The emulated device hands out addresses inside a reserved, inaccessible
// range (PROT_NONE): host code that reads or writes a tensor's `data` instead
// of copying it faults at once, as it would on a GPU. Its bytes live in a
// second, readable mapping at the same offsets; the copies translate. Blocks
// are placed first-fit in offset order and freed ranges merge, so the device
// runs out of memory at its capacity, as a real one does. Its launcher runs
// the native kernels' launches as host loops over the same formulas
// (kernels/PointwiseMath.h) and a column-major GEMM with cuBLAS's meaning, so
// the native kernels' host side (NativeKernels.cpp) is tested without a GPU.
//
//===----------------------------------------------------------------------===//
#include "Device.h"
#include "kernels/PointwiseMath.h"
#include "kernels/RandomBits.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <sys/mman.h>

namespace piperun {
namespace {

constexpr uint64_t kAlignment = 256;

class EmulatedDevice;

/// The native kernels' launches as host loops on the device's bytes.
class EmulatedLauncher final : public KernelLauncher {
public:
  explicit EmulatedLauncher(EmulatedDevice &device)
      : device_(device), convLibrary_(std::getenv("PIPE_EMULATED_CONV_LIBRARY") &&
                                      std::string(std::getenv("PIPE_EMULATED_CONV_LIBRARY")) == "1") {}
  void fill(float *y, float value, int64_t n) override;
  void unary(int32_t fn, const float *x, float *y, int64_t n, double alpha,
             double beta) override;
  void unaryGrad(int32_t fn, const float *saved, const float *dy, float *dx, int64_t n,
                 double alpha, double beta) override;
  void binary(int32_t fn, int32_t dtype, const OperandPlan &plan, void *y, const void *a,
              const void *b) override;
  void select(const OperandPlan &plan, size_t elementSize, void *y, const uint8_t *cond,
              const void *x, const void *z) override;
  void broadcastScaled(const float *c, int64_t rowStride, int64_t columnStride, float scale,
                       float *y, int64_t m, int64_t n) override;
  void accumulate(float *into, const float *from, int64_t n) override;
  void sgd(float *p, const float *g, float *buffer, int64_t n, float lr, float decay,
           float momentum, bool firstStep) override;
  void adam(float *p, const float *g, float *m, float *v, int64_t n,
            const AdamStep &step) override;
  void softmax(const AxisLayout &l, const float *x, float *y, bool logForm) override;
  void softmaxGrad(const AxisLayout &l, const float *y, const float *dy, float *dx,
                   bool logForm) override;
  void layerNorm(int64_t rows, int64_t width, const float *x, const float *gamma,
                 const float *beta, double epsilon, float *y, float *mean,
                 float *invstd) override;
  void layerNormGrad(int64_t rows, int64_t width, const float *x, const float *dy,
                     const float *gamma, const float *mean, const float *invstd, float *dx,
                     float *dscale, float *dbias) override;
  void reduce(int32_t fn, const ReduceGeometry &g, const float *x, float *y) override;
  void copyStrided(const OperandPlan &plan, void *dst, const void *src,
                   size_t elementSize) override;
  void trilu(const void *x, void *y, size_t elementSize, int64_t matrices, int64_t rows,
             int64_t columns, int64_t k, bool upper) override;
  void gather(const GatherGeometry &g, const int64_t *index, const void *x, void *y,
              size_t elementSize) override;
  void gatherGrad(const GatherGeometry &g, const int64_t *index, const float *dy,
                  float *dx) override;
  void dropout(const float *x, float *y, uint8_t *mask, int64_t n, uint64_t stream, double ratio,
               float scale) override;
  void crossEntropy(const LossGeometry &g, const float *logits, const int64_t *labels,
                    float *logProb, double *picked, float *loss) override;
  void crossEntropyGrad(const LossGeometry &g, const float *dloss, const float *logProb,
                        const int64_t *labels, float *dlogits) override;
  void batchNormTrain(const ChannelLayout &l, const float *x, const float *gamma,
                      const float *beta, double epsilon, double momentum, float *savedMean,
                      float *savedInvstd, float *runningMean, float *runningVar, double *ab,
                      float *y) override;
  void batchNormInfer(const ChannelLayout &l, const float *x, const float *gamma,
                      const float *beta, const float *mean, const float *var, double epsilon,
                      double *ab, float *y) override;
  void batchNormGrad(const ChannelLayout &l, const float *x, const float *dy, const float *gamma,
                     const float *savedMean, const float *savedInvstd, double *terms, float *dx,
                     float *dscale, float *dbias) override;
  void pad(const PadGeometry &g, const void *x, void *y, size_t elementSize,
           uint64_t fill) override;
  void cast(int32_t from, int32_t to, const void *x, void *y, int64_t n) override;
  void im2col(const ConvGeometry &g, const float *x, float *col) override;
  void col2im(const ConvGeometry &g, const float *col, float *x) override;
  int64_t libraryConvWorkspace(ConvPass pass, const ConvGeometry &g) override;
  void libraryConv(ConvPass pass, const ConvGeometry &g, const float *a, const float *b,
                   float *out, void *workspace, int64_t workspaceBytes) override;
  void maxPool(const PoolGeometry &g, const float *x, float *y, int64_t *indices) override;
  void averagePool(const PoolGeometry &g, const float *x, float *y,
                   bool countIncludePad) override;
  void averagePoolGrad(const PoolGeometry &g, const float *dy, float *dx,
                       bool countIncludePad) override;
  void maxPoolGrad(int64_t planes, int64_t outPlane, int64_t inPlane, const float *dy,
                   const int64_t *index, float *dx) override;
  void gemm(const ColumnMajorGemm &gemm) override;
  void finish(const char *) override {}

private:
  /// The host bytes behind `count` floats at device address `p`.
  float *at(const float *p, int64_t count);
  /// The host bytes behind `count` elements of `size` bytes at `p`.
  char *bytes(const void *p, int64_t count, size_t size);
  /// The host address of element offset 0 of operand k of `plan` at device
  /// address `p` (elements of `size` bytes), every offset the plan reaches
  /// checked to be device memory.
  char *operand(const OperandPlan &plan, int k, const void *p, size_t size);
  EmulatedDevice &device_;
  /// PIPE_EMULATED_CONV_LIBRARY=1: convolutions go to libraryConv, direct sums
  /// that stand for cuDNN, so that the native kernels' library path runs here.
  bool convLibrary_;
};

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
  Backend backend() const override { return Backend::Emulated; }
  void fromPeer(void *to, const Device &source, const void *from, size_t bytes) override {
    if (source.backend() != Backend::Emulated)
      throw DeviceError("emulated device: a copy from " + source.name() +
                        ", which is not an emulated device");
    if (bytes)
      std::memmove(bytesAt(to, bytes, "fromPeer"),
                   static_cast<const EmulatedDevice &>(source).bytesAt(from, bytes, "fromPeer"),
                   bytes);
  }
  KernelLauncher *launcher() override { return &launcher_; }

  char *bytesAt(const void *address, size_t bytes, const char *what) const {
    return bytes_ + offsetOf(address, bytes, what);
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
  uint64_t capacity_;
  char *addresses_ = nullptr; ///< what allocate hands out (inaccessible)
  char *bytes_ = nullptr;     ///< where the bytes are
  std::map<uint64_t, uint64_t> free_; ///< offset -> size, merged
  std::map<uint64_t, uint64_t> used_; ///< offset -> size
  EmulatedLauncher launcher_{*this};
};

using namespace pointwise;

float *EmulatedLauncher::at(const float *p, int64_t count) {
  return reinterpret_cast<float *>(
      device_.bytesAt(p, static_cast<size_t>(std::max<int64_t>(count, 0)) * sizeof(float),
                      "kernel"));
}

void EmulatedLauncher::fill(float *y, float value, int64_t n) {
  float *out = at(y, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = value;
}

void EmulatedLauncher::unary(int32_t fn, const float *x, float *y, int64_t n, double alpha,
                             double beta) {
  const float *in = at(x, n);
  float *out = at(y, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(unaryValue<double>(fn, in[i], alpha, beta));
}

void EmulatedLauncher::unaryGrad(int32_t fn, const float *saved, const float *dy, float *dx,
                                 int64_t n, double alpha, double beta) {
  const float *s = saved ? at(saved, n) : nullptr;
  const float *g = at(dy, n);
  float *out = at(dx, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(unaryGradValue<double>(fn, s ? s[i] : 0.0f, g[i], alpha, beta));
}

char *EmulatedLauncher::bytes(const void *p, int64_t count, size_t size) {
  return device_.bytesAt(p, static_cast<size_t>(std::max<int64_t>(count, 0)) * size, "kernel");
}

char *EmulatedLauncher::operand(const OperandPlan &plan, int k, const void *p, size_t size) {
  int64_t low, high;
  plan.extent(k, low, high);
  const auto step = static_cast<int64_t>(size);
  return bytes(static_cast<const char *>(p) + low * step, high - low + 1, size) - low * step;
}

namespace {
template <typename T>
void binaryLoop(int32_t fn, const OperandPlan &plan, char *y, const char *a, const char *b) {
  const T *left = reinterpret_cast<const T *>(a), *right = reinterpret_cast<const T *>(b);
  int64_t offset[4];
  for (int64_t i = 0, n = plan.elements(); i < n; ++i) {
    plan.offsets(i, offset);
    binaryAt<T>(fn, left[offset[1]], right[offset[2]], y, offset[0]);
  }
}
} // namespace

void EmulatedLauncher::binary(int32_t fn, int32_t dtype, const OperandPlan &plan, void *y,
                              const void *a, const void *b) {
  const size_t size = dtype == PIPE_BOOL ? 1 : dtype == PIPE_I32 || dtype == PIPE_F32 ? 4 : 8;
  const bool boolOut = (fn >= PIPE_EQUAL && fn <= PIPE_GREATER_EQUAL) || fn == PIPE_AND ||
                       fn == PIPE_OR;
  char *out = operand(plan, 0, y, boolOut ? 1 : size);
  const char *left = operand(plan, 1, a, size), *right = operand(plan, 2, b, size);
  switch (dtype) {
  case PIPE_F32: binaryLoop<float>(fn, plan, out, left, right); break;
  case PIPE_I64: binaryLoop<int64_t>(fn, plan, out, left, right); break;
  case PIPE_I32: binaryLoop<int32_t>(fn, plan, out, left, right); break;
  default: binaryLoop<uint8_t>(fn, plan, out, left, right); break;
  }
}

void EmulatedLauncher::select(const OperandPlan &plan, size_t elementSize, void *y,
                              const uint8_t *cond, const void *x, const void *z) {
  char *out = operand(plan, 0, y, elementSize);
  const char *c = operand(plan, 1, cond, 1);
  const char *p = operand(plan, 2, x, elementSize), *q = operand(plan, 3, z, elementSize);
  int64_t offset[4];
  for (int64_t i = 0, n = plan.elements(); i < n; ++i) {
    plan.offsets(i, offset);
    const char *from = c[offset[1]] ? p + offset[2] * elementSize : q + offset[3] * elementSize;
    std::memcpy(out + offset[0] * elementSize, from, elementSize);
  }
}

void EmulatedLauncher::broadcastScaled(const float *c, int64_t rowStride, int64_t columnStride,
                                       float scale, float *y, int64_t m, int64_t n) {
  const float *in = at(c, (m - 1) * rowStride + (n - 1) * columnStride + 1);
  float *out = at(y, m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      out[i * n + j] = scale * in[i * rowStride + j * columnStride];
}

void EmulatedLauncher::accumulate(float *into, const float *from, int64_t n) {
  float *out = at(into, n);
  const float *in = at(from, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] += in[i];
}

void EmulatedLauncher::sgd(float *p, const float *g, float *buffer, int64_t n, float lr,
                           float decay, float momentum, bool firstStep) {
  float *value = at(p, n), *state = buffer ? at(buffer, n) : nullptr;
  const float *grad = at(g, n);
  for (int64_t i = 0; i < n; ++i)
    sgdElement(value[i], grad[i], state ? state + i : nullptr, lr, decay, momentum, firstStep);
}

void EmulatedLauncher::adam(float *p, const float *g, float *m, float *v, int64_t n,
                            const AdamStep &s) {
  float *value = at(p, n), *first = at(m, n), *second = at(v, n);
  const float *grad = at(g, n);
  for (int64_t i = 0; i < n; ++i)
    adamElement(value[i], grad[i], first[i], second[i], s);
}

void EmulatedLauncher::softmax(const AxisLayout &l, const float *x, float *y, bool logForm) {
  const int64_t n = l.positions() * l.length;
  const float *in = at(x, n);
  float *out = at(y, n);
  for (int64_t p = 0; p < l.positions(); ++p)
    softmaxPosition(l, p, in, out, logForm);
}

void EmulatedLauncher::softmaxGrad(const AxisLayout &l, const float *y, const float *dy,
                                   float *dx, bool logForm) {
  const int64_t n = l.positions() * l.length;
  const float *py = at(y, n), *pdy = at(dy, n);
  float *pdx = at(dx, n);
  for (int64_t p = 0; p < l.positions(); ++p)
    softmaxGradPosition(l, p, py, pdy, pdx, logForm);
}

void EmulatedLauncher::layerNorm(int64_t rows, int64_t width, const float *x, const float *gamma,
                                 const float *beta, double epsilon, float *y, float *mean,
                                 float *invstd) {
  const float *px = at(x, rows * width), *pg = at(gamma, width);
  const float *pb = beta ? at(beta, width) : nullptr;
  float *py = at(y, rows * width);
  float *pm = mean ? at(mean, rows) : nullptr, *ps = invstd ? at(invstd, rows) : nullptr;
  for (int64_t row = 0; row < rows; ++row)
    layerNormRow(row, width, px, pg, pb, epsilon, py, pm, ps);
}

void EmulatedLauncher::layerNormGrad(int64_t rows, int64_t width, const float *x,
                                     const float *dy, const float *gamma, const float *mean,
                                     const float *invstd, float *dx, float *dscale,
                                     float *dbias) {
  const float *px = at(x, rows * width), *pdy = at(dy, rows * width), *pg = at(gamma, width);
  const float *pm = at(mean, rows), *ps = at(invstd, rows);
  if (dx) {
    float *pdx = at(dx, rows * width);
    for (int64_t row = 0; row < rows; ++row)
      layerNormGradRow(row, width, px, pdy, pg, pm, ps, pdx);
  }
  float *scale = dscale ? at(dscale, width) : nullptr, *bias = dbias ? at(dbias, width) : nullptr;
  if (!scale && !bias)
    return;
  for (int64_t j = 0; j < width; ++j)
    layerNormGradColumn(j, rows, width, px, pdy, pm, ps, scale, bias);
}

void EmulatedLauncher::reduce(int32_t fn, const ReduceGeometry &g, const float *x, float *y) {
  const float *in = at(x, g.outputs * g.reduceCount);
  float *out = at(y, g.outputs);
  for (int64_t o = 0; o < g.outputs; ++o)
    out[o] = reduceOutput(fn, g, o, in);
}

void EmulatedLauncher::copyStrided(const OperandPlan &plan, void *dst, const void *src,
                                   size_t elementSize) {
  char *out = operand(plan, 0, dst, elementSize);
  const char *in = operand(plan, 1, src, elementSize);
  int64_t offset[4];
  for (int64_t i = 0, n = plan.elements(); i < n; ++i) {
    plan.offsets(i, offset);
    std::memcpy(out + offset[0] * elementSize, in + offset[1] * elementSize, elementSize);
  }
}

void EmulatedLauncher::trilu(const void *x, void *y, size_t elementSize, int64_t matrices,
                             int64_t rows, int64_t columns, int64_t k, bool upper) {
  const int64_t n = matrices * rows * columns;
  const char *in = bytes(x, n, elementSize);
  char *out = bytes(y, n, elementSize);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t j = e % columns, i = (e / columns) % rows;
    if (trilKeeps(i, j, k, upper))
      std::memmove(out + e * elementSize, in + e * elementSize, elementSize);
    else
      std::memset(out + e * elementSize, 0, elementSize);
  }
}

void EmulatedLauncher::gather(const GatherGeometry &g, const int64_t *index, const void *x,
                              void *y, size_t elementSize) {
  const auto *rows = reinterpret_cast<const int64_t *>(bytes(index, g.count, sizeof(int64_t)));
  const char *in = bytes(x, g.outer * g.size * g.inner, elementSize);
  char *out = bytes(y, g.outer * g.count * g.inner, elementSize);
  for (int64_t e = 0, n = g.outer * g.count * g.inner; e < n; ++e)
    std::memcpy(out + e * elementSize, in + gatherSource(g, rows, e) * elementSize, elementSize);
}

void EmulatedLauncher::gatherGrad(const GatherGeometry &g, const int64_t *index, const float *dy,
                                  float *dx) {
  const auto *rows = reinterpret_cast<const int64_t *>(bytes(index, g.count, sizeof(int64_t)));
  const float *in = at(dy, g.outer * g.count * g.inner);
  float *out = at(dx, g.outer * g.size * g.inner);
  for (int64_t column = 0, n = g.outer * g.inner; column < n; ++column)
    gatherGradColumn(g, rows, column, in, out);
}

void EmulatedLauncher::pad(const PadGeometry &g, const void *x, void *y, size_t elementSize,
                           uint64_t fill) {
  int64_t inputs = 1, outputs = 1;
  for (int d = 0; d < g.rank; ++d) {
    inputs *= g.xShape[d];
    outputs *= g.yShape[d];
  }
  const char *in = bytes(x, inputs, elementSize);
  char *out = bytes(y, outputs, elementSize);
  for (int64_t e = 0; e < outputs; ++e) {
    const int64_t s = padSourceOffset(g, e);
    std::memcpy(out + e * elementSize,
                s < 0 ? reinterpret_cast<const char *>(&fill) : in + s * elementSize, elementSize);
  }
}

void EmulatedLauncher::cast(int32_t from, int32_t to, const void *x, void *y, int64_t n) {
  const char *in = bytes(x, n, static_cast<size_t>(dtypeBytes(from)));
  char *out = bytes(y, n, static_cast<size_t>(dtypeBytes(to)));
  for (int64_t i = 0; i < n; ++i)
    castElement(from, to, in, out, i);
}

void EmulatedLauncher::batchNormTrain(const ChannelLayout &l, const float *x,
                                      const float *gamma, const float *beta, double epsilon,
                                      double momentum, float *savedMean, float *savedInvstd,
                                      float *runningMean, float *runningVar, double *ab,
                                      float *y) {
  const int64_t n = l.batch * l.channels * l.spatial, c = l.channels;
  const float *in = at(x, n);
  auto *coefficients = reinterpret_cast<double *>(bytes(ab, 2 * c, sizeof(double)));
  for (int64_t channel = 0; channel < c; ++channel)
    batchNormTrainChannel(l, channel, in, at(gamma, c), at(beta, c), epsilon, momentum,
                          savedMean ? at(savedMean, c) : nullptr,
                          savedInvstd ? at(savedInvstd, c) : nullptr,
                          runningMean ? at(runningMean, c) : nullptr,
                          runningVar ? at(runningVar, c) : nullptr, coefficients);
  float *out = at(y, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = batchNormValue(coefficients, l.channelOf(i), in[i]);
}

void EmulatedLauncher::batchNormInfer(const ChannelLayout &l, const float *x, const float *gamma,
                                      const float *beta, const float *mean, const float *var,
                                      double epsilon, double *ab, float *y) {
  const int64_t n = l.batch * l.channels * l.spatial, c = l.channels;
  auto *coefficients = reinterpret_cast<double *>(bytes(ab, 2 * c, sizeof(double)));
  for (int64_t channel = 0; channel < c; ++channel)
    batchNormInferChannel(channel, at(gamma, c), at(beta, c), at(mean, c), at(var, c), epsilon,
                          coefficients);
  const float *in = at(x, n);
  float *out = at(y, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = batchNormValue(coefficients, l.channelOf(i), in[i]);
}

void EmulatedLauncher::batchNormGrad(const ChannelLayout &l, const float *x, const float *dy,
                                     const float *gamma, const float *savedMean,
                                     const float *savedInvstd, double *terms, float *dx,
                                     float *dscale, float *dbias) {
  const int64_t n = l.batch * l.channels * l.spatial, c = l.channels;
  const float *in = at(x, n), *gradient = at(dy, n);
  auto *t = reinterpret_cast<double *>(bytes(terms, 5 * c, sizeof(double)));
  for (int64_t channel = 0; channel < c; ++channel)
    batchNormGradChannel(l, channel, in, gradient, at(gamma, c), at(savedMean, c),
                         at(savedInvstd, c), dscale ? at(dscale, c) : nullptr,
                         dbias ? at(dbias, c) : nullptr, t);
  if (!dx)
    return;
  float *out = at(dx, n);
  for (int64_t i = 0; i < n; ++i)
    out[i] = batchNormGradValue(t, l.channelOf(i), in[i], gradient[i]);
}

void EmulatedLauncher::im2col(const ConvGeometry &g, const float *x, float *col) {
  const float *in = at(x, g.channelsPerGroup * g.inVolume);
  float *out = at(col, g.columnRows() * g.outVolume);
  for (int64_t row = 0; row < g.columnRows(); ++row)
    for (int64_t o = 0; o < g.outVolume; ++o)
      out[row * g.outVolume + o] = im2colElement(g, in, row, o);
}

void EmulatedLauncher::col2im(const ConvGeometry &g, const float *col, float *x) {
  const float *in = at(col, g.columnRows() * g.outVolume);
  float *out = at(x, g.channelsPerGroup * g.inVolume);
  for (int64_t e = 0, n = g.channelsPerGroup * g.inVolume; e < n; ++e)
    out[e] = col2imElement(g, in, e);
}

int64_t EmulatedLauncher::libraryConvWorkspace(ConvPass pass, const ConvGeometry &g) {
  if (!convLibrary_ || !symmetricPadsGiveTheOutput(g))
    return -1;
  // Some workspace, as cuDNN's algorithms ask for, so that its path is taken too.
  return pass == ConvPass::GradWeight ? 0 : g.columnRows() * static_cast<int64_t>(sizeof(double));
}

void EmulatedLauncher::libraryConv(ConvPass pass, const ConvGeometry &g, const float *a,
                                   const float *b, float *out, void *workspace,
                                   int64_t workspaceBytes) {
  if (!convLibrary_ || !symmetricPadsGiveTheOutput(g) ||
      workspaceBytes < libraryConvWorkspace(pass, g) || (workspaceBytes > 0 && !workspace))
    throw DeviceError("emulated device: a library convolution it did not offer");
  if (workspaceBytes > 0)
    bytes(workspace, workspaceBytes, 1); // device memory, as cuDNN requires
  const int64_t rows = g.columnRows(), samples = g.channels * g.inVolume;
  const int64_t outSamples = g.outChannels * g.outVolume;
  const float *x = pass == ConvPass::GradInput ? nullptr : at(a, g.batch * samples);
  const float *dy = pass == ConvPass::Forward ? nullptr
                    : at(pass == ConvPass::GradInput ? a : b, g.batch * outSamples);
  const float *w = pass == ConvPass::GradWeight ? nullptr : at(b, g.outChannels * rows);
  // Direct sums in double, rounded once: another order than the GEMMs'.
  switch (pass) {
  case ConvPass::Forward: {
    float *y = at(out, g.batch * outSamples);
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t gr = 0; gr < g.group; ++gr) {
        const float *xGroup = x + n * samples + gr * g.channelsPerGroup * g.inVolume;
        for (int64_t k = gr * g.outPerGroup; k < (gr + 1) * g.outPerGroup; ++k)
          for (int64_t o = 0; o < g.outVolume; ++o) {
            double sum = 0;
            for (int64_t row = 0; row < rows; ++row)
              sum += static_cast<double>(w[k * rows + row]) * im2colElement(g, xGroup, row, o);
            y[n * outSamples + k * g.outVolume + o] = static_cast<float>(sum);
          }
      }
    return;
  }
  case ConvPass::GradInput: {
    float *dx = at(out, g.batch * samples);
    std::vector<float> col(static_cast<size_t>(rows * g.outVolume));
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t gr = 0; gr < g.group; ++gr) {
        for (int64_t row = 0; row < rows; ++row)
          for (int64_t o = 0; o < g.outVolume; ++o) {
            double sum = 0;
            for (int64_t k = gr * g.outPerGroup; k < (gr + 1) * g.outPerGroup; ++k)
              sum += static_cast<double>(w[k * rows + row]) *
                     dy[n * outSamples + k * g.outVolume + o];
            col[static_cast<size_t>(row * g.outVolume + o)] = static_cast<float>(sum);
          }
        float *dxGroup = dx + n * samples + gr * g.channelsPerGroup * g.inVolume;
        for (int64_t e = 0; e < g.channelsPerGroup * g.inVolume; ++e)
          dxGroup[e] = col2imElement(g, col.data(), e);
      }
    return;
  }
  case ConvPass::GradWeight: {
    float *dw = at(out, g.outChannels * rows);
    for (int64_t gr = 0; gr < g.group; ++gr)
      for (int64_t k = gr * g.outPerGroup; k < (gr + 1) * g.outPerGroup; ++k)
        for (int64_t row = 0; row < rows; ++row) {
          double sum = 0;
          for (int64_t n = 0; n < g.batch; ++n) {
            const float *xGroup = x + n * samples + gr * g.channelsPerGroup * g.inVolume;
            for (int64_t o = 0; o < g.outVolume; ++o)
              sum += static_cast<double>(dy[n * outSamples + k * g.outVolume + o]) *
                     im2colElement(g, xGroup, row, o);
          }
          dw[k * rows + row] = static_cast<float>(sum);
        }
    return;
  }
  }
}

void EmulatedLauncher::maxPool(const PoolGeometry &g, const float *x, float *y,
                               int64_t *indices) {
  const int64_t outputs = g.planes * g.outVolume;
  const float *in = at(x, g.planes * g.inVolume);
  float *out = at(y, outputs);
  auto *taken = indices ? reinterpret_cast<int64_t *>(bytes(indices, outputs, sizeof(int64_t)))
                        : nullptr;
  for (int64_t e = 0; e < outputs; ++e) {
    int64_t index;
    out[e] = maxPoolElement(g, in, e, &index);
    if (taken)
      taken[e] = index;
  }
}

void EmulatedLauncher::averagePool(const PoolGeometry &g, const float *x, float *y,
                                   bool countIncludePad) {
  const int64_t outputs = g.planes * g.outVolume;
  const float *in = at(x, g.planes * g.inVolume);
  float *out = at(y, outputs);
  for (int64_t e = 0; e < outputs; ++e)
    out[e] = averagePoolElement(g, in, e, countIncludePad);
}

void EmulatedLauncher::averagePoolGrad(const PoolGeometry &g, const float *dy, float *dx,
                                       bool countIncludePad) {
  const int64_t inputs = g.planes * g.inVolume;
  const float *in = at(dy, g.planes * g.outVolume);
  float *out = at(dx, inputs);
  for (int64_t e = 0; e < inputs; ++e)
    out[e] = averagePoolGradElement(g, in, e, countIncludePad);
}

void EmulatedLauncher::maxPoolGrad(int64_t planes, int64_t outPlane, int64_t inPlane,
                                   const float *dy, const int64_t *index, float *dx) {
  const float *in = at(dy, planes * outPlane);
  const auto *taken =
      reinterpret_cast<const int64_t *>(bytes(index, planes * outPlane, sizeof(int64_t)));
  float *out = at(dx, planes * inPlane);
  for (int64_t plane = 0; plane < planes; ++plane)
    maxPoolGradPlane(plane, outPlane, inPlane, in, taken, out);
}

void EmulatedLauncher::dropout(const float *x, float *y, uint8_t *mask, int64_t n,
                               uint64_t stream, double ratio, float scale) {
  const float *in = at(x, n);
  float *out = at(y, n);
  uint8_t *keep = mask ? reinterpret_cast<uint8_t *>(bytes(mask, n, 1)) : nullptr;
  for (int64_t i = 0; i < n; ++i)
    out[i] = dropoutElement(in[i], stream, i, ratio, scale, keep ? keep + i : nullptr);
}

void EmulatedLauncher::crossEntropy(const LossGeometry &g, const float *logits,
                                    const int64_t *labels, float *logProb, double *picked,
                                    float *loss) {
  const int64_t n = g.positions * g.classes;
  const float *in = at(logits, n);
  const int64_t *label =
      reinterpret_cast<const int64_t *>(bytes(labels, g.positions, sizeof(int64_t)));
  float *lp = logProb ? at(logProb, n) : nullptr;
  double *pick = reinterpret_cast<double *>(bytes(picked, g.positions, sizeof(double)));
  for (int64_t p = 0; p < g.positions; ++p)
    pick[p] = crossEntropyPosition(g, p, in, label[p], lp);
  *at(loss, 1) = crossEntropyLoss(g, pick);
}

void EmulatedLauncher::crossEntropyGrad(const LossGeometry &g, const float *dloss,
                                        const float *logProb, const int64_t *labels,
                                        float *dlogits) {
  const int64_t n = g.positions * g.classes;
  const float seed = *at(dloss, 1);
  const float *lp = at(logProb, n);
  const int64_t *label =
      reinterpret_cast<const int64_t *>(bytes(labels, g.positions, sizeof(int64_t)));
  float *out = at(dlogits, n);
  for (int64_t p = 0; p < g.positions; ++p)
    crossEntropyGradPosition(g, p, seed, lp, label[p], out);
}

void EmulatedLauncher::gemm(const ColumnMajorGemm &g) {
  // cuBLAS's meaning: column-major, op(A) m x k, op(B) k x n, C m x n; sums
  // in double.
  const int64_t rowsA = g.transA ? g.k : g.m, columnsA = g.transA ? g.m : g.k;
  const int64_t rowsB = g.transB ? g.n : g.k, columnsB = g.transB ? g.k : g.n;
  const float *a = at(g.a, (g.batches - 1) * g.strideA + (columnsA - 1) * g.lda + rowsA);
  const float *b = at(g.b, (g.batches - 1) * g.strideB + (columnsB - 1) * g.ldb + rowsB);
  float *c = at(g.c, (g.batches - 1) * g.strideC + (g.n - 1) * g.ldc + g.m);
  for (int64_t batch = 0; batch < g.batches; ++batch) {
    const float *pa = a + batch * g.strideA, *pb = b + batch * g.strideB;
    float *pc = c + batch * g.strideC;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const float x = g.transA ? pa[p + i * g.lda] : pa[i + p * g.lda];
          const float y = g.transB ? pb[j + p * g.ldb] : pb[p + j * g.ldb];
          sum += static_cast<double>(x) * y;
        }
        float &out = pc[i + j * g.ldc];
        out = static_cast<float>(g.alpha * sum + (g.beta == 0 ? 0.0 : g.beta * out));
      }
  }
}

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
