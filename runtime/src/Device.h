//===- Device.h - the memory and copies of an accelerator a rank runs on -*- C++ -*-===//
//
// A rank of the CPU backend holds its tensors in host memory. A rank of a
// device backend holds them in its Device's memory: the host never reads a
// tensor's `data` there, it copies bytes in and out through these calls
// (HostAccess.h). Two devices exist:
//  - the CUDA device (backend "cuda"): cudaMalloc'd memory of one GPU, copies on
//    the rank's own stream (src/cuda/CudaDevice.cpp, built with the toolkit);
//  - the emulated device (backend "emulated"): host memory behind addresses the
//    host cannot touch (reading one faults at once), so every path of a device
//    backend (allocation and accounting, uploads, downloads, transfers) runs
//    and is tested on machines without a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_DEVICE_H
#define PIPE_RUNTIME_DEVICE_H

#include "kernels/AxisMath.h"
#include "kernels/Plans.h"
#include "kernels/WindowMath.h"
#include "pipe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace piperun {

/// A device call that failed for another reason than memory running out (a
/// foreign pointer, a driver error): the caller turns it into the rank's failure.
class PIPE_EXPORT DeviceError : public std::runtime_error {
public:
  explicit DeviceError(const std::string &message) : std::runtime_error(message) {}
};

struct Parameter;

/// The backends a run can use.
enum class Backend { Cpu, Cuda, Emulated };

/// The kernels a device runs itself. Each returns false when it does not
/// handle the case it is given (a dtype, a broadcast, a shape it has no code
/// for, or arguments the CPU kernel would refuse): the caller then runs the
/// CPU kernel staged, which computes it or fails with its own message. A null
/// entry: always staged.
struct DeviceKernels {
  bool (*unary)(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y, double alpha,
                double beta) = nullptr;
  bool (*unaryGrad)(pipe_rank *r, int32_t fn, const pipe_tensor *saved, const pipe_tensor *dy,
                    pipe_tensor *dx, double alpha, double beta) = nullptr;
  bool (*binary)(pipe_rank *r, int32_t fn, const pipe_tensor *a, const pipe_tensor *b,
                 pipe_tensor *y) = nullptr;
  bool (*where)(pipe_rank *r, const pipe_tensor *cond, const pipe_tensor *x, const pipe_tensor *z,
                pipe_tensor *y) = nullptr;
  bool (*fill)(pipe_rank *r, pipe_tensor *y, double value) = nullptr;
  bool (*matmul)(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b,
                 pipe_tensor *y) = nullptr;
  bool (*gemm)(pipe_rank *r, const pipe_tensor *a, const pipe_tensor *b, const pipe_tensor *c,
               pipe_tensor *y, double alpha, double beta, int32_t transA,
               int32_t transB) = nullptr;
  bool (*softmax)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) = nullptr;
  bool (*logSoftmax)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t axis) = nullptr;
  bool (*softmaxGrad)(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy, pipe_tensor *dx,
                      int64_t axis) = nullptr;
  bool (*logSoftmaxGrad)(pipe_rank *r, const pipe_tensor *y, const pipe_tensor *dy,
                         pipe_tensor *dx, int64_t axis) = nullptr;
  bool (*reduce)(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y,
                 pipe_ints axes) = nullptr;
  bool (*transpose)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints perm) = nullptr;
  bool (*slice)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
                pipe_ints steps) = nullptr;
  bool (*sliceAssign)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints starts,
                      pipe_ints steps) = nullptr;
  bool (*expand)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) = nullptr;
  bool (*pad)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints pads, int32_t mode,
              double value) = nullptr;
  bool (*cast)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) = nullptr;
  bool (*trilu)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, int64_t k,
                int32_t upper) = nullptr;
  bool (*gather)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *indices, pipe_tensor *y,
                 int64_t axis) = nullptr;
  bool (*gatherGrad)(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                     pipe_tensor *dx, int64_t axis) = nullptr;
  bool (*dropout)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *mask,
                  double ratio, int32_t microbatch, int64_t key) = nullptr;
  bool (*softmaxCrossEntropy)(pipe_rank *r, const pipe_tensor *logits, const pipe_tensor *labels,
                              pipe_tensor *loss, pipe_tensor *logProb, int64_t ignoreIndex,
                              double scale) = nullptr;
  bool (*softmaxCrossEntropyGrad)(pipe_rank *r, const pipe_tensor *dloss,
                                  const pipe_tensor *logProb, const pipe_tensor *labels,
                                  pipe_tensor *dlogits, int64_t ignoreIndex,
                                  double scale) = nullptr;
  bool (*conv)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *w, const pipe_tensor *bias,
               pipe_tensor *y, pipe_ints strides, pipe_ints pads, pipe_ints dilations,
               int64_t group) = nullptr;
  bool (*convGradInput)(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *w,
                        pipe_tensor *dx, pipe_ints strides, pipe_ints pads, pipe_ints dilations,
                        int64_t group) = nullptr;
  bool (*convGradWeight)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *dy,
                         pipe_tensor *dw, pipe_ints strides, pipe_ints pads, pipe_ints dilations,
                         int64_t group) = nullptr;
  bool (*maxPool)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_tensor *indices,
                  pipe_ints kernel, pipe_ints strides, pipe_ints pads,
                  pipe_ints dilations) = nullptr;
  bool (*maxPoolGrad)(pipe_rank *r, const pipe_tensor *dy, const pipe_tensor *indices,
                      pipe_tensor *dx) = nullptr;
  bool (*averagePool)(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y, pipe_ints kernel,
                      pipe_ints strides, pipe_ints pads, int32_t countIncludePad) = nullptr;
  bool (*averagePoolGrad)(pipe_rank *r, const pipe_tensor *dy, pipe_tensor *dx, pipe_ints kernel,
                          pipe_ints strides, pipe_ints pads, int32_t countIncludePad) = nullptr;
  bool (*batchNormTrain)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                         const pipe_tensor *bias, pipe_tensor *runningMean,
                         pipe_tensor *runningVar, pipe_tensor *y, pipe_tensor *savedMean,
                         pipe_tensor *savedInvstd, double epsilon, double momentum) = nullptr;
  bool (*batchNormInfer)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                         const pipe_tensor *bias, const pipe_tensor *mean, const pipe_tensor *var,
                         pipe_tensor *y, double epsilon) = nullptr;
  bool (*batchNormGrad)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                        const pipe_tensor *savedMean, const pipe_tensor *savedInvstd,
                        const pipe_tensor *dy, pipe_tensor *dx, pipe_tensor *dscale,
                        pipe_tensor *dbias) = nullptr;
  bool (*layerNorm)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                    const pipe_tensor *bias, pipe_tensor *y, pipe_tensor *mean,
                    pipe_tensor *invstd, int64_t axis, double epsilon) = nullptr;
  bool (*layerNormGrad)(pipe_rank *r, const pipe_tensor *x, const pipe_tensor *scale,
                        const pipe_tensor *mean, const pipe_tensor *invstd, const pipe_tensor *dy,
                        pipe_tensor *dx, pipe_tensor *dscale, pipe_tensor *dbias,
                        int64_t axis) = nullptr;
  /// into += from (f32, same element count): pipe_accumulate_grad.
  bool (*accumulate)(pipe_rank *r, pipe_tensor *into, const pipe_tensor *from) = nullptr;
  /// One optimizer step of `p` (pipe_update, its checks done).
  bool (*update)(pipe_rank *r, Parameter &p) = nullptr;
};

