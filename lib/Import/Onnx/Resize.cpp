//===- Resize.cpp - ONNX Resize and Upsample as interpolation matmuls -----===//
//
// Every mode of Resize is linear in the input, separably per dim: output
// position o of a dim reads a few input positions with weights that depend
// only on o, the sizes, the scale and the attributes. Each resized dim is
// therefore a matmul with a constant [in, out] matrix (the dim moved last
// and back by transposes), computed here in double precision:
//   - the coordinate transform gives o's position x in the input;
//   - the n input positions nearest x (the lower first among equal
//     distances; n is 2 for nearest and linear, 4 for cubic, more with an
//     antialiasing filter that downscales) get the mode's coefficients;
//   - positions outside the input read its edge, or with exclude_outside
//     drop out and the rest are renormalised;
//   - tf_crop_and_resize gives extrapolation_value outside the input: a
//     constant added to the product.
// The gradient is the matmuls' and transposes'. The cost is the input length
// times the output per row, more than an interpolation kernel's few
// neighbours: right for the few resizes of a segmentation net, wasteful for
// a resize of a long dim.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include "mlir/IR/Matchers.h"

#include <cmath>

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

/// What one Resize (or Upsample) node asks for.
struct ResizeSpec {
  std::string mode = "nearest";
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubicA = -0.75;
  bool excludeOutside = false, antialias = false;
  double extrapolation = 0;
};

/// One resized dim: the [out, in] weights and, for tf_crop_and_resize, which
/// outputs lie inside the input.
struct AxisWeights {
  int64_t in = 0, out = 0;
  SmallVector<double> weights; // out x in, row-major
  SmallVector<bool> inside;
};

double cubic(double x, double a) {
  x = std::fabs(x);
  if (x <= 1)
    return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2)
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

/// The coefficients of the n = coefficients.size() positions nearest x, from
/// the one n/2 - 1 below floor(x) (below x - 1 when x is whole, so that the
/// ratio is in (0, 1]) upward.
SmallVector<double> coefficients(const ResizeSpec &spec, double ratio, double scale) {
  if (spec.mode == "nearest") {
    if (ratio == 1)
      return {0, 1};
    if (spec.nearest == "round_prefer_ceil")
      return {ratio < 0.5 ? 1.0 : 0.0, ratio >= 0.5 ? 1.0 : 0.0};
    if (spec.nearest == "floor")
      return {1, 0};
    if (spec.nearest == "ceil")
      return {0, 1};
    return {ratio <= 0.5 ? 1.0 : 0.0, ratio > 0.5 ? 1.0 : 0.0};
  }
  const bool linear = spec.mode == "linear";
  // The filter's support, stretched by 1 / scale when antialiasing a downscale.
  const double stretch = spec.antialias ? std::min(scale, 1.0) : 1.0;
  const double reach = linear ? 1.0 : 2.0;
  const int64_t start = spec.antialias ? static_cast<int64_t>(std::floor(-reach / stretch)) + 1
                                       : 1 - static_cast<int64_t>(reach);
  SmallVector<double> c;
  double sum = 0;
  for (int64_t i = start; i < 2 - start; ++i) {
    const double x = (i - ratio) * stretch;
    c.push_back(linear ? std::max(0.0, 1 - std::fabs(x)) : cubic(x, spec.cubicA));
    sum += c.back();
  }
  if (spec.antialias)
    for (double &value : c)
      value /= sum;
  return c;
}

/// The position in the input of output position `o` (ONNX's coordinate
/// transformation modes); tf_crop_and_resize may give one outside [0, in - 1].
/// As in ONNX's reference (which made the node tests' outputs), align_corners,
/// tf_crop_and_resize and pytorch_half_pixel see the output length as
/// scale * in, which is not whole when the scale was given.
double inputPosition(const ResizeSpec &spec, int64_t o, int64_t in, double scale,
                     double roiStart, double roiEnd) {
  const std::string &t = spec.transform;
  const double width = scale * in;
  if (t == "align_corners")
    return width == 1 ? 0 : o * double(in - 1) / (width - 1);
  if (t == "asymmetric")
    return o / scale;
  if (t == "tf_half_pixel_for_nn")
    return (o + 0.5) / scale;
  if (t == "pytorch_half_pixel")
    return width == 1 ? -0.5 : (o + 0.5) / scale - 0.5;
  if (t == "tf_crop_and_resize")
    return width == 1 ? 0.5 * (roiStart + roiEnd) * (in - 1)
                      : roiStart * (in - 1) + o * (roiEnd - roiStart) * (in - 1) / (width - 1);
  if (t == "half_pixel_symmetric") {
    const double adjustment = std::floor(width) / width;
    const double offset = in / 2.0 * (1 - adjustment);
    return offset + (o + 0.5) / scale - 0.5;
  }
  return (o + 0.5) / scale - 0.5; // half_pixel
}

