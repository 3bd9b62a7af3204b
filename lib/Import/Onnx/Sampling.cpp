//===- Sampling.cpp - ONNX GridSample, RoiAlign and MaxUnpool as nn ops ---===//
//
// Ops that read or write a tensor at positions computed from data. The
// input is laid out as a table of rows [N * spatial, C]; each tap of an
// interpolation is an nn.gather of the rows at a computed i64 index, times
// its weight, with a mask where the tap falls outside. The gradient in the
// input is the gathers' (a scatter-add); the gradient in the positions
// flows through the weights (the fractional parts), as PyTorch's does.
// MaxUnpool writes its values at their indices with nn.gather_grad, a
// scatter-add into zeros, whose gradient is a gather.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include "mlir/IR/Matchers.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

/// x laid out as rows [N * prod(spatial), C] (x is [N, C, spatial...]).
Value rowTable(Composer &c, Value x) {
  auto type = cast<RankedTensorType>(x.getType());
  const int64_t rank = type.getRank();
  SmallVector<int64_t> perm{0};
  for (int64_t d = 2; d < rank; ++d)
    perm.push_back(d);
  perm.push_back(1);
  return c.reshape(c.transpose(x, perm), {type.getNumElements() / type.getDimSize(1),
                                          type.getDimSize(1)});
}

/// One tap along one spatial dim: a float position and its weight (null: 1).
struct Tap {
  Value position, weight;
};

/// x clamped to [0, size - 1].
Value clampTo(Composer &c, Value x, int64_t size) {
  return c.op("nn.clip", {x, c.scalar(0, x), c.scalar(size - 1, x)});
}

/// 1 where the position lies in [0, size - 1], else 0 (of x's type).
Value insideMask(Composer &c, Value x, int64_t size) {
  Value low = c.op("nn.greater_or_equal", {x, c.scalar(0, x)});
  Value high = c.op("nn.less_or_equal", {x, c.scalar(size - 1, x)});
  return c.cast(c.op("nn.and", {low, high}), getElementTypeOrSelf(x.getType()));
}

/// sum over the combinations of one tap per dim of weight * table[index]:
/// `taps[d]` are dim d's taps, `sizes[d]` its extent; `batch` is the i64
/// offset of each position's first row (n * prod(sizes)), broadcasting
/// against the positions. Each tap's weight includes its inside mask.
/// Returns [positions..., C].
Value gatherTaps(Composer &c, Value table, Value batch, llvm::ArrayRef<SmallVector<Tap>> taps,
                 llvm::ArrayRef<int64_t> sizes) {
  Type i64 = c.n.builder.getI64Type();
  SmallVector<int64_t> strides(sizes.size(), 1);
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * sizes[d + 1];
  // Per dim and tap: the clamped row offset (i64) and the masked weight.
  SmallVector<SmallVector<std::pair<Value, Value>>> prepared(sizes.size());
  for (auto [d, dimTaps] : llvm::enumerate(taps)) {
    for (const Tap &tap : dimTaps) {
      Value offset = c.cast(clampTo(c, tap.position, sizes[d]), i64);
      if (strides[d] != 1)
        offset = c.mul(offset, c.n.constantI64({strides[d]}, true));
      Value mask = insideMask(c, tap.position, sizes[d]);
      prepared[d].push_back({offset, tap.weight ? c.mul(tap.weight, mask) : mask});
    }
  }
  Value sum;
  SmallVector<size_t> choice(sizes.size(), 0);
  while (true) {
    Value index = batch, weight;
    for (size_t d = 0; d < sizes.size(); ++d) {
      auto [offset, w] = prepared[d][choice[d]];
      index = c.add(index, offset);
      weight = weight ? c.mul(weight, w) : w;
    }
    Value rows = c.op("nn.gather", {table, index},
                      {c.n.builder.getNamedAttr("axis", c.n.builder.getI64IntegerAttr(0))});
    auto weightType = cast<RankedTensorType>(weight.getType());
    Value spread = c.op("nn.unsqueeze", {weight, c.n.constantI64({weightType.getRank()})});
    Value term = c.mul(rows, spread);
    sum = sum ? c.add(sum, term) : term;
    size_t d = sizes.size();
    while (d > 0 && ++choice[d - 1] == prepared[d - 1].size())
      choice[--d] = 0;
    if (d == 0)
      break;
  }
  return sum;
}

