//===- IndexOps.cpp - ONNX index, scatter and test ops as nn ops ----------===//
//
// Ops that pick, place or test elements, imported as formulas of nn ops:
// TopK, GatherND, ScatterElements (and the older Scatter), ScatterND,
// Compress, ReverseSequence, CumSum, EyeLike, the window functions, NonZero, LRN,
// MeanVarianceNormalization, Shrink, IsNaN, IsInf, Xor and BitShift.
//
// Element choices are one-hot masks (an index against an iota) times the
// data, so every gradient is a mul's or a where's. Where ONNX lets an output
// shape depend on values (Compress's condition, NonZero, TopK's k), the
// values must be constants once the model's inputs are bound; the error says
// so.
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

/// The element count of a static shape.
int64_t product(llvm::ArrayRef<int64_t> dims) {
  int64_t total = 1;
  for (int64_t d : dims)
    total *= d;
  return total;
}

/// Input `i`'s type when it is ranked and static, else an error naming the
/// node and `what` it is.
FailureOr<RankedTensorType> staticInput(NodeImporter &n, unsigned i, llvm::StringRef what) {
  auto type = rankedInput(n, i);
  if (!type || !type.hasStaticShape())
    return n.error() << n.node.op_type() << " needs a static " << what << ", got "
                     << n.input(i).getType() << " (bind the symbolic dims with --dim)";
  return type;
}

/// The lowest (`lowest`) or highest value of a float or integer element type:
/// what a masked-out element becomes before a max or a min.
double extremeOf(Type element, bool lowest) {
  if (isa<FloatType>(element))
    return lowest ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
  const unsigned width = element.getIntOrFloatBitWidth();
  if (element.isUnsignedInteger())
    return lowest ? 0.0 : std::ldexp(1.0, std::min(width, 53u)) - 1;
  return lowest ? -std::ldexp(1.0, std::min(width - 1, 53u))
                : std::ldexp(1.0, std::min(width - 1, 53u)) - 1;
}

/// IsNaN: x != x.
Values importIsNaN(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {})))
    return failure();
  Composer c(n);
  Value same = c.op("nn.equal", {n.input(0), n.input(0)});
  return c.result(c.unary("nn.not", same));
}

/// IsInf: x == +inf (detect_positive), x == -inf (detect_negative).
Values importIsInf(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1,
                             {{"detect_negative", Kind::Int}, {"detect_positive", Kind::Int}})))
    return failure();
  const bool negative = n.getInt("detect_negative", 1), positive = n.getInt("detect_positive", 1);
  Composer c(n);
  Value x = n.input(0);
  const double inf = std::numeric_limits<double>::infinity();
  Value up = positive ? c.op("nn.equal", {x, c.scalar(inf, x)}) : nullptr;
  Value down = negative ? c.op("nn.equal", {x, c.scalar(-inf, x)}) : nullptr;
  if (up && down)
    return c.result(c.op("nn.or", {up, down}));
  if (up || down)
    return c.result(up ? up : down);
  // Neither: false everywhere (x == x and x != x).
  Value same = c.op("nn.equal", {x, x});
  Value differs = c.unary("nn.not", same);
  return c.result(c.op("nn.and", {same, differs}));
}

/// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
Values importShrink(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes({{"bias", Kind::Float}, {"lambd", Kind::Float}})))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  const double bias = n.getFloat("bias", 0.0f), lambd = n.getFloat("lambd", 0.5f);
  Value low = c.scalar(-lambd, x), high = c.scalar(lambd, x), b = c.scalar(bias, x);
  Value below = c.op("nn.less", {x, low});
  Value above = c.op("nn.greater", {x, high});
  Value raised = c.add(x, b);
  Value lowered = c.sub(x, b);
  Value zero = c.scalar(0, x);
  Value upper = c.op("nn.where", {above, lowered, zero});
  return c.result(c.op("nn.where", {below, raised, upper}));
}