AxisWeights axisWeights(const ResizeSpec &spec, int64_t in, int64_t out, double scale,
                        double roiStart, double roiEnd) {
  AxisWeights axis{in, out, SmallVector<double>(in * out, 0.0), SmallVector<bool>(out, true)};
  for (int64_t o = 0; o < out; ++o) {
    const double x = inputPosition(spec, o, in, scale, roiStart, roiEnd);
    if (spec.transform == "tf_crop_and_resize" && (x < 0 || x > in - 1)) {
      axis.inside[o] = false;
      continue;
    }
    const double whole = std::floor(x);
    const double base = whole == x ? x - 1 : whole;
    SmallVector<double> c = coefficients(spec, x - base, scale);
    const int64_t first = static_cast<int64_t>(base) - static_cast<int64_t>(c.size()) / 2 + 1;
    if (spec.excludeOutside) {
      double sum = 0;
      for (size_t k = 0; k < c.size(); ++k) {
        const int64_t index = first + k;
        if (index < 0 || index >= in)
          c[k] = 0;
        sum += c[k];
      }
      if (sum != 0)
        for (double &value : c)
          value /= sum;
    }
    for (size_t k = 0; k < c.size(); ++k) {
      const int64_t index = std::clamp<int64_t>(first + k, 0, in - 1);
      axis.weights[o * in + index] += c[k];
    }
  }
  return axis;
}

bool isIdentity(const AxisWeights &axis) {
  if (axis.in != axis.out)
    return false;
  for (int64_t o = 0; o < axis.out; ++o)
    for (int64_t i = 0; i < axis.in; ++i)
      if (axis.weights[o * axis.in + i] != (o == i ? 1.0 : 0.0))
        return false;
  return true;
}

/// Resizes x (float, static shape) as `spec` says, each dim d of `axes` from
/// its size to outSizes[k] with scale scales[k].
Values resize(NodeImporter &n, const ResizeSpec &spec, llvm::ArrayRef<int64_t> axes,
              llvm::ArrayRef<int64_t> outSizes, llvm::ArrayRef<double> scales,
              llvm::ArrayRef<double> roi) {
  auto type = cast<RankedTensorType>(n.input(0).getType());
  const int64_t rank = type.getRank();
  Composer c(n);
  Value y = n.input(0);
  SmallVector<int64_t> constantShape(rank, 1);
  SmallVector<SmallVector<bool>> insides(rank);
  bool anyOutside = false;
  for (auto [k, d] : llvm::enumerate(axes)) {
    const double start = roi.empty() ? 0 : roi[k], end = roi.empty() ? 1 : roi[axes.size() + k];
    AxisWeights axis = axisWeights(spec, type.getDimSize(d), outSizes[k], scales[k], start, end);
    constantShape[d] = axis.out;
    insides[d] = axis.inside;
    anyOutside |= llvm::is_contained(axis.inside, false);
    if (isIdentity(axis))
      continue;
    // [in, out]: the transpose of the weights, so that y[..., in] @ it is [..., out].
    SmallVector<double> matrix(axis.in * axis.out);
    for (int64_t o = 0; o < axis.out; ++o)
      for (int64_t i = 0; i < axis.in; ++i)
        matrix[i * axis.out + o] = axis.weights[o * axis.in + i];
    Value weights = c.constantOf({axis.in, axis.out}, matrix, type.getElementType());
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < rank; ++i)
      perm.push_back(i == d ? rank - 1 : i == rank - 1 ? d : i);
    if (d != rank - 1)
      y = c.transpose(y, perm);
    y = c.op("nn.matmul", {y, weights});
    if (d != rank - 1)
      y = c.transpose(y, perm);
  }
  if (spec.transform == "tf_crop_and_resize" && anyOutside && spec.extrapolation != 0) {
    // extrapolation_value wherever some resized coordinate is outside.
    int64_t count = 1;
    for (int64_t extent : constantShape)
      count *= extent;
    SmallVector<double> term(count);
    for (int64_t position = 0; position < count; ++position) {
      bool inside = true;
      for (int64_t d = rank - 1, rest = position; d >= 0; --d) {
        const int64_t index = rest % constantShape[d];
        rest /= constantShape[d];
        inside &= insides[d].empty() || insides[d][index];
      }
      term[position] = inside ? 0 : spec.extrapolation;
    }
    Value outside = c.constantOf(constantShape, term, type.getElementType());
    y = c.add(y, outside);
  }
  if (y == n.input(0))
    y = c.unary("nn.identity", y);
  return c.result(y);
}

