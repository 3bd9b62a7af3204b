//===- Target.h - descriptions of the GPUs a plan is made for ---*- C++ -*-===//
//
// A target is what the cost model needs to know about one GPU and its links:
// dense peak FLOP/s per dtype, memory bandwidth and capacity, intra- and
// inter-node links, the per-kernel launch overhead and the efficiency factors
// per kernel class. Built-in targets carry datasheet values (docs/cost-model.md);
// other hardware is described by a JSON file in the same format.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_ANALYSIS_TARGET_H
#define PIPE_ANALYSIS_TARGET_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace pipe {

/// The arithmetic a model is trained in. `tf32` stores fp32 and runs GEMMs and
/// convolutions on TF32 tensor cores; `fp8` runs GEMMs in fp8 and stores bf16.
enum class ComputeDtype { FP32, TF32, FP16, BF16, FP8 };

/// Parses "fp32", "tf32", "fp16", "bf16", "fp8".
std::optional<ComputeDtype> parseComputeDtype(llvm::StringRef text);
llvm::StringRef toString(ComputeDtype dtype);
/// Bytes of one stored floating-point element at `dtype` (4, 4, 2, 2, 2).
unsigned storageBytes(ComputeDtype dtype);

/// Classes of kernels that share an efficiency factor.
enum class KernelClass {
  Free,          ///< no kernel: views, constants, parameters
  Gemm,          ///< matmul, gemm
  Conv,          ///< convolution
  Elementwise,   ///< unary/binary element-wise ops, casts, dropout
  Normalization, ///< batch/layer norm, softmax
  Reduction,     ///< reduce_* ops
  Pooling,       ///< max/average/global pooling
  DataMovement,  ///< transpose, concat, split, slice, gather, pad, ...
};
constexpr unsigned kNumKernelClasses = 8;
llvm::StringRef toString(KernelClass kind);
std::optional<KernelClass> parseKernelClass(llvm::StringRef text);

/// Fraction of the peak a kernel class reaches: time = max(flops / (peak *
/// compute), bytes / (bandwidth * memory)).
struct Efficiency {
  double compute = 1.0;
  double memory = 1.0;
};

/// The families of kernels a calibration fits separately: the GEMM and
/// convolution algorithms libraries choose between, and the memory-bound
/// classes. `None` stands for "the family of the op's kernel class".
enum class KernelFamily {
  None,
  Gemm,          ///< matmul, gemm
  ConvPointwise, ///< 1x1 convolutions (a GEMM over the pixels)
  ConvWinograd,  ///< 2-D 3x3, stride 1, dilation 1, one group: Winograd's domain
  ConvGeneral,   ///< every other convolution (implicit GEMM)
  Elementwise,
  Normalization,
  Reduction,
  Pooling,
  DataMovement,
};
constexpr unsigned kNumKernelFamilies = 10;
/// "gemm", "conv_1x1", "conv_3x3s1", "conv_other", "elementwise", ... (the
/// keys of the calibration JSON).
llvm::StringRef toString(KernelFamily family);
std::optional<KernelFamily> parseKernelFamily(llvm::StringRef text);
/// The family of a kernel class with no finer choice (Conv: ConvGeneral).
KernelFamily familyOf(KernelClass kind);
/// True for the families timed by their FLOPs (GEMMs and convolutions).
bool isComputeFamily(KernelFamily family);

/// The passes a kernel model times: an op's forward, its whole backward (the
/// memory families), or, for GEMMs and convolutions, the two kernels of the
/// backward apart: the data gradient and the weight gradient.
enum class KernelPass { Forward, Backward, BackwardData, BackwardWeight };
constexpr unsigned kNumKernelPasses = 4;
/// "forward", "backward", "backward_data", "backward_weight".
llvm::StringRef toString(KernelPass pass);

