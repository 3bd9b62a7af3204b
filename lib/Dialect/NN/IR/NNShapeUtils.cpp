//===- NNShapeUtils.cpp - shape arithmetic shared by nn ops ---------------===//
//
// ONNX's shape rules: broadcasting (onnx/docs/Broadcasting.md), axis
// normalisation, and the output size of a convolution or pooling window
// (onnx/docs/Operators.md, Conv and MaxPool: auto_pad and ceil_mode).
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

#include <algorithm>

using namespace mlir;

namespace pipe::nn {

RankedTensorType getRankedType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

bool hasStaticShape(Value v) {
  auto type = getRankedType(v);
  return type && type.hasStaticShape();
}

std::optional<double> getConstantScalar(Value v) {
  if (!v)
    return std::nullopt;
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto elements = dyn_cast<DenseElementsAttr>(attr);
  if (!elements || elements.getNumElements() != 1)
    return std::nullopt;
  if (isa<FloatType>(elements.getElementType()))
    return (*elements.getValues<APFloat>().begin()).convertToDouble();
  return static_cast<double>((*elements.getValues<APInt>().begin()).getSExtValue());
}

std::optional<llvm::SmallVector<int64_t>> getConstantInts(Value v) {
  if (!v)
    return std::nullopt;
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  auto elements = dyn_cast<DenseIntElementsAttr>(attr);
  if (!elements)
    return std::nullopt;
  llvm::SmallVector<int64_t> values;
  values.reserve(elements.getNumElements());
  for (const APInt &value : elements.getValues<APInt>())
    values.push_back(elements.getElementType().isUnsignedInteger()
                         ? static_cast<int64_t>(value.getZExtValue())
                         : value.getSExtValue());
  return values;
}

std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db) {
      result[i] = da;
    } else if (da == 1) {
      result[i] = db;
    } else if (db == 1) {
      result[i] = da;
    } else if (ShapedType::isDynamic(da)) {
      result[i] = db;
    } else if (ShapedType::isDynamic(db)) {
      result[i] = da;
    } else {
      return std::nullopt;
    }
  }
  return result;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

bool isWithinSizeLimits(llvm::ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (ShapedType::isDynamic(d) || d == 0)
      continue;
    if (d < 0 || d > kMaxDimSize)
      return false;
    auto product = boundedMul(count, d);
    if (!product)
      return false;
    count = *product;
  }
  return true;
}

std::optional<int64_t> boundedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r) || r > kMaxElements || r < -kMaxElements)
    return std::nullopt;
  return r;
}

std::optional<int64_t> boundedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r) || r > kMaxElements || r < -kMaxElements)
    return std::nullopt;
  return r;
}

static int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t WindowGeometry::outputSize(unsigned i, int64_t in) const {
  int64_t effectiveKernel = dilations[i] * (kernel[i] - 1) + 1;
  int64_t span = in + padsBegin[i] + padsEnd[i] - effectiveKernel;
  if (span < 0)
    return 0;
  int64_t out = (ceilMode ? ceilDiv(span, strides[i]) : span / strides[i]) + 1;
  // With ceil_mode the last window must start inside the input or left pad.
  if (ceilMode && (out - 1) * strides[i] >= in + padsBegin[i])
    --out;
  return out;
}