/// MeanVarianceNormalization: (x - mean) / (std + 1e-9) over `axes`.
Values importMeanVarianceNormalization(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1, {{"axes", Kind::Ints}})))
    return failure();
  auto type = rankedInput(n, 0);
  if (!type)
    return n.error() << "MeanVarianceNormalization needs a ranked input";
  SmallVector<int64_t> axes = n.getInts("axes").value_or(SmallVector<int64_t>{0, 2, 3});
  for (int64_t &axis : axes) {
    auto normalized = normalizedAxis(n, axis, type.getRank());
    if (failed(normalized))
      return failure();
    axis = *normalized;
  }
  Composer c(n);
  Value x = n.input(0);
  auto [mean, centered, variance] = c.moments(x, axes);
  Value deviation = c.unary("nn.sqrt", variance);
  Value epsilon = c.scalar(1e-9, x);
  Value denominator = c.add(deviation, epsilon);
  return c.result(c.div(centered, denominator));
}

/// EyeLike: ones on diagonal k of a matrix shaped as the input.
Values importEyeLike(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes({{"dtype", Kind::Int}, {"k", Kind::Int}})))
    return failure();
  auto type = staticInput(n, 0, "2-D input");
  if (failed(type))
    return failure();
  if (type->getRank() != 2)
    return n.error() << "EyeLike needs a 2-D input, got " << n.input(0).getType();
  Type element = type->getElementType();
  if (n.attribute("dtype")) {
    element = convertDataType(n.getInt("dtype", 0), n.builder.getContext());
    if (!element)
      return n.error() << "EyeLike dtype " << n.getInt("dtype", 0) << " is not supported";
  }
  const int64_t rows = type->getDimSize(0), cols = type->getDimSize(1), k = n.getInt("k", 0);
  SmallVector<double> values(rows * cols, 0.0);
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols)
      values[i * cols + i + k] = 1.0;
  Composer c(n);
  return c.result(c.constantOf({rows, cols}, values, element));
}

/// The window functions of opset 17, a constant of the (constant) size:
/// sum_k (-1)^k a_k cos(2 pi k n / N), N the size when periodic, else size - 1.
Values importWindow(NodeImporter &n, llvm::ArrayRef<double> terms) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes({{"output_datatype", Kind::Int}, {"periodic", Kind::Int}})))
    return failure();
  auto size = constantInts(n, 0, "size");
  if (failed(size))
    return failure();
  if (size->size() != 1 || (*size)[0] < 1)
    return n.error() << n.node.op_type() << " size must be one value of 1 or more";
  Type element = convertDataType(n.getInt("output_datatype", 1), n.builder.getContext());
  if (!element)
    return n.error() << n.node.op_type() << " output_datatype " << n.getInt("output_datatype", 1)
                     << " is not supported";
  const int64_t length = (*size)[0];
  const double period = n.getInt("periodic", 1) ? length : std::max<int64_t>(1, length - 1);
  SmallVector<double> values;
  for (int64_t i = 0; i < length; ++i) {
    double value = 0;
    for (auto [k, a] : llvm::enumerate(terms))
      value += (k % 2 ? -a : a) * std::cos(2 * M_PI * k * i / period);
    values.push_back(value);
  }
  Composer c(n);
  return c.result(c.constantOf({length}, values, element));
}

/// A constant [L, L] matrix on dims (axis, axis + 1) of a rank-`rank` tensor
/// of `element` (ones elsewhere): entry (j, i) is `keep(j, i)`.
Value pairMask(Composer &c, int64_t length, int64_t rank, int64_t axis, Type element,
               llvm::function_ref<bool(int64_t, int64_t)> keep) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = shape[axis + 1] = length;
  SmallVector<double> values(length * length);
  for (int64_t j = 0; j < length; ++j)
    for (int64_t i = 0; i < length; ++i)
      values[j * length + i] = keep(j, i);
  return c.constantOf(shape, values, element);
}

/// sum_j x[.., j, ..] * mask(j, i) along `axis`: x spread to [.., L, 1, ..]
/// times the [L, L] mask, summed over j.
Value mixAlong(Composer &c, Value x, int64_t axis, llvm::function_ref<bool(int64_t, int64_t)> keep) {
  auto type = cast<RankedTensorType>(x.getType());
  Value after = c.n.constantI64({axis + 1});
  Value spread = c.op("nn.unsqueeze", {x, after});
  Value mask = pairMask(c, type.getDimSize(axis), type.getRank() + 1, axis,
                        type.getElementType(), keep);
  Value terms = c.mul(spread, mask);
  return c.reduce("nn.reduce_sum", terms, {axis}, false);
}