/// A fitted time model of one family in one pass.
/// Compute families (GEMMs, convolutions), per kernel of the pass:
///   time = kernels x overhead + FLOPs / (peak x exp(c . f))
///   f = [1, ln r, ln a, ln b, ln stride, (ln r)^2/10, (ln a)^2/10, (ln b)^2/10]
/// where the kernel computes an a x b output reducing over r: with the op's
/// GemmShape (m, n, k), the forward is (r, a, b) = (k, m, n), the data
/// gradient (n, m, k) and the weight gradient (m, n, k). Each dimension is
/// clamped into [shapeMin, shapeMax] (the range the fit saw: no extrapolation
/// beyond it), the exponent into [ln 1e-3, ln 10].
/// Memory families:
///   time = kernels x overhead + bytes / (bandwidth x e)
///          + FLOPs / (fp32 peak x flopEfficiency)   (the last term when > 0)
///   e = memoryEfficiency x (bytes / 1e6)^memorySlope, clamped into [1e-3, 10]
struct KernelModel {
  bool fitted = false;
  double overheadSeconds = 0;
  std::array<double, 8> logEfficiency = {0, 0, 0, 0, 0, 0, 0, 0};
  std::array<double, 4> shapeMin = {1, 1, 1, 1}; ///< r, a, b, stride
  std::array<double, 4> shapeMax = {1e12, 1e12, 1e12, 1e12};
  double memoryEfficiency = 1;
  double flopEfficiency = 0; ///< 0: no FLOP term
  double memorySlope = 0;
  unsigned samples = 0;      ///< measurements it was fitted on (documentation)
};

/// Kernel models fitted to measured times (scripts/cost-fit-report.py,
/// docs/cost-model.md "Calibration"): they replace the roofline for the
/// families they cover when the plan's dtype is the one measured.
struct Calibration {
  std::string source; ///< what was measured, when, and the fitting command
  ComputeDtype dtype = ComputeDtype::FP32;
  /// False when the measured framework ran every op as its own kernel (eager
  /// PyTorch, as in the PipeDream profiles): element-wise ops are then not
  /// fused into their producers.
  bool fusesElementwise = true;
  /// [family][pass]
  std::array<std::array<KernelModel, kNumKernelPasses>, kNumKernelFamilies> models{};
  const KernelModel &model(KernelFamily family, KernelPass pass) const {
    return models[static_cast<unsigned>(family)][static_cast<unsigned>(pass)];
  }
};

/// A point-to-point link: a transfer of c bytes costs latency + c / bandwidth.
struct Link {
  std::string kind;                  ///< e.g. "NVLink 4", "PCIe 5.0 x16"
  double bandwidthBytesPerSecond = 0; ///< per direction
  double latencySeconds = 0;
};

struct Target {
  std::string name;        ///< the --target key, e.g. "h100"
  std::string description; ///< e.g. "NVIDIA H100 SXM5 80GB"
  std::string source;      ///< the datasheet the figures come from
  /// Dense (no sparsity) peak FLOP/s: tensor-core rates for GEMM/conv classes
  /// per ComputeDtype (0 = not supported), and the CUDA-core fp32 rate used for
  /// every other class.
  double gemmPeakFlops[5] = {0, 0, 0, 0, 0}; ///< indexed by ComputeDtype
  double vectorPeakFlops = 0;
  double memoryBandwidthBytesPerSecond = 0;
  double memoryBytes = 0;
  int gpusPerNode = 8;
  Link intraNode, interNode;
  double launchOverheadSeconds = 4e-6;
  std::array<Efficiency, kNumKernelClasses> efficiency = defaultEfficiencies();
  std::optional<Calibration> calibration;

  /// Peak FLOP/s of kernel class `kind` at `dtype`; 0 when unsupported.
  double peakFlops(KernelClass kind, ComputeDtype dtype) const;
  const Efficiency &efficiencyOf(KernelClass kind) const {
    return efficiency[static_cast<unsigned>(kind)];
  }
  static std::array<Efficiency, kNumKernelClasses> defaultEfficiencies();
};

/// The built-in targets, in table order.
llvm::ArrayRef<Target> builtinTargets();

/// A built-in target by name (case-insensitive, '-'/'_' ignored: "H100-SXM" ==
/// "h100sxm"), or a JSON target file when `nameOrFile` names an existing file.
/// The error names the known targets.
llvm::Expected<Target> lookupTarget(llvm::StringRef nameOrFile);

/// Reads / writes the JSON target format (docs/cost-model.md). Fields absent
/// from the document keep the values of `base` (defaults when null), so a user
/// file may start from a built-in with `"base": "h100"`.
llvm::Expected<Target> parseTargetJson(llvm::StringRef text);
/// Reads the "calibration" object of a target file (docs/cost-model.md).
llvm::Expected<Calibration> parseCalibrationJson(llvm::StringRef text);
void writeTargetJson(const Target &target, llvm::raw_ostream &os);

} // namespace pipe

#endif // PIPE_ANALYSIS_TARGET_H
