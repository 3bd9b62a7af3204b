//===- NNShapeUtils.h - shape arithmetic shared by nn ops -------*- C++ -*-===//
//
// Broadcasting, axis normalisation, convolution/pooling geometry and access to
// constant integer operands: the shape rules of ONNX, written once, used by
// shape inference, verifiers and the cost model.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_IR_NNSHAPEUTILS_H
#define PIPE_DIALECT_NN_IR_NNSHAPEUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"
#include <optional>

namespace pipe::nn {

/// Bounds on static shapes (docs/nn-dialect.md, nn_c2): far beyond any real
/// tensor, small enough that no shape rule's arithmetic overflows int64_t (a
/// dim plus pads, a dilation times a kernel size, a product of dims).
constexpr int64_t kMaxDimSize = int64_t(1) << 40;
constexpr int64_t kMaxElements = int64_t(1) << 48;
/// Bound on window attributes (kernel_shape, strides, dilations, pads).
constexpr int64_t kMaxWindowParameter = int64_t(1) << 31;

/// True when every static dim is at most kMaxDimSize and their product, zero
/// dims counted as 1, is at most kMaxElements.
bool isWithinSizeLimits(llvm::ArrayRef<int64_t> shape);

/// a + b and a * b, or nullopt when the result leaves [-kMaxElements, kMaxElements].
std::optional<int64_t> boundedAdd(int64_t a, int64_t b);
std::optional<int64_t> boundedMul(int64_t a, int64_t b);

/// The ranked tensor type of `v`, or null when it is unranked.
mlir::RankedTensorType getRankedType(mlir::Value v);

/// True when `v` is a ranked tensor with no dynamic dim.
bool hasStaticShape(mlir::Value v);

/// The values of a constant integer tensor operand (through nn.constant or any
/// ConstantLike op), or nullopt when it is not a compile-time constant.
std::optional<llvm::SmallVector<int64_t>> getConstantInts(mlir::Value v);

/// The value of a constant scalar or 1-element tensor operand, integer or
/// float, or nullopt when it is not a compile-time constant.
std::optional<double> getConstantScalar(mlir::Value v);

/// Numpy broadcasting of two shapes; nullopt when they are incompatible.
/// Dynamic dims broadcast to dynamic unless the other side is a known non-1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Maps a possibly negative axis into [0, rank); nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// One axis of an ONNX Slice-13 with its start and end clamped into the dim:
/// the first element taken and how many.
struct SliceAxis {
  int64_t start = 0, length = 0;
};
SliceAxis clampSlice(int64_t dim, int64_t start, int64_t end, int64_t step);

/// Window geometry of a convolution or pooling op on N spatial dims, with
/// defaults filled in and auto_pad resolved against the input's spatial dims.
struct WindowGeometry {
  llvm::SmallVector<int64_t> kernel, strides, dilations, padsBegin, padsEnd;
  bool ceilMode = false;

  /// Output size of spatial dim `i` for an input of size `in`.
  int64_t outputSize(unsigned i, int64_t in) const;
};

/// Builds the geometry; returns a message in `error` and nullopt when the
/// attributes are inconsistent with each other or with the spatial rank.
std::optional<WindowGeometry>
computeWindowGeometry(llvm::ArrayRef<int64_t> spatialIn,
                      llvm::ArrayRef<int64_t> kernel,
                      std::optional<llvm::ArrayRef<int64_t>> strides,
                      std::optional<llvm::ArrayRef<int64_t>> dilations,
                      std::optional<llvm::ArrayRef<int64_t>> pads,
                      llvm::StringRef autoPad, bool ceilMode,
                      std::string &error);

/// Bytes of the im2col columns the CPU runtime's convolution kernels
/// (runtime/src/cpu/Conv.cpp) allocate as scratch, forward and in both
/// gradients: a (C/group x kernel volume) x (output spatial volume) f32 matrix,
/// or one float for a 1x1 kernel with stride 1 and no padding. `weightShape` is
/// (M, C/group, k...), `outputShape` (N, M, out...), `pads` begins then ends.
double convScratchBytes(llvm::ArrayRef<int64_t> weightShape,
                        llvm::ArrayRef<int64_t> outputShape,
                        llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads);

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_IR_NNSHAPEUTILS_H