/// CumSum: sums of x[j] over j <= i (j < i when exclusive; j >= i, j > i
/// when reverse) along `axis`, through a triangular mask (memory: the axis
/// length times x).
Values importCumSum(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) ||
      failed(n.expectAttributes({{"exclusive", Kind::Int}, {"reverse", Kind::Int}})))
    return failure();
  auto type = staticInput(n, 0, "input");
  auto axisValues = constantInts(n, 1, "axis");
  if (failed(type) || failed(axisValues))
    return failure();
  if (axisValues->size() != 1 || type->getRank() == 0)
    return n.error() << "CumSum needs one axis and an input of rank 1 or more";
  auto axis = normalizedAxis(n, (*axisValues)[0], type->getRank());
  if (failed(axis))
    return failure();
  const bool exclusive = n.getInt("exclusive", 0), reverse = n.getInt("reverse", 0);
  Composer c(n);
  return c.result(mixAlong(c, n.input(0), *axis, [&](int64_t j, int64_t i) {
    if (reverse)
      return exclusive ? j > i : j >= i;
    return exclusive ? j < i : j <= i;
  }));
}

/// LRN: x / (bias + alpha / size * sum of x^2 over the channel window)^beta,
/// the window [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)].
Values importLRN(NodeImporter &n) {
  if (failed(expectFloatNode(n, 1, 1,
                             {{"alpha", Kind::Float},
                              {"beta", Kind::Float},
                              {"bias", Kind::Float},
                              {"size", Kind::Int, true}})))
    return failure();
  auto type = staticInput(n, 0, "[N, C, ...] input");
  if (failed(type))
    return failure();
  const int64_t size = n.getInt("size", 0);
  if (type->getRank() < 3 || size < 1)
    return n.error() << "LRN needs an [N, C, D1, ...] input and a size of 1 or more, got "
                     << n.input(0).getType() << " and size " << size;
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  Composer c(n);
  Value x = n.input(0);
  Value squares = c.mul(x, x);
  Value window = mixAlong(c, squares, 1, [&](int64_t j, int64_t i) {
    return j >= i - before && j <= i + after;
  });
  Value scale = c.scalar(n.getFloat("alpha", 1e-4f) / size, x);
  Value scaled = c.mul(window, scale);
  Value bias = c.scalar(n.getFloat("bias", 1.0f), x);
  Value base = c.add(scaled, bias);
  Value beta = c.scalar(n.getFloat("beta", 0.75f), x);
  Value denominator = c.op("nn.pow", {base, beta});
  return c.result(c.div(x, denominator));
}

/// Xor on booleans: a != b.
Values importXor(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({})))
    return failure();
  Composer c(n);
  Value same = c.op("nn.equal", {n.input(0), n.input(1)});
  return c.result(c.unary("nn.not", same));
}

/// BitShift on unsigned integers by a constant amount: x * 2^y (LEFT) or
/// x / 2^y (RIGHT), in the type's modular arithmetic.
Values importBitShift(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) ||
      failed(n.expectAttributes({{"direction", Kind::String, true}})))
    return failure();
  const std::string direction = n.getString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return n.error() << "BitShift direction '" << direction << "' is not LEFT or RIGHT";
  auto amountType = rankedInput(n, 1);
  auto amounts = constantInts(n, 1, "shift amount");
  if (failed(amounts))
    return failure();
  Type element = amountType.getElementType();
  const unsigned width = element.getIntOrFloatBitWidth();
  SmallVector<APInt> powers;
  for (int64_t amount : *amounts) {
    if (amount < 0 || amount >= static_cast<int64_t>(width))
      return n.error() << "BitShift amount " << amount << " is outside [0, " << width << ")";
    powers.push_back(APInt(width, 1).shl(amount));
  }
  auto attr = DenseElementsAttr::get(amountType, powers);
  Composer c(n);
  Value factor = c.op("nn.constant", {}, {n.builder.getNamedAttr("value", attr)});
  return c.result(direction == "LEFT" ? c.mul(n.input(0), factor) : c.div(n.input(0), factor));
}