/// The i64 constant n * rowsPerBatch of shape [N, 1, ..., 1] (rank `rank`).
Value batchOffsets(Composer &c, int64_t batch, int64_t rowsPerBatch, int64_t rank) {
  SmallVector<int64_t> shape(rank, 1), values;
  shape[0] = batch;
  for (int64_t b = 0; b < batch; ++b)
    values.push_back(b * rowsPerBatch);
  return c.constant(shape, values);
}

/// The cubic convolution weights (coefficient a) of the four taps around a
/// position whose fractional part is t: at t + 1, t, 1 - t and 2 - t.
SmallVector<Value> cubicWeights(Composer &c, Value t, double a) {
  Value one = c.scalar(1, t), two = c.scalar(2, t);
  // |x| <= 1: ((a + 2) x - (a + 3)) x^2 + 1;  1 < |x| < 2: ((a x - 5a) x + 8a) x - 4a.
  auto near = [&](Value x) {
    Value inner = c.sub(c.mul(c.scalar(a + 2, t), x), c.scalar(a + 3, t));
    return c.add(c.mul(inner, c.mul(x, x)), one);
  };
  auto far = [&](Value x) {
    Value inner = c.sub(c.mul(c.scalar(a, t), x), c.scalar(5 * a, t));
    Value middle = c.add(c.mul(inner, x), c.scalar(8 * a, t));
    return c.sub(c.mul(middle, x), c.scalar(4 * a, t));
  };
  return {far(c.add(t, one)), near(t), near(c.sub(one, t)), far(c.sub(two, t))};
}

//===----------------------------------------------------------------------===//
// GridSample
//===----------------------------------------------------------------------===//

enum class Padding { Zeros, Border, Reflection };

/// x reflected into [low, high] (given doubled: twiceLow, twiceHigh) as
/// often as it takes, as PyTorch's grid sampler reflects.
Value reflect(Composer &c, Value x, int64_t twiceLow, int64_t twiceHigh) {
  if (twiceLow == twiceHigh)
    return c.mul(x, c.scalar(0, x));
  const double low = twiceLow / 2.0, span = (twiceHigh - twiceLow) / 2.0;
  Value distance = c.unary("nn.abs", c.sub(x, c.scalar(low, x)));
  Value flips = c.unary("nn.floor", c.div(distance, c.scalar(span, x)));
  Value extra = c.sub(distance, c.mul(flips, c.scalar(span, x)));
  Value halfFlips = c.unary("nn.floor", c.div(flips, c.scalar(2, x)));
  Value even = c.op("nn.equal", {flips, c.add(halfFlips, halfFlips)});
  Value forward = c.add(extra, c.scalar(low, x));
  Value backward = c.sub(c.scalar(span + low, x), extra);
  return c.op("nn.where", {even, forward, backward});
}

/// A position under the padding mode: clamped (border), reflected then
/// clamped (reflection), or as it is (zeros: outside taps are masked).
Value padPosition(Composer &c, Value x, int64_t size, Padding padding, bool alignCorners) {
  if (padding == Padding::Zeros)
    return x;
  if (padding == Padding::Reflection)
    x = alignCorners ? reflect(c, x, 0, 2 * (size - 1)) : reflect(c, x, -1, 2 * size - 1);
  return clampTo(c, x, size);
}

