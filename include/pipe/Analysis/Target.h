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
void writeTargetJson(const Target &target, llvm::raw_ostream &os);

} // namespace pipe

#endif // PIPE_ANALYSIS_TARGET_H