/// Compress: the slices along `axis` (of the flattened input without one)
/// where the constant condition holds.
Values importCompress(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({{"axis", Kind::Int}})))
    return failure();
  auto type = staticInput(n, 0, "input");
  auto condition = constantInts(n, 1, "condition");
  if (failed(type) || failed(condition))
    return failure();
  Composer c(n);
  Value x = n.input(0);
  int64_t axis = 0;
  if (n.attribute("axis")) {
    auto normalized = normalizedAxis(n, n.getInt("axis", 0), type->getRank());
    if (failed(normalized))
      return failure();
    axis = *normalized;
  } else {
    x = c.reshape(x, {type->getNumElements()});
  }
  const int64_t length = n.attribute("axis") ? type->getDimSize(axis) : type->getNumElements();
  if (static_cast<int64_t>(condition->size()) > length)
    return n.error() << "Compress condition has " << condition->size()
                     << " entries for an axis of " << length;
  SmallVector<int64_t> kept;
  for (auto [i, value] : llvm::enumerate(*condition))
    if (value)
      kept.push_back(i);
  if (kept.empty())
    return n.error() << "Compress condition selects nothing: the output would be empty";
  Value indices = n.constantI64(kept);
  return c.result(c.op("nn.gather", {x, indices},
                       {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(axis))}));
}

/// NonZero of a constant: the indices of its nonzero elements, [rank, count].
Values importNonZero(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes({})))
    return failure();
  DenseElementsAttr attr;
  if (!matchPattern(n.input(0), m_Constant(&attr)))
    return n.error() << "NonZero's output shape depends on its input's values: only a constant "
                        "input is supported";
  auto type = cast<RankedTensorType>(attr.getType());
  SmallVector<int64_t> flat;
  if (isa<FloatType>(attr.getElementType())) {
    for (const APFloat &value : attr.getValues<APFloat>())
      flat.push_back(!value.isZero());
  } else {
    for (const APInt &value : attr.getValues<APInt>())
      flat.push_back(!value.isZero());
  }
  const int64_t rank = std::max<int64_t>(type.getRank(), 1);
  SmallVector<SmallVector<int64_t>> coordinates(rank);
  for (auto [position, nonzero] : llvm::enumerate(flat)) {
    if (!nonzero)
      continue;
    int64_t rest = position;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t extent = type.getRank() ? type.getDimSize(d) : 1;
      coordinates[d].push_back(rest % extent);
      rest /= extent;
    }
  }
  const int64_t count = coordinates[0].size();
  if (count == 0)
    return n.error() << "NonZero of a constant without nonzero elements: the output would be "
                        "empty";
  SmallVector<int64_t> values;
  for (const auto &row : coordinates)
    values.append(row.begin(), row.end());
  Composer c(n);
  return c.result(c.constant({rank, count}, values));
}

/// The most rounds TopK unrolls: each is a reduction over the axis.
constexpr int64_t kMaxTopK = 256;