/// The launches the native kernels (NativeKernels.cpp) ask of a device, on
/// its memory: CUDA kernels and cuBLAS on a GPU, the same formulas in host
/// loops on the emulated device. Each may return before the work is done;
/// finish() waits for it and reports a failure.
class PIPE_EXPORT KernelLauncher {
public:
  virtual ~KernelLauncher() = default;
  virtual void fill(float *y, float value, int64_t n) = 0;
  /// y = f(x) (pipe_unary `fn`, in double, rounded once).
  virtual void unary(int32_t fn, const float *x, float *y, int64_t n, double alpha,
                     double beta) = 0;
  /// dx = f'(saved) dy; `saved` null for the functions that keep nothing.
  virtual void unaryGrad(int32_t fn, const float *saved, const float *dy, float *dx, int64_t n,
                         double alpha, double beta) = 0;
  /// y = a (fn) b over `plan` (operands y, a, b): pipe_binary on inputs of
  /// `dtype` (F32, I64 or I32; BOOL for the comparisons and AND, OR), y BOOL
  /// for comparisons and logic; never an integer DIV, MOD or FMOD.
  virtual void binary(int32_t fn, int32_t dtype, const OperandPlan &plan, void *y, const void *a,
                      const void *b) = 0;
  /// y = cond ? x : z over `plan` (operands y, cond, x, z), elements of
  /// `elementSize` bytes.
  virtual void select(const OperandPlan &plan, size_t elementSize, void *y, const uint8_t *cond,
                      const void *x, const void *z) = 0;
  /// y[i, j] = scale * c[i * rowStride + j * columnStride], y m x n row-major.
  virtual void broadcastScaled(const float *c, int64_t rowStride, int64_t columnStride,
                               float scale, float *y, int64_t m, int64_t n) = 0;
  virtual void accumulate(float *into, const float *from, int64_t n) = 0;
  /// torch.optim.SGD (buffer null: no momentum).
  virtual void sgd(float *p, const float *g, float *buffer, int64_t n, float lr, float decay,
                   float momentum, bool firstStep) = 0;
  /// torch.optim.Adam / AdamW.
  virtual void adam(float *p, const float *g, float *m, float *v, int64_t n,
                    const AdamStep &step) = 0;
  /// Softmax (or log-softmax) along the axis of `l`, and its gradient from the
  /// forward's output (kernels/AxisMath.h).
  virtual void softmax(const AxisLayout &l, const float *x, float *y, bool logForm) = 0;
  virtual void softmaxGrad(const AxisLayout &l, const float *y, const float *dy, float *dx,
                           bool logForm) = 0;
  /// Layer norm of rows x width (kernels/AxisMath.h); beta, mean, invstd may be
  /// null. Its gradient: dx (may be null) per row, dscale and dbias (may be
  /// null) per column.
  virtual void layerNorm(int64_t rows, int64_t width, const float *x, const float *gamma,
                         const float *beta, double epsilon, float *y, float *mean,
                         float *invstd) = 0;
  virtual void layerNormGrad(int64_t rows, int64_t width, const float *x, const float *dy,
                             const float *gamma, const float *mean, const float *invstd,
                             float *dx, float *dscale, float *dbias) = 0;
  /// y[o] = reduceOutput(fn, g, o, x) for every output o.
  virtual void reduce(int32_t fn, const ReduceGeometry &g, const float *x, float *y) = 0;
  /// `plan` (operands dst, src) over elements of `elementSize` (1, 2, 4 or 8) bytes.
  virtual void copyStrided(const OperandPlan &plan, void *dst, const void *src,
                           size_t elementSize) = 0;
  /// y = x padded (kernels/Plans.h), elements of `elementSize` bytes; the
  /// constant's bytes are the low `elementSize` bytes of `fill`.
  virtual void pad(const PadGeometry &g, const void *x, void *y, size_t elementSize,
                   uint64_t fill) = 0;
  /// y = x converted from dtype `from` to `to` (pointwise::castElement).
  virtual void cast(int32_t from, int32_t to, const void *x, void *y, int64_t n) = 0;
  /// Keeps the upper (j - i >= k) or lower (j - i <= k) triangle of each
  /// rows x columns matrix of contiguous x, zeroes the rest.
  virtual void trilu(const void *x, void *y, size_t elementSize, int64_t matrices, int64_t rows,
                     int64_t columns, int64_t k, bool upper) = 0;
  /// y[o, j, i] = x[o, index[j], i] (indices already in [0, size)).
  virtual void gather(const GatherGeometry &g, const int64_t *index, const void *x, void *y,
                      size_t elementSize) = 0;
  /// dx = 0, then dx[o, index[j], i] += dy[o, j, i] in order of j (as the CPU).
  virtual void gatherGrad(const GatherGeometry &g, const int64_t *index, const float *dy,
                          float *dx) = 0;
  /// y = dropoutElement(x) for each element, the mask (may be null) beside.
  virtual void dropout(const float *x, float *y, uint8_t *mask, int64_t n, uint64_t stream,
                       double ratio, float scale) = 0;
  /// Cross entropy: each position's log-softmax (logProb may be null) and
  /// label's log-probability into `picked` (positions doubles), then the loss.
  virtual void crossEntropy(const LossGeometry &g, const float *logits, const int64_t *labels,
                            float *logProb, double *picked, float *loss) = 0;
  virtual void crossEntropyGrad(const LossGeometry &g, const float *dloss, const float *logProb,
                                const int64_t *labels, float *dlogits) = 0;
  /// Batch norm (kernels/AxisMath.h): each channel's statistics and y = x a +
  /// b's coefficients (ab, 2 doubles per channel; the running and saved
  /// statistics may be null), or the coefficients from given statistics; then
  /// y element by element. Its gradient: per channel dscale, dbias (may be
  /// null) and dx's terms (5 doubles per channel), then dx (may be null).
  virtual void batchNormTrain(const ChannelLayout &l, const float *x, const float *gamma,
                              const float *beta, double epsilon, double momentum,
                              float *savedMean, float *savedInvstd, float *runningMean,
                              float *runningVar, double *ab, float *y) = 0;
  virtual void batchNormInfer(const ChannelLayout &l, const float *x, const float *gamma,
                              const float *beta, const float *mean, const float *var,
                              double epsilon, double *ab, float *y) = 0;
  virtual void batchNormGrad(const ChannelLayout &l, const float *x, const float *dy,
                             const float *gamma, const float *savedMean, const float *savedInvstd,
                             double *terms, float *dx, float *dscale, float *dbias) = 0;
  /// One group's column matrix (kernels/WindowMath.h) from the group's
  /// channels at x; its adjoint, overwriting the group's channels at x.
  virtual void im2col(const ConvGeometry &g, const float *x, float *col) = 0;
  virtual void col2im(const ConvGeometry &g, const float *col, float *x) = 0;
  /// Pooling of every output element; indices may be null.
  virtual void maxPool(const PoolGeometry &g, const float *x, float *y, int64_t *indices) = 0;
  virtual void averagePool(const PoolGeometry &g, const float *x, float *y,
                           bool countIncludePad) = 0;
  virtual void averagePoolGrad(const PoolGeometry &g, const float *dy, float *dx,
                               bool countIncludePad) = 0;
  /// dx = 0, then dx[index[i]] += dy[i] in order of i within each of `planes`
  /// planes (every index in its own plane, or -1).
  virtual void maxPoolGrad(int64_t planes, int64_t outPlane, int64_t inPlane, const float *dy,
                           const int64_t *index, float *dx) = 0;
  /// The workspace bytes the device's convolution library (cuDNN) needs for
  /// `pass` of `g`, or -1 when it has none or does not take this geometry: the
  /// caller then runs im2col and GEMMs.
  virtual int64_t libraryConvWorkspace(ConvPass pass, const ConvGeometry &g) {
    (void)pass;
    (void)g;
    return -1;
  }
  /// `pass` of `g` by that library (after libraryConvWorkspace gave a size),
  /// overwriting `out`: Forward y from (a = x, b = w), GradInput dx from (a =
  /// dy, b = w), GradWeight dw from (a = x, b = dy).
  virtual void libraryConv(ConvPass pass, const ConvGeometry &g, const float *a, const float *b,
                           float *out, void *workspace, int64_t workspaceBytes) {
    (void)pass, (void)g, (void)a, (void)b, (void)out, (void)workspace, (void)workspaceBytes;
    throw DeviceError("this device has no convolution library");
  }
  /// Whether gemm can run (CUDA: cuBLAS could be loaded; warns once if not).
  virtual bool hasGemm() { return true; }
  virtual void gemm(const ColumnMajorGemm &gemm) = 0;
  /// Waits for the launches; throws DeviceError naming `what` on a failure.
  virtual void finish(const char *what) = 0;
};