/// The input's type when it is a static float tensor.
FailureOr<RankedTensorType> resizedInput(NodeImporter &n) {
  auto type = rankedInput(n, 0);
  if (!type || !type.hasStaticShape())
    return n.error() << n.node.op_type() << " needs a static input, got " << n.input(0).getType()
                     << " (bind the symbolic dims with --dim)";
  if (!isa<FloatType>(type.getElementType()))
    return n.error() << n.node.op_type() << " of " << type.getElementType()
                     << " is not supported: its interpolation is a float matmul";
  return type;
}

Values importResize(NodeImporter &n) {
  std::vector<AttrSpec> specs{{"mode", Kind::String}};
  if (n.version >= 11) {
    specs.insert(specs.end(), {{"coordinate_transformation_mode", Kind::String},
                               {"cubic_coeff_a", Kind::Float},
                               {"exclude_outside", Kind::Int},
                               {"extrapolation_value", Kind::Float},
                               {"nearest_mode", Kind::String}});
  }
  if (n.version >= 18)
    specs.insert(specs.end(), {{"antialias", Kind::Int},
                               {"axes", Kind::Ints},
                               {"keep_aspect_ratio_policy", Kind::String}});
  if (failed(n.expectInputs(n.version < 11 ? 2 : 1, n.version < 11 ? 2 : 4)) ||
      failed(n.expectAttributes(specs)))
    return failure();
  auto type = resizedInput(n);
  if (failed(type))
    return failure();
  const int64_t rank = type->getRank();
  ResizeSpec spec;
  spec.mode = n.getString("mode", "nearest");
  if (n.version < 11) {
    // Resize-10 is Upsample-9: asymmetric coordinates, nearest is the floor.
    spec.transform = "asymmetric";
    spec.nearest = "floor";
  } else {
    spec.transform = n.getString("coordinate_transformation_mode", "half_pixel");
    spec.nearest = n.getString("nearest_mode", "round_prefer_floor");
    spec.cubicA = n.getFloat("cubic_coeff_a", -0.75f);
    spec.excludeOutside = n.getInt("exclude_outside", 0);
    spec.extrapolation = n.getFloat("extrapolation_value", 0.0f);
    spec.antialias = n.getInt("antialias", 0);
  }
  if (spec.mode != "nearest" && spec.mode != "linear" && spec.mode != "cubic")
    return n.error() << "Resize mode '" << spec.mode << "' is not nearest, linear or cubic";
  static const char *const transforms[] = {"half_pixel",    "half_pixel_symmetric",
                                           "pytorch_half_pixel", "align_corners",
                                           "asymmetric",    "tf_half_pixel_for_nn",
                                           "tf_crop_and_resize"};
  if (!llvm::is_contained(transforms, llvm::StringRef(spec.transform)))
    return n.error() << "Resize coordinate_transformation_mode '" << spec.transform
                     << "' is not supported";
  static const char *const nearestModes[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                             "ceil"};
  if (!llvm::is_contained(nearestModes, llvm::StringRef(spec.nearest)))
    return n.error() << "Resize nearest_mode '" << spec.nearest << "' is not supported";
  SmallVector<int64_t> axes;
  if (auto given = n.getInts("axes")) {
    for (int64_t axis : *given) {
      auto normalized = normalizedAxis(n, axis, rank);
      if (failed(normalized))
        return failure();
      axes.push_back(*normalized);
    }
  } else {
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  }
  const unsigned scalesAt = n.version < 11 ? 1 : 2;
  auto roi = n.version < 11 ? FailureOr<SmallVector<double>>(SmallVector<double>{})
                            : constantFloats(n, 1, "roi");
  auto scales = constantFloats(n, scalesAt, "scales");
  if (failed(roi) || failed(scales))
    return failure();
  SmallVector<int64_t> sizes;
  if (n.version >= 11 && n.input(3)) {
    auto given = constantInts(n, 3, "sizes");
    if (failed(given))
      return failure();
    sizes = *given;
  }
  if (scales->empty() == sizes.empty())
    return n.error() << "Resize needs exactly one of scales and sizes";
  const size_t count = scales->empty() ? sizes.size() : scales->size();
  if (count != axes.size())
    return n.error() << "Resize has " << count << " scales or sizes for " << axes.size()
                     << " dims";
  if (spec.transform == "tf_crop_and_resize" && roi->size() != 2 * axes.size())
    return n.error() << "Resize tf_crop_and_resize needs a roi of " << 2 * axes.size()
                     << " values, got " << roi->size();
  SmallVector<int64_t> outSizes;
  SmallVector<double> factors;
  if (!sizes.empty()) {
    const std::string policy = n.getString("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      return n.error() << "Resize keep_aspect_ratio_policy '" << policy << "' is not supported";
    double common = policy == "not_larger" ? INFINITY : 0;
    for (auto [k, d] : llvm::enumerate(axes)) {
      const double ratio = double(sizes[k]) / type->getDimSize(d);
      common = policy == "not_larger" ? std::min(common, ratio) : std::max(common, ratio);
    }
    for (auto [k, d] : llvm::enumerate(axes)) {
      const int64_t in = type->getDimSize(d);
      if (policy == "stretch") {
        outSizes.push_back(sizes[k]);
        factors.push_back(double(sizes[k]) / in);
      } else {
        outSizes.push_back(static_cast<int64_t>(std::floor(common * in + 0.5)));
        factors.push_back(common);
      }
    }
  } else {
    for (auto [k, d] : llvm::enumerate(axes)) {
      outSizes.push_back(static_cast<int64_t>(std::floor((*scales)[k] * type->getDimSize(d))));
      factors.push_back((*scales)[k]);
    }
  }
  for (auto [k, d] : llvm::enumerate(axes))
    if (outSizes[k] < 1 || factors[k] <= 0)
      return n.error() << "Resize of dim " << d << " (" << type->getDimSize(d) << ") to "
                       << outSizes[k] << " with scale " << factors[k]
                       << ": the output must have a positive size";
  return resize(n, spec, axes, outSizes, factors, *roi);
}

/// Upsample (deprecated since opset 10): scales as an attribute (7) or an
/// input (9); nearest (the floor of o / scale) or linear, asymmetric.
Values importUpsample(NodeImporter &n) {
  const bool attribute = n.version < 9;
  std::vector<AttrSpec> specs{{"mode", Kind::String}};
  if (attribute)
    specs.push_back({"scales", Kind::Floats, true});
  if (failed(n.expectInputs(attribute ? 1 : 2, attribute ? 1 : 2)) ||
      failed(n.expectAttributes(specs)))
    return failure();
  auto type = resizedInput(n);
  if (failed(type))
    return failure();
  SmallVector<double> scales;
  if (attribute) {
    const onnx::AttributeProto *attr = n.attribute("scales");
    scales.assign(attr->floats().begin(), attr->floats().end());
  } else {
    auto given = constantFloats(n, 1, "scales");
    if (failed(given))
      return failure();
    scales = *given;
  }
  const int64_t rank = type->getRank();
  if (static_cast<int64_t>(scales.size()) != rank)
    return n.error() << "Upsample has " << scales.size() << " scales for a rank-" << rank
                     << " input";
  ResizeSpec spec;
  spec.mode = n.getString("mode", "nearest");
  if (spec.mode == "bilinear")
    spec.mode = "linear";
  if (spec.mode != "nearest" && spec.mode != "linear")
    return n.error() << "Upsample mode '" << spec.mode << "' is not nearest or linear";
  spec.transform = "asymmetric";
  spec.nearest = "floor";
  SmallVector<int64_t> axes, outSizes;
  for (int64_t d = 0; d < rank; ++d) {
    if (scales[d] < 1)
      return n.error() << "Upsample scale " << scales[d] << " of dim " << d
                       << " is below 1";
    axes.push_back(d);
    outSizes.push_back(static_cast<int64_t>(std::floor(scales[d] * type->getDimSize(d))));
  }
  return resize(n, spec, axes, outSizes, scales, {});
}
} // namespace

void pipe::onnx_import::addResize(const AddOp &add) {
  add("Resize", {10, 11, 13, 18, 19}, 10, importResize);
  add("Upsample", {1, 7, 9, 10}, 7, importUpsample);
}