/// TopK: k rounds, each taking the first extreme of what is left (the lower
/// index first among equals), its value picked from x by a one-hot mask (so
/// the gradient goes to that element alone), then masked out.
Values importTopK(NodeImporter &n) {
  if (failed(n.expectInputs(n.version < 10 ? 1 : 2, n.version < 10 ? 1 : 2)) ||
      failed(n.expectAttributes({{"axis", Kind::Int},
                                 {"k", Kind::Int},
                                 {"largest", Kind::Int},
                                 {"sorted", Kind::Int}})))
    return failure();
  auto type = staticInput(n, 0, "input");
  if (failed(type))
    return failure();
  int64_t k = n.getInt("k", 0);
  if (n.version >= 10) {
    auto values = constantInts(n, 1, "K");
    if (failed(values))
      return failure();
    if (values->size() != 1)
      return n.error() << "TopK K must hold one value";
    k = (*values)[0];
  }
  if (type->getRank() == 0)
    return n.error() << "TopK needs an input of rank 1 or more";
  auto axis = normalizedAxis(n, n.getInt("axis", -1), type->getRank());
  if (failed(axis))
    return failure();
  const int64_t length = type->getDimSize(*axis);
  if (k < 1 || k > length || k > kMaxTopK)
    return n.error() << "TopK k " << k << " must be in [1, " << std::min(length, kMaxTopK)
                     << "] (the axis has " << length << "; larger k is not supported)";
  const bool largest = n.getInt("largest", 1);
  Composer c(n);
  Value x = n.input(0), left = x;
  Value positions = c.iota(length, type->getRank(), *axis);
  Value taken = c.scalar(extremeOf(type->getElementType(), largest), x);
  SmallVector<Value> values, indices;
  for (int64_t round = 0; round < k; ++round) {
    Value index = extremeIndex(c, left, *axis, largest, false);
    Value hit = c.op("nn.equal", {positions, index});
    Value mask = c.cast(hit, type->getElementType());
    Value picked = c.mul(x, mask);
    values.push_back(c.reduce("nn.reduce_sum", picked, {*axis}, true));
    indices.push_back(index);
    if (round + 1 < k)
      left = c.op("nn.where", {hit, taken, left});
  }
  auto axisAttr = n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(*axis));
  Value allValues = k == 1 ? values[0] : c.op("nn.concat", values, {axisAttr});
  Value allIndices = k == 1 ? indices[0] : c.op("nn.concat", indices, {axisAttr});
  auto result = c.result(allValues);
  if (succeeded(result))
    result->push_back(allIndices);
  return result;
}

/// GatherND with constant indices: data reshaped to [batch * indexed, rest],
/// gathered on dim 0 at each index tuple's flat position.
Values importGatherND(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) || failed(n.expectAttributes({{"batch_dims", Kind::Int}})))
    return failure();
  auto dataType = staticInput(n, 0, "data");
  auto indicesType = staticInput(n, 1, "indices");
  auto indices = constantInts(n, 1, "indices");
  if (failed(dataType) || failed(indicesType) || failed(indices))
    return failure();
  const int64_t batch = n.getInt("batch_dims", 0), rank = dataType->getRank(),
                indexRank = indicesType->getRank();
  const int64_t depth = indexRank ? indicesType->getDimSize(indexRank - 1) : 0;
  if (indexRank < 1 || batch < 0 || batch >= std::min(rank, indexRank) || depth < 1 ||
      batch + depth > rank)
    return n.error() << "GatherND needs indices [b..., i..., k] with batch_dims " << batch
                     << " and batch_dims + k <= rank " << rank << ", got "
                     << n.input(1).getType();
  for (int64_t d = 0; d < batch; ++d)
    if (dataType->getDimSize(d) != indicesType->getDimSize(d))
      return n.error() << "GatherND batch dim " << d << " differs: " << n.input(0).getType()
                       << " and " << n.input(1).getType();
  auto dims = dataType->getShape();
  const int64_t batchSize = product(dims.take_front(batch));
  const int64_t indexed = product(dims.slice(batch, depth));
  const int64_t tuples = indicesType->getNumElements() / depth;
  const int64_t perBatch = tuples / batchSize;
  SmallVector<int64_t> flat;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t position = 0;
    for (int64_t j = 0; j < depth; ++j) {
      const int64_t extent = dims[batch + j];
      int64_t index = (*indices)[t * depth + j];
      if (index < -extent || index >= extent)
        return n.error() << "GatherND index " << index << " is outside [" << -extent << ", "
                         << extent << ") in dim " << batch + j;
      position = position * extent + (index < 0 ? index + extent : index);
    }
    flat.push_back((t / perBatch) * indexed + position);
  }
  SmallVector<int64_t> rows{batchSize * indexed};
  rows.append(dims.begin() + batch + depth, dims.end());
  SmallVector<int64_t> gatherShape(indicesType->getShape().drop_back());
  if (gatherShape.empty())
    gatherShape.push_back(1);
  Composer c(n);
  Value table = c.reshape(n.input(0), rows);
  Value positions = c.constant(gatherShape, flat);
  Value gathered = c.op("nn.gather", {table, positions});
  if (indexRank == 1) {
    SmallVector<int64_t> shape(dims.begin() + depth, dims.end());
    return c.result(c.reshape(gathered, shape));
  }
  return c.result(gathered);
}