class PIPE_EXPORT Device {
public:
  virtual ~Device() = default;
  /// "emulated device (4096 MiB)", "NVIDIA H200 (device 0, 139 GiB)".
  virtual std::string name() const = 0;
  /// Bytes of memory the device has in all.
  virtual int64_t capacity() const = 0;
  /// `bytes` (> 0) of device memory, 256-byte aligned; nullptr when it has no
  /// room. Throws DeviceError on any other failure.
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *block) = 0;
  /// Copies; each returns once the bytes are at their destination.
  virtual void toDevice(void *device, const void *host, size_t bytes) = 0;
  virtual void toHost(void *host, const void *device, size_t bytes) = 0;
  virtual void withinDevice(void *to, const void *from, size_t bytes) = 0;
  virtual void zero(void *device, size_t bytes) = 0;
  /// Cuda or Emulated.
  virtual Backend backend() const = 0;
  /// Copies `bytes` at `from`, memory of `source` (the device of another rank
  /// of this process, or this one), to `to` in this device's memory; returns
  /// once they are there. Ranks that share a process pass messages this way,
  /// device to device. Throws DeviceError when `source` is another backend's.
  virtual void fromPeer(void *to, const Device &source, const void *from, size_t bytes) = 0;
  /// What its native kernels launch on; null: every kernel runs staged.
  virtual KernelLauncher *launcher() { return nullptr; }
};

/// The native kernels (NativeKernels.cpp): the same for every device with a
/// launcher.
PIPE_EXPORT const DeviceKernels &nativeKernelTable();

/// "cpu", "cuda", "emulated".
PIPE_EXPORT const char *backendName(Backend backend);
/// Parses a backend's name; false when unknown.
PIPE_EXPORT bool parseBackend(const std::string &name, Backend &backend);

/// The number of CUDA devices this process sees; 0 with `why` set when there
/// is none or the driver cannot be used (or the library was built without CUDA).
PIPE_EXPORT int cudaDeviceCount(std::string &why);

/// The device of rank `rank` of a run with `ranks` ranks: CUDA device
/// rank % count (so in-process ranks share the GPUs round-robin), or an
/// emulated device of `emulatedBytes`. Throws DeviceError when it cannot be made.
PIPE_EXPORT std::unique_ptr<Device> makeDevice(Backend backend, int rank, int64_t emulatedBytes);

/// An emulated device of `capacityBytes` (tests use it directly).
PIPE_EXPORT std::unique_ptr<Device> makeEmulatedDevice(int64_t capacityBytes);

} // namespace piperun

#endif // PIPE_RUNTIME_DEVICE_H