Values importGridSample(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) ||
      failed(n.expectAttributes({{"align_corners", Kind::Int},
                                 {"mode", Kind::String},
                                 {"padding_mode", Kind::String}})))
    return failure();
  auto xType = rankedInput(n, 0), gridType = rankedInput(n, 1);
  if (!xType || !gridType || !xType.hasStaticShape() || !gridType.hasStaticShape() ||
      !isa<FloatType>(xType.getElementType()) || !isa<FloatType>(gridType.getElementType()))
    return n.error() << "GridSample needs static float inputs, got " << n.input(0).getType()
                     << " and " << n.input(1).getType();
  const int64_t spatial = xType.getRank() - 2;
  if (spatial < 1 || gridType.getRank() != spatial + 2 ||
      gridType.getDimSize(0) != xType.getDimSize(0) ||
      gridType.getShape().back() != spatial)
    return n.error() << "GridSample needs X [N, C, D1..Dk] and a grid [N, O1..Ok, k], got "
                     << xType << " and " << gridType;
  if (n.version < 20 && spatial != 2)
    return n.error() << "GridSample-" << n.version << " samples 2-D inputs, got " << xType;
  std::string mode = n.getString("mode", n.version < 20 ? "bilinear" : "linear");
  if (mode == "linear")
    mode = "bilinear";
  if (mode == "cubic")
    mode = "bicubic";
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    return n.error() << "GridSample mode '" << mode << "' is not linear, nearest or cubic";
  const std::string paddingName = n.getString("padding_mode", "zeros");
  Padding padding = Padding::Zeros;
  if (paddingName == "border")
    padding = Padding::Border;
  else if (paddingName == "reflection")
    padding = Padding::Reflection;
  else if (paddingName != "zeros")
    return n.error() << "GridSample padding_mode '" << paddingName
                     << "' is not zeros, border or reflection";
  const bool alignCorners = n.getInt("align_corners", 0);
  const int64_t batch = xType.getDimSize(0);
  SmallVector<int64_t> sizes(xType.getShape().drop_front(2));
  SmallVector<int64_t> positions(gridType.getShape().drop_back()); // [N, O1..Ok]
  int64_t rowsPerBatch = 1;
  for (int64_t size : sizes)
    rowsPerBatch *= size;

  Composer c(n);
  Value table = rowTable(c, n.input(0));
  SmallVector<SmallVector<Tap>> taps(spatial);
  for (int64_t d = 0; d < spatial; ++d) {
    const int64_t size = sizes[d];
    // The grid's last dim lists the coordinates innermost dim first (x, y, ...).
    Value g = c.reshape(c.slice(n.input(1), spatial + 1, spatial - 1 - d, spatial - d), positions);
    // [-1, 1] to pixel positions: the corner pixels' centres, or their outer edges.
    Value x = alignCorners
                  ? c.mul(c.add(g, c.scalar(1, g)), c.scalar((size - 1) / 2.0, g))
                  : c.div(c.sub(c.mul(c.add(g, c.scalar(1, g)), c.scalar(size, g)),
                                c.scalar(1, g)),
                          c.scalar(2, g));
    if (mode == "nearest") {
      taps[d].push_back({c.unary("nn.round", padPosition(c, x, size, padding, alignCorners)), {}});
      continue;
    }
    if (mode == "bilinear") {
      x = padPosition(c, x, size, padding, alignCorners);
      Value low = c.unary("nn.floor", x);
      Value t = c.sub(x, low);
      taps[d].push_back({low, c.sub(c.scalar(1, t), t)});
      taps[d].push_back({c.add(low, c.scalar(1, low)), t});
      continue;
    }
    // Bicubic: four taps around the unpadded position, each padded on its own.
    Value low = c.unary("nn.floor", x);
    SmallVector<Value> weights = cubicWeights(c, c.sub(x, low), -0.75);
    for (int64_t k = 0; k < 4; ++k) {
      Value position = c.add(low, c.scalar(k - 1, low));
      taps[d].push_back({padPosition(c, position, size, padding, alignCorners), weights[k]});
    }
  }
  Value batchRows = batchOffsets(c, batch, rowsPerBatch, spatial + 1);
  Value sampled = gatherTaps(c, table, batchRows, taps, sizes); // [N, O..., C]
  SmallVector<int64_t> perm{0, spatial + 1};
  for (int64_t d = 1; d <= spatial; ++d)
    perm.push_back(d);
  return c.result(c.transpose(sampled, perm));
}

//===----------------------------------------------------------------------===//
// RoiAlign
//===----------------------------------------------------------------------===//

/// One sampled axis of RoiAlign: the taps (low and high position, their
/// weights, zero where the sample lies beyond [-1, size]).
SmallVector<Tap> roiAlignTaps(Composer &c, Value position, int64_t size) {
  Value outside = c.op("nn.or", {c.op("nn.less", {position, c.scalar(-1, position)}),
                                 c.op("nn.greater", {position, c.scalar(size, position)})});
  Value inside = c.cast(c.op("nn.not", {outside}), getElementTypeOrSelf(position.getType()));
  Value y = c.op("nn.max", {position, c.scalar(0, position)});
  Value floor = c.unary("nn.floor", y);
  Value last = c.scalar(size - 1, y);
  Value atEnd = c.op("nn.greater_or_equal", {floor, last});
  Value low = c.op("nn.where", {atEnd, last, floor});
  Value high = c.op("nn.where", {atEnd, last, c.add(floor, c.scalar(1, floor))});
  Value fraction = c.sub(c.op("nn.where", {atEnd, low, y}), low);
  Value lowWeight = c.mul(c.sub(c.scalar(1, fraction), fraction), inside);
  return {{low, lowWeight}, {high, c.mul(fraction, inside)}};
}