/// The reductions of ScatterElements and ScatterND (opsets 16 and 18).
enum class ScatterReduction { None, Add, Mul, Max, Min };

FailureOr<ScatterReduction> scatterReduction(NodeImporter &n) {
  const std::string reduction = n.getString("reduction", "none");
  if (reduction == "none")
    return ScatterReduction::None;
  if (reduction == "add")
    return ScatterReduction::Add;
  if (reduction == "mul")
    return ScatterReduction::Mul;
  if (reduction == "max")
    return ScatterReduction::Max;
  if (reduction == "min")
    return ScatterReduction::Min;
  return n.error() << n.node.op_type() << " reduction '" << reduction
                   << "' is not one of none, add, mul, max, min";
}

/// Combines data with the updates that land on each element. `hit` is a
/// boolean mask whose dim `over` runs over the updates (`spread` broadcasts
/// against it); `fit` brings a reduced term to data's shape, filling with
/// the given value where no update lands.
Value combineScatter(Composer &c, Value data, Value hit, Value spread, int64_t over,
                     ScatterReduction reduction,
                     llvm::function_ref<Value(Value, double)> fit) {
  Type element = getElementTypeOrSelf(data.getType());
  Value mask = c.cast(hit, element);
  Value count = fit(c.reduce("nn.reduce_sum", mask, {over}, false), 0);
  Value zero = c.scalar(0, data);
  Value covered = c.op("nn.greater", {count, zero});
  switch (reduction) {
  case ScatterReduction::None:
  case ScatterReduction::Add: {
    Value terms = c.mul(spread, mask);
    Value sum = fit(c.reduce("nn.reduce_sum", terms, {over}, false), 0);
    if (reduction == ScatterReduction::Add)
      return c.add(data, sum);
    return c.op("nn.where", {covered, sum, data});
  }
  case ScatterReduction::Mul: {
    Value one = c.scalar(1, data);
    Value factors = c.op("nn.where", {hit, spread, one});
    Value product = fit(c.reduce("nn.reduce_prod", factors, {over}, false), 1);
    return c.mul(data, product);
  }
  case ScatterReduction::Max:
  case ScatterReduction::Min: {
    const bool max = reduction == ScatterReduction::Max;
    Value neutral = c.scalar(extremeOf(element, max), data);
    Value candidates = c.op("nn.where", {hit, spread, neutral});
    Value best = fit(c.reduce(max ? "nn.reduce_max" : "nn.reduce_min", candidates, {over}, false),
                     extremeOf(element, max));
    Value combined = c.op(max ? "nn.max" : "nn.min", {data, best});
    return c.op("nn.where", {covered, combined, data});
  }
  }
  return nullptr;
}