std::optional<WindowGeometry>
computeWindowGeometry(llvm::ArrayRef<int64_t> spatialIn,
                      llvm::ArrayRef<int64_t> kernel,
                      std::optional<llvm::ArrayRef<int64_t>> strides,
                      std::optional<llvm::ArrayRef<int64_t>> dilations,
                      std::optional<llvm::ArrayRef<int64_t>> pads,
                      llvm::StringRef autoPad, bool ceilMode,
                      std::string &error) {
  size_t n = spatialIn.size();
  WindowGeometry g;
  g.ceilMode = ceilMode;
  auto fill = [&](std::optional<llvm::ArrayRef<int64_t>> given, size_t count,
                  int64_t dflt, llvm::SmallVector<int64_t> &out,
                  const char *name) -> bool {
    if (given && !given->empty()) {
      if (given->size() != count) {
        error = std::string(name) + " has " + std::to_string(given->size()) +
                " entries, expected " + std::to_string(count);
        return false;
      }
      out.assign(given->begin(), given->end());
    } else {
      out.assign(count, dflt);
    }
    return true;
  };
  if (kernel.size() != n) {
    error = "kernel_shape has " + std::to_string(kernel.size()) +
            " entries for " + std::to_string(n) + " spatial dims";
    return std::nullopt;
  }
  g.kernel.assign(kernel.begin(), kernel.end());
  llvm::SmallVector<int64_t> allPads;
  if (!fill(strides, n, 1, g.strides, "strides") ||
      !fill(dilations, n, 1, g.dilations, "dilations") ||
      !fill(pads, 2 * n, 0, allPads, "pads"))
    return std::nullopt;
  for (size_t i = 0; i < n; ++i) {
    if (g.kernel[i] <= 0 || g.strides[i] <= 0 || g.dilations[i] <= 0) {
      error = "kernel, strides and dilations must be positive";
      return std::nullopt;
    }
  }
  for (int64_t pad : allPads) {
    if (pad < 0) {
      error = "pads must be non-negative, got " + std::to_string(pad);
      return std::nullopt;
    }
  }
  for (const auto *values : {&g.kernel, &g.strides, &g.dilations, &allPads})
    for (int64_t v : *values)
      if (v > kMaxWindowParameter) {
        error = "kernel, strides, dilations and pads must be at most " +
                std::to_string(kMaxWindowParameter) + ", got " + std::to_string(v);
        return std::nullopt;
      }
  g.padsBegin.assign(allPads.begin(), allPads.begin() + n);
  g.padsEnd.assign(allPads.begin() + n, allPads.end());
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (size_t i = 0; i < n; ++i) {
      if (ShapedType::isDynamic(spatialIn[i]))
        continue;
      int64_t out = ceilDiv(spatialIn[i], g.strides[i]);
      int64_t effectiveKernel = g.dilations[i] * (g.kernel[i] - 1) + 1;
      int64_t total = std::max<int64_t>(
          0, (out - 1) * g.strides[i] + effectiveKernel - spatialIn[i]);
      int64_t small = total / 2, large = total - small;
      g.padsBegin[i] = autoPad == "SAME_UPPER" ? small : large;
      g.padsEnd[i] = autoPad == "SAME_UPPER" ? large : small;
    }
  } else if (autoPad == "VALID") {
    std::fill(g.padsBegin.begin(), g.padsBegin.end(), 0);
    std::fill(g.padsEnd.begin(), g.padsEnd.end(), 0);
  } else if (autoPad != "NOTSET" && !autoPad.empty()) {
    error = "unknown auto_pad '" + autoPad.str() + "'";
    return std::nullopt;
  }
  return g;
}

} // namespace pipe::nn

pipe::nn::SliceAxis pipe::nn::clampSlice(int64_t dim, int64_t start, int64_t end, int64_t step) {
  // 128-bit arithmetic so that extreme steps and bounds cannot overflow.
  auto clamp = [&](int64_t v, int64_t lo, int64_t hi) {
    __int128 w = v < 0 ? static_cast<__int128>(v) + dim : v;
    return static_cast<int64_t>(std::min<__int128>(std::max<__int128>(w, lo), hi));
  };
  __int128 s, e, stride = step;
  if (step > 0) {
    s = clamp(start, 0, dim);
    e = clamp(end, 0, dim);
    return {static_cast<int64_t>(s), e > s ? static_cast<int64_t>((e - s - 1) / stride + 1) : 0};
  }
  s = clamp(start, 0, dim - 1);
  e = clamp(end, -1, dim - 1);
  return {static_cast<int64_t>(s), s > e ? static_cast<int64_t>((s - e - 1) / -stride + 1) : 0};
}

double pipe::nn::convScratchBytes(llvm::ArrayRef<int64_t> weightShape,
                                  llvm::ArrayRef<int64_t> outputShape,
                                  llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> pads) {
  bool pointwise = llvm::all_of(weightShape.drop_front(2), [](int64_t k) { return k == 1; }) &&
                   llvm::all_of(strides, [](int64_t s) { return s == 1; }) &&
                   llvm::all_of(pads, [](int64_t p) { return p == 0; });
  if (pointwise)
    return 4;
  double rows = static_cast<double>(weightShape[1]);
  for (int64_t k : weightShape.drop_front(2))
    rows *= static_cast<double>(k);
  double outVolume = 1;
  for (int64_t d : outputShape.drop_front(2))
    outVolume *= static_cast<double>(d);
  return 4 * rows * outVolume;
}