Values importRoiAlign(NodeImporter &n) {
  std::vector<AttrSpec> specs{{"mode", Kind::String},           {"output_height", Kind::Int},
                              {"output_width", Kind::Int},      {"sampling_ratio", Kind::Int},
                              {"spatial_scale", Kind::Float}};
  if (n.version >= 16)
    specs.push_back({"coordinate_transformation_mode", Kind::String});
  if (failed(n.expectInputs(3, 3)) || failed(n.expectAttributes(specs)))
    return failure();
  auto xType = rankedInput(n, 0), roisType = rankedInput(n, 1), batchType = rankedInput(n, 2);
  if (!xType || !roisType || !batchType || !xType.hasStaticShape() ||
      !roisType.hasStaticShape() || !batchType.hasStaticShape() || xType.getRank() != 4 ||
      roisType.getRank() != 2 || roisType.getDimSize(1) != 4 || batchType.getRank() != 1 ||
      batchType.getDimSize(0) != roisType.getDimSize(0) ||
      !isa<FloatType>(xType.getElementType()) || !isa<FloatType>(roisType.getElementType()) ||
      !isa<IntegerType>(batchType.getElementType()))
    return n.error() << "RoiAlign needs X [N, C, H, W] (float), rois [R, 4] (float) and "
                     << "batch_indices [R] (integer), all static, got " << n.input(0).getType()
                     << ", " << n.input(1).getType() << " and " << n.input(2).getType();
  const std::string mode = n.getString("mode", "avg");
  if (mode != "avg" && mode != "max")
    return n.error() << "RoiAlign mode '" << mode << "' is not avg or max";
  const std::string transform =
      n.getString("coordinate_transformation_mode", n.version >= 16 ? "half_pixel" : "output_half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel")
    return n.error() << "RoiAlign coordinate_transformation_mode '" << transform
                     << "' is not half_pixel or output_half_pixel";
  const bool halfPixel = transform == "half_pixel";
  const int64_t outH = n.getInt("output_height", 1), outW = n.getInt("output_width", 1);
  const int64_t ratio = n.getInt("sampling_ratio", 0);
  const double scale = n.getFloat("spatial_scale", 1.0f);
  if (outH < 1 || outW < 1 || ratio < 0 || !(scale > 0))
    return n.error() << "RoiAlign needs output sizes of 1 or more, a sampling_ratio of 0 or more "
                     << "and a positive spatial_scale";
  const int64_t rois = roisType.getDimSize(0);
  const int64_t height = xType.getDimSize(2), width = xType.getDimSize(3);
  const double offset = halfPixel ? 0.5 : 0.0;

  // Samples per bin and axis: sampling_ratio, or ceil(roi size / output size)
  // per roi, which needs the rois' values.
  SmallVector<int64_t> gridH(rois, ratio), gridW(rois, ratio);
  if (ratio == 0) {
    auto boxes = constantFloats(n, 1, "rois (with sampling_ratio 0 the sample count depends on "
                                      "them; export with a positive sampling_ratio)");
    if (failed(boxes))
      return failure();
    for (int64_t r = 0; r < rois; ++r) {
      double roiW = ((*boxes)[4 * r + 2] - (*boxes)[4 * r]) * scale;
      double roiH = ((*boxes)[4 * r + 3] - (*boxes)[4 * r + 1]) * scale;
      if (!halfPixel) {
        roiW = std::max(roiW, 1.0);
        roiH = std::max(roiH, 1.0);
      }
      gridH[r] = static_cast<int64_t>(std::ceil(roiH / outH));
      gridW[r] = static_cast<int64_t>(std::ceil(roiW / outW));
    }
  }
  const int64_t samplesH = std::max<int64_t>(1, *llvm::max_element(gridH));
  const int64_t samplesW = std::max<int64_t>(1, *llvm::max_element(gridW));
  Type element = xType.getElementType();

  Composer c(n);
  // Sample positions as start + bin * fraction over [R, outH, samplesH, outW, samplesW]:
  // fraction = p + (i + 0.5) / grid for bin p and sample i, the same for every
  // roi when sampling_ratio is given; with per-roi grids a sample past its
  // roi's grid is masked (`valid`).
  const int64_t perRoi = ratio == 0 ? rois : 1;
  auto fractions = [&](int64_t bins, int64_t samples, llvm::ArrayRef<int64_t> grid, bool rows) {
    SmallVector<double> values, valid;
    for (int64_t r = 0; r < perRoi; ++r)
      for (int64_t p = 0; p < bins; ++p)
        for (int64_t i = 0; i < samples; ++i) {
          const int64_t g = std::max<int64_t>(1, grid[r]);
          values.push_back(p + (i + 0.5) / g);
          valid.push_back(i < grid[r] ? 1.0 : 0.0);
        }
    SmallVector<int64_t> shape = rows ? SmallVector<int64_t>{perRoi, bins, samples, 1, 1}
                                      : SmallVector<int64_t>{perRoi, 1, 1, bins, samples};
    Value mask = ratio == 0 ? c.constantOf(shape, valid, element) : Value();
    return std::make_pair(c.constantOf(shape, values, element), mask);
  };
  auto [fractionY, validY] = fractions(outH, samplesH, gridH, true);
  auto [fractionX, validX] = fractions(outW, samplesW, gridW, false);
  auto corner = [&](int64_t column, SmallVector<int64_t> shape) {
    Value value = c.reshape(c.slice(n.input(1), 1, column, column + 1), shape);
    return c.sub(c.mul(value, c.scalar(scale, value)), c.scalar(offset, value));
  };
  auto samplePositions = [&](int64_t first, int64_t bins, Value fraction,
                             SmallVector<int64_t> shape) {
    Value start = corner(first, shape), end = corner(first + 2, shape);
    Value extent = c.sub(end, start);
    if (!halfPixel)
      extent = c.op("nn.max", {extent, c.scalar(1, extent)});
    Value bin = c.div(extent, c.scalar(bins, extent));
    return c.add(start, c.mul(bin, fraction));
  };
  Value y = samplePositions(1, outH, fractionY, {rois, 1, 1, 1, 1});
  Value x = samplePositions(0, outW, fractionX, {rois, 1, 1, 1, 1});
  SmallVector<SmallVector<Tap>> taps{roiAlignTaps(c, y, height), roiAlignTaps(c, x, width)};
  Value valid = ratio == 0 ? c.op("nn.unsqueeze", {c.mul(validY, validX), n.constantI64({5})})
                           : Value();
  Value batchIndex = c.reshape(c.cast(n.input(2), n.builder.getI64Type()), {rois, 1, 1, 1, 1});
  Value batchRows = c.mul(batchIndex, n.constantI64({height * width}, true));
  Value table = rowTable(c, n.input(0));
  SmallVector<int64_t> sizes{height, width};
  Value result;
  if (mode == "avg") {
    Value sum = gatherTaps(c, table, batchRows, taps, sizes); // [R, oh, sh, ow, sw, C]
    Value total = c.reduce("nn.reduce_sum", valid ? c.mul(sum, valid) : sum, {2, 4}, false);
    SmallVector<double> counts;
    for (int64_t r = 0; r < rois; ++r)
      counts.push_back(std::max<int64_t>(1, gridH[r] * gridW[r]));
    result = c.div(total, c.constantOf({rois, 1, 1, 1}, counts, element));
  } else {
    // ONNX's max: the largest weighted corner over the samples of a bin.
    Value best;
    for (const Tap &ty : taps[0])
      for (const Tap &tx : taps[1]) {
        SmallVector<SmallVector<Tap>> one{{ty}, {tx}};
        Value term = gatherTaps(c, table, batchRows, one, sizes);
        best = best ? c.op("nn.max", {best, term}) : term;
      }
    if (valid) {
      Value lowest = c.scalar(-std::numeric_limits<double>::infinity(), best);
      Value isValid = c.op("nn.greater", {valid, c.scalar(0, best)});
      best = c.op("nn.where", {isValid, best, lowest});
    }
    result = c.reduce("nn.reduce_max", best, {2, 4}, false);
    // A roi without samples (an empty box under sampling_ratio 0) gives 0.
    SmallVector<double> sampled;
    for (int64_t r = 0; r < rois; ++r)
      sampled.push_back(gridH[r] * gridW[r] > 0 ? 1.0 : 0.0);
    if (llvm::is_contained(sampled, 0.0)) {
      Value hasSamples = c.constantOf({rois, 1, 1, 1}, sampled, n.builder.getI1Type());
      result = c.op("nn.where", {hasSamples, result, c.scalar(0, result)});
    }
  }
  return c.result(c.transpose(result, {0, 3, 1, 2}));
}