/// ScatterElements (and Scatter): data[.., indices[.., i, ..], ..] takes
/// updates[.., i, ..] along `axis`. The mask of where each update lands is
/// [.., I_axis, L, ..]; the terms are reduced over I_axis and padded to data
/// where the indices are shorter than data in another dim.
Values importScatterElements(NodeImporter &n) {
  const bool reductions = n.node.op_type() == "ScatterElements" && n.version >= 16;
  std::vector<AttrSpec> specs{{"axis", Kind::Int}};
  if (reductions)
    specs.push_back({"reduction", Kind::String});
  if (failed(n.expectInputs(3, 3)) || failed(n.expectAttributes(specs)))
    return failure();
  auto dataType = staticInput(n, 0, "data");
  auto indicesType = staticInput(n, 1, "indices");
  auto updatesType = staticInput(n, 2, "updates");
  if (failed(dataType) || failed(indicesType) || failed(updatesType))
    return failure();
  const int64_t rank = dataType->getRank();
  if (rank == 0 || indicesType->getRank() != rank ||
      indicesType->getShape() != updatesType->getShape())
    return n.error() << n.node.op_type() << " needs indices and updates of one shape and "
                     << "data's rank, got " << n.input(0).getType() << ", "
                     << n.input(1).getType() << " and " << n.input(2).getType();
  auto axis = normalizedAxis(n, n.getInt("axis", 0), rank);
  auto reduction = scatterReduction(n);
  if (failed(axis) || failed(reduction))
    return failure();
  SmallVector<int64_t> pads(2 * rank, 0);
  bool padded = false;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == *axis)
      continue;
    const int64_t extra = dataType->getDimSize(d) - indicesType->getDimSize(d);
    if (extra < 0)
      return n.error() << n.node.op_type() << " indices " << n.input(1).getType()
                       << " exceed data " << n.input(0).getType() << " in dim " << d;
    pads[rank + d] = extra;
    padded |= extra > 0;
  }
  const int64_t length = dataType->getDimSize(*axis);
  Composer c(n);
  Value index = wrappedIndex(c, n.input(1), length);
  Value after = n.constantI64({*axis + 1});
  Value expanded = c.op("nn.unsqueeze", {index, after});
  Value positions = c.iota(length, rank + 1, *axis + 1);
  Value hit = c.op("nn.equal", {expanded, positions});
  Value spread = c.op("nn.unsqueeze", {n.input(2), after});
  auto fit = [&](Value term, double fill) -> Value {
    if (!padded)
      return term;
    Value padsValue = n.constantI64(pads);
    Value fillValue = c.scalar(fill, term);
    SmallVector<int64_t> allAxes;
    for (int64_t d = 0; d < rank; ++d)
      allAxes.push_back(d);
    Value axesValue = n.constantI64(allAxes);
    return c.op("nn.pad", {term, padsValue, fillValue, axesValue});
  };
  return c.result(combineScatter(c, n.input(0), hit, spread, *axis, *reduction, fit));
}

/// ScatterND with constant indices: data as [P, R] (P the indexed positions),
/// updates as [U, R], and a constant [P, U, 1] mask of where each lands.
Values importScatterND(NodeImporter &n) {
  std::vector<AttrSpec> specs;
  if (n.version >= 16)
    specs.push_back({"reduction", Kind::String});
  if (failed(n.expectInputs(3, 3)) || failed(n.expectAttributes(specs)))
    return failure();
  auto dataType = staticInput(n, 0, "data");
  auto indicesType = staticInput(n, 1, "indices");
  auto updatesType = staticInput(n, 2, "updates");
  auto indices = constantInts(n, 1, "indices");
  auto reduction = scatterReduction(n);
  if (failed(dataType) || failed(indicesType) || failed(updatesType) || failed(indices) ||
      failed(reduction))
    return failure();
  const int64_t rank = dataType->getRank(), indexRank = indicesType->getRank();
  const int64_t depth = indexRank ? indicesType->getDimSize(indexRank - 1) : 0;
  if (indexRank < 1 || depth < 1 || depth > rank)
    return n.error() << "ScatterND needs indices [..., k] with 1 <= k <= " << rank << ", got "
                     << n.input(1).getType();
  auto dims = dataType->getShape();
  SmallVector<int64_t> updateShape(indicesType->getShape().drop_back());
  updateShape.append(dims.begin() + depth, dims.end());
  if (updatesType->getShape() != llvm::ArrayRef<int64_t>(updateShape))
    return n.error() << "ScatterND updates " << n.input(2).getType()
                     << " do not match indices " << n.input(1).getType() << " and data "
                     << n.input(0).getType();
  const int64_t places = product(dims.take_front(depth)), row = product(dims.drop_front(depth));
  const int64_t count = indicesType->getNumElements() / depth;
  SmallVector<double> lands(places * count, 0.0);
  for (int64_t u = 0; u < count; ++u) {
    int64_t position = 0;
    for (int64_t j = 0; j < depth; ++j) {
      int64_t index = (*indices)[u * depth + j];
      if (index < -dims[j] || index >= dims[j])
        return n.error() << "ScatterND index " << index << " is outside [" << -dims[j] << ", "
                         << dims[j] << ") in dim " << j;
      position = position * dims[j] + (index < 0 ? index + dims[j] : index);
    }
    lands[position * count + u] = 1.0;
  }
  Composer c(n);
  Value data = c.reshape(n.input(0), {places, row});
  Value updates = c.reshape(n.input(2), {1, count, row});
  Value hit = c.constantOf({places, count, 1}, lands, n.builder.getI1Type());
  Value combined =
      combineScatter(c, data, hit, updates, 1, *reduction, [](Value term, double) { return term; });
  return c.result(c.reshape(combined, dims));
}

/// ReverseSequence: along time_axis, the first sequence_lens[b] steps of
/// batch entry b reversed, the rest kept; a constant index tensor picked
/// with selectAlong.
Values importReverseSequence(NodeImporter &n) {
  if (failed(n.expectInputs(2, 2)) ||
      failed(n.expectAttributes({{"batch_axis", Kind::Int}, {"time_axis", Kind::Int}})))
    return failure();
  auto type = staticInput(n, 0, "input");
  auto lengths = constantInts(n, 1, "sequence_lens");
  if (failed(type) || failed(lengths))
    return failure();
  const int64_t batchAxis = n.getInt("batch_axis", 1), timeAxis = n.getInt("time_axis", 0);
  if (type->getRank() < 2 || batchAxis == timeAxis || batchAxis < 0 || batchAxis > 1 ||
      timeAxis < 0 || timeAxis > 1)
    return n.error() << "ReverseSequence needs a rank-2+ input and batch_axis, time_axis "
                        "of 0 and 1, got "
                     << batchAxis << " and " << timeAxis;
  auto dims = type->getShape();
  const int64_t batch = dims[batchAxis], steps = dims[timeAxis];
  if (static_cast<int64_t>(lengths->size()) != batch)
    return n.error() << "ReverseSequence has " << lengths->size() << " sequence_lens for a batch of "
                     << batch;
  SmallVector<int64_t> index(type->getNumElements());
  const int64_t inner = product(dims.drop_front(2));
  for (int64_t position = 0; position < static_cast<int64_t>(index.size()); ++position) {
    const int64_t outer = position / inner;
    const int64_t first = outer / dims[1], second = outer % dims[1];
    const int64_t b = batchAxis == 0 ? first : second, t = timeAxis == 0 ? first : second;
    const int64_t length = (*lengths)[b];
    if (length < 0 || length > steps)
      return n.error() << "ReverseSequence length " << length << " is outside [0, " << steps
                       << "]";
    index[position] = t < length ? length - 1 - t : t;
  }
  Composer c(n);
  Value indexValue = c.constant(dims, index);
  return c.result(selectAlong(c, n.input(0), indexValue, timeAxis));
}
} // namespace

void pipe::onnx_import::addIndexOps(const AddOp &add) {
  add("IsNaN", {9, 13, 20}, 9, importIsNaN);
  add("IsInf", {10, 20}, 10, importIsInf);
  add("Shrink", {9}, 9, importShrink);
  add("MeanVarianceNormalization", {9, 13}, 9, importMeanVarianceNormalization);
  add("EyeLike", {9, 22}, 9, importEyeLike);
  add("CumSum", {11, 14}, 11, importCumSum);
  add("HannWindow", {17}, 17, [](NodeImporter &n) { return importWindow(n, {0.5, 0.5}); });
  add("HammingWindow", {17}, 17,
      [](NodeImporter &n) { return importWindow(n, {25.0 / 46, 21.0 / 46}); });
  add("BlackmanWindow", {17}, 17,
      [](NodeImporter &n) { return importWindow(n, {0.42, 0.5, 0.08}); });
  add("LRN", {1, 13}, 1, importLRN);
  add("Xor", {1, 7}, 7, importXor);
  add("BitShift", {11}, 11, importBitShift);
  add("Compress", {9, 11}, 9, importCompress);
  add("NonZero", {9, 13}, 9, importNonZero);
  add("TopK", {1, 10, 11}, 1, importTopK);
  add("GatherND", {11, 12, 13}, 11, importGatherND);
  add("ScatterElements", {11, 13, 16, 18}, 11, importScatterElements);
  add("Scatter", {9, 11}, 9, importScatterElements);
  add("ScatterND", {11, 13, 16, 18}, 11, importScatterND);
  add("ReverseSequence", {10}, 10, importReverseSequence);
}