//===----------------------------------------------------------------------===//
// MaxUnpool
//===----------------------------------------------------------------------===//

Values importMaxUnpool(NodeImporter &n) {
  if (failed(n.expectInputs(2, 3)) ||
      failed(n.expectAttributes({{"kernel_shape", Kind::Ints, true},
                                 {"pads", Kind::Ints},
                                 {"strides", Kind::Ints}})))
    return failure();
  auto xType = rankedInput(n, 0), indexType = rankedInput(n, 1);
  if (!xType || !indexType || !xType.hasStaticShape() || xType.getRank() < 3 ||
      indexType.getShape() != xType.getShape() || !isa<FloatType>(xType.getElementType()) ||
      !isa<IntegerType>(indexType.getElementType()))
    return n.error() << "MaxUnpool needs X [N, C, D1..Dk] (float, static) and indices of its "
                     << "shape, got " << n.input(0).getType() << " and " << n.input(1).getType();
  const int64_t spatial = xType.getRank() - 2;
  SmallVector<int64_t> kernel = *n.getInts("kernel_shape");
  SmallVector<int64_t> strides = n.getInts("strides").value_or(SmallVector<int64_t>(spatial, 1));
  SmallVector<int64_t> pads = n.getInts("pads").value_or(SmallVector<int64_t>(2 * spatial, 0));
  if (static_cast<int64_t>(kernel.size()) != spatial ||
      static_cast<int64_t>(strides.size()) != spatial ||
      static_cast<int64_t>(pads.size()) != 2 * spatial)
    return n.error() << "MaxUnpool needs " << spatial << " kernel sizes and strides and "
                     << 2 * spatial << " pads for " << xType;
  // The indices number the elements of the output (as MaxPool's number those
  // of its input): output_shape when given, else the shape the attributes give.
  // ONNX's own with_output_shape example reads them in the inferred shape and
  // pads; PyTorch and onnxruntime do not (onnx/onnx#2398).
  SmallVector<int64_t> outShape{xType.getDimSize(0), xType.getDimSize(1)};
  for (int64_t d = 0; d < spatial; ++d) {
    if (kernel[d] < 1 || strides[d] < 1 || pads[d] < 0 || pads[spatial + d] < 0)
      return n.error() << "MaxUnpool needs positive kernel sizes and strides and pads of 0 or "
                       << "more";
    outShape.push_back((xType.getDimSize(2 + d) - 1) * strides[d] + kernel[d] - pads[d] -
                       pads[spatial + d]);
  }
  if (n.input(2)) {
    auto given = constantInts(n, 2, "output_shape");
    if (failed(given))
      return failure();
    if (given->size() != outShape.size() || (*given)[0] != outShape[0] ||
        (*given)[1] != outShape[1])
      return n.error() << "MaxUnpool output_shape must be [N, C, D1..Dk] with X's N and C";
    outShape.assign(given->begin(), given->end());
  }
  int64_t total = 1;
  for (int64_t extent : outShape) {
    if (extent < 1)
      return n.error() << "MaxUnpool output dims must be 1 or more";
    total *= extent;
  }
  // Constant indices are checked here; computed ones by the gather's range check.
  DenseElementsAttr indices;
  if (matchPattern(n.input(1), m_Constant(&indices)))
    for (const APInt &value : indices.getValues<APInt>())
      if (value.getSExtValue() < 0 || value.getSExtValue() >= total)
        return n.error() << "MaxUnpool index " << value.getSExtValue() << " is outside [0, "
                         << total << ")";
  Composer c(n);
  const int64_t count = xType.getNumElements();
  Value values = c.reshape(n.input(0), {count});
  Value flatIndices = c.reshape(c.cast(n.input(1), n.builder.getI64Type()), {count});
  auto scatter = [&](Value rows) {
    return c.op("nn.gather_grad", {rows, flatIndices},
                {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(0)),
                 n.builder.getNamedAttr("input_shape", n.builder.getDenseI64ArrayAttr({total}))});
  };
  // Overlapping windows can pick one element twice: it is written once (the
  // sum over its hits divided by their count), as PyTorch's assignment does.
  Value ones = c.constantOf({count}, SmallVector<double>(count, 1.0), xType.getElementType());
  Value hits = c.op("nn.max", {scatter(ones), c.scalar(1, ones)});
  Value scattered = c.div(scatter(values), hits);
  return c.result(c.reshape(scattered, outShape));
}
} // namespace

void pipe::onnx_import::addSampling(const AddOp &add) {
  add("GridSample", {16, 20, 22}, 16, importGridSample);
  add("RoiAlign", {10, 16, 22}, 10, importRoiAlign);
  add("MaxUnpool", {9, 11, 22}, 9, importMaxUnpool);
}
