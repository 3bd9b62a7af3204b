//===- OpTable.cpp - the ONNX op handlers ---------------------------------===//
//
// One entry per supported ONNX op type: the versions the ONNX changelog lists
// (onnx/docs/Changelog.md, up to opset 23), the oldest version handled, and
// the handler that builds the nn op, normalising older forms (attribute axes,
// attribute bounds, absent optional inputs) to the newest one.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "NodeImporter.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Values = FailureOr<SmallVector<Value>>;

using Kind = AttrKind;

/// Checks the attributes against `specs`, then copies them onto the nn op.
LogicalResult copyAttributes(NodeImporter &n, llvm::ArrayRef<AttrSpec> specs,
                             SmallVectorImpl<NamedAttribute> &attrs) {
  if (failed(n.expectAttributes(specs)))
    return failure();
  for (const AttrSpec &spec : specs) {
    switch (spec.kind) {
    case Kind::Int: n.copyInt(attrs, spec.name); break;
    case Kind::Float: n.copyFloat(attrs, spec.name); break;
    case Kind::String: n.copyString(attrs, spec.name); break;
    case Kind::Ints: n.copyInts(attrs, spec.name); break;
    case Kind::Floats:
    case Kind::Strings:
    case Kind::Tensor:
    case Kind::Graph: break; // no plain op takes these
    }
  }
  return success();
}

/// The present inputs; optional inputs may only be omitted at the end.
FailureOr<SmallVector<Value>> presentInputs(NodeImporter &n) {
  SmallVector<Value> operands;
  for (unsigned i = 0; i < n.numInputs(); ++i) {
    if (n.input(i)) {
      if (operands.size() != i)
        return n.error() << n.node.op_type() << " with input #" << operands.size()
                         << " omitted but input #" << i << " given is not supported";
      operands.push_back(n.input(i));
    }
  }
  return operands;
}

/// A handler that maps the node one-to-one onto `opName`.
NodeHandler plain(const char *opName, unsigned minInputs, unsigned maxInputs,
                  std::vector<AttrSpec> specs = {}) {
  return [=](NodeImporter &n) -> Values {
    SmallVector<NamedAttribute> attrs;
    if (failed(n.expectInputs(minInputs, maxInputs)) || failed(copyAttributes(n, specs, attrs)))
      return failure();
    auto operands = presentInputs(n);
    if (failed(operands))
      return failure();
    return n.create(opName, *operands, attrs, std::max(1u, n.numOutputs()));
  };
}

NodeHandler unary(const char *opName) { return plain(opName, 1, 1); }
NodeHandler binary(const char *opName) { return plain(opName, 2, 2); }

/// Max, Min and Sum take any number of inputs: a chain of binary ops.
NodeHandler variadic(const char *opName) {
  return [=](NodeImporter &n) -> Values {
    if (failed(n.expectInputs(1, 1u << 16)) || failed(n.expectAttributes({})))
      return failure();
    for (unsigned i = 1; i < n.numInputs(); ++i)
      if (!n.input(i))
        return n.error() << n.node.op_type() << " input #" << i << " is empty";
    Value acc = n.input(0);
    for (unsigned i = 1; i < n.numInputs(); ++i) {
      auto r = n.create(opName, {acc, n.input(i)}, {}, 1);
      if (failed(r))
        return failure();
      acc = (*r)[0];
    }
    return SmallVector<Value>{acc};
  };
}

NodeHandler reduce(const char *opName, int axesInputSince) {
  return [=](NodeImporter &n) -> Values {
    if (failed(n.expectInputs(1, 2)) ||
        failed(n.expectAttributes({{"axes", Kind::Ints},
                                         {"keepdims", Kind::Int},
                                         {"noop_with_empty_axes", Kind::Int}})))
      return failure();
    SmallVector<NamedAttribute> attrs;
    n.copyInt(attrs, "keepdims");
    n.copyInt(attrs, "noop_with_empty_axes");
    SmallVector<Value> operands{n.input(0)};
    if (Value axes = axesOperand(n, 1, axesInputSince))
      operands.push_back(axes);
    return n.create(opName, operands, attrs, 1);
  };
}

NodeHandler squeeze(const char *opName, bool axesRequired) {
  return [=](NodeImporter &n) -> Values {
    if (failed(n.expectInputs(1, 2)) || failed(n.expectAttributes({{"axes", Kind::Ints}})))
      return failure();
    SmallVector<Value> operands{n.input(0)};
    if (Value axes = axesOperand(n, 1, 13))
      operands.push_back(axes);
    else if (axesRequired)
      return n.error() << n.node.op_type() << " needs axes";
    return n.create(opName, operands, {}, 1);
  };
}

NodeHandler softmax(const char *opName) {
  return [=](NodeImporter &n) -> Values {
    if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes({{"axis", Kind::Int}})))
      return failure();
    int64_t axis = n.getInt("axis", n.version < 13 ? 1 : -1);
    if (n.version < 13) {
      // Before opset 13 the input is coerced to 2-D at `axis`; this equals
      // the newer per-axis form only when `axis` is the last dim.
      auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
      if (!type)
        return n.error() << n.node.op_type() << "-" << n.version << " needs a ranked input";
      if (axis != -1 && axis != type.getRank() - 1)
        return n.error() << n.node.op_type() << "-" << n.version << " with axis " << axis
                         << " on a rank-" << type.getRank()
                         << " input (flattening semantics) is not supported";
      axis = -1;
    }
    SmallVector<NamedAttribute> attrs{
        n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(axis))};
    return n.create(opName, {n.input(0)}, attrs, 1);
  };
}

Values importBatchNorm(NodeImporter &n) {
  if (failed(n.expectInputs(5, 5)) ||
      failed(n.expectAttributes({{"epsilon", Kind::Float},
                                  {"momentum", Kind::Float},
                                  {"training_mode", Kind::Int}})))
    return failure();
  // Before opset 14 a training-mode node may also list saved_mean and
  // saved_var; the importer rejects them only where a node consumes them.
  unsigned outputs = std::min(3u, n.numOutputs());
  bool training = n.version >= 14 ? n.getInt("training_mode", 0) != 0 : outputs > 1;
  if (outputs == 2)
    return n.error() << "BatchNormalization with running_mean but no running_var";
  SmallVector<NamedAttribute> attrs;
  n.copyFloat(attrs, "epsilon");
  n.copyFloat(attrs, "momentum");
  attrs.push_back(n.builder.getNamedAttr("training_mode",
                                         n.builder.getI64IntegerAttr(training ? 1 : 0)));
  SmallVector<Value> operands;
  for (unsigned i = 0; i < 5; ++i)
    operands.push_back(n.input(i));
  return n.create("nn.batch_norm", operands, attrs, std::max(1u, outputs));
}

Values importDropout(NodeImporter &n) {
  if (failed(n.expectInputs(1, 3)) || failed(n.expectAttributes(
                     {{"ratio", Kind::Float}, {"seed", Kind::Int}, {"is_test", Kind::Int}})))
    return failure();
  Type element = cast<ShapedType>(n.input(0).getType()).getElementType();
  Value ratio = n.input(1), training = n.input(2);
  if (n.version < 12) {
    // Older Dropout is a no-op at inference, the only mode such exports use.
    ratio = n.constantScalar(n.getFloat("ratio", 0.5f), n.builder.getF32Type());
    training = n.constantBool(false);
  }
  if (!ratio)
    ratio = n.constantScalar(0.5, isa<FloatType>(element) ? element : n.builder.getF32Type());
  if (!training)
    training = n.constantBool(false);
  SmallVector<NamedAttribute> attrs;
  n.copyInt(attrs, "seed");
  return n.create("nn.dropout", {n.input(0), ratio, training}, attrs,
                  std::max(1u, n.numOutputs()));
}

Values importClip(NodeImporter &n) {
  if (failed(n.expectInputs(1, 3)) ||
      failed(n.expectAttributes({{"min", Kind::Float}, {"max", Kind::Float}})))
    return failure();
  Type element = cast<ShapedType>(n.input(0).getType()).getElementType();
  // Absent bounds are the element type's own extremes.
  auto bound = [&](bool lower) -> Value {
    if (auto intType = dyn_cast<IntegerType>(element)) {
      unsigned width = intType.getWidth();
      bool isUnsigned = intType.isUnsigned();
      APInt value = lower ? (isUnsigned ? APInt::getMinValue(width) : APInt::getSignedMinValue(width))
                          : (isUnsigned ? APInt::getMaxValue(width) : APInt::getSignedMaxValue(width));
      return n.constantInt(value, element);
    }
    return n.constantScalar(lower ? -std::numeric_limits<double>::infinity()
                                  : std::numeric_limits<double>::infinity(),
                            element);
  };
  Value min = n.input(1), max = n.input(2);
  if (n.version < 11) {
    // Clip-6 bounds are float attributes (its inputs are float tensors).
    min = n.attribute("min") ? n.constantScalar(n.getFloat("min", 0), element) : bound(true);
    max = n.attribute("max") ? n.constantScalar(n.getFloat("max", 0), element) : bound(false);
  }
  if (!min)
    min = bound(true);
  if (!max)
    max = bound(false);
  return n.create("nn.clip", {n.input(0), min, max}, {}, 1);
}

Values importSplit(NodeImporter &n) {
  if (failed(n.expectInputs(1, 2)) || failed(n.expectAttributes(
                     {{"axis", Kind::Int}, {"split", Kind::Ints}, {"num_outputs", Kind::Int}})))
    return failure();
  if (n.node.output_size() == 0)
    return n.error() << "Split needs at least one output";
  SmallVector<Value> operands{n.input(0)};
  if (n.version < 13) {
    if (auto sizes = n.getInts("split"))
      operands.push_back(n.constantI64(*sizes));
  } else if (n.input(1)) {
    operands.push_back(n.input(1));
  }
  if (operands.size() == 1 && n.version < 18) {
    // Before opset 18 a split without sizes must be even.
    auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
    int64_t axis = n.getInt("axis", 0);
    if (type && axis >= -type.getRank() && axis < type.getRank()) {
      int64_t dim = type.getDimSize(axis < 0 ? axis + type.getRank() : axis);
      if (!ShapedType::isDynamic(dim) && dim % n.node.output_size() != 0)
        return n.error() << "Split-" << n.version << " of a dim of " << dim << " into "
                         << n.node.output_size() << " equal parts";
    }
  }
  if (const auto *count = n.attribute("num_outputs"))
    if (count->i() != n.node.output_size())
      return n.error() << "Split has num_outputs " << count->i() << " but "
                       << n.node.output_size() << " outputs";
  SmallVector<NamedAttribute> attrs;
  n.copyInt(attrs, "axis");
  return n.create("nn.split", operands, attrs, n.node.output_size());
}

Values importSlice(NodeImporter &n) {
  if (failed(n.expectInputs(3, 5)) || failed(n.expectAttributes({})))
    return failure();
  Value axes = n.input(3), steps = n.input(4);
  if (!axes || !steps) {
    auto starts = dyn_cast<RankedTensorType>(n.input(1).getType());
    if (!starts || starts.getRank() != 1 || starts.isDynamicDim(0))
      return n.error() << "Slice without axes or steps needs 1-D starts of known size";
    int64_t count = starts.getDimSize(0);
    if (!axes) {
      SmallVector<int64_t> all;
      for (int64_t i = 0; i < count; ++i)
        all.push_back(i);
      axes = n.constantI64(all);
    }
    if (!steps)
      steps = n.constantI64(SmallVector<int64_t>(count, 1));
  }
  return n.create("nn.slice", {n.input(0), n.input(1), n.input(2), axes, steps}, {}, 1);
}

Values importPad(NodeImporter &n) {
  if (failed(n.expectInputs(1, 4)) || failed(n.expectAttributes(
                     {{"mode", Kind::String}, {"pads", Kind::Ints}, {"value", Kind::Float}})))
    return failure();
  Type element = cast<ShapedType>(n.input(0).getType()).getElementType();
  Value pads = n.input(1), value = n.input(2), axes = n.input(3);
  if (n.version < 11) {
    auto given = n.getInts("pads");
    if (!given)
      return n.error() << "Pad needs pads";
    pads = n.constantI64(*given);
    value = n.constantScalar(n.getFloat("value", 0.0f), element);
  }
  if (!pads)
    return n.error() << "Pad needs pads";
  if (!value)
    value = n.constantScalar(0.0, element);
  if (!axes) {
    auto type = dyn_cast<RankedTensorType>(n.input(0).getType());
    if (!type)
      return n.error() << "Pad without axes needs a ranked input";
    SmallVector<int64_t> all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    axes = n.constantI64(all);
  }
  SmallVector<NamedAttribute> attrs;
  n.copyString(attrs, "mode");
  return n.create("nn.pad", {n.input(0), pads, value, axes}, attrs, 1);
}

Values importCast(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes({{"to", Kind::Int, true}, {"saturate", Kind::Int}})))
    return failure();
  const auto *to = n.attribute("to");
  Type type = convertDataType(static_cast<int32_t>(to->i()), n.builder.getContext());
  if (!type)
    return n.error() << "Cast to unsupported data type " << to->i();
  return n.create("nn.cast", {n.input(0)},
                  {n.builder.getNamedAttr("to", TypeAttr::get(type))}, 1);
}

Values importConstant(NodeImporter &n) {
  if (failed(n.expectInputs(0, 0)))
    return failure();
  if (n.node.attribute_size() != 1)
    return n.error() << "Constant needs exactly one value attribute";
  const onnx::AttributeProto &attr = n.node.attribute(0);
  auto &b = n.builder;
  static const AttrSpec forms[] = {{"value", Kind::Tensor},      {"value_float", Kind::Float},
                                   {"value_floats", Kind::Floats}, {"value_int", Kind::Int},
                                   {"value_ints", Kind::Ints}};
  if (failed(n.expectAttributes(forms)))
    return failure();
  DenseElementsAttr value;
  if (attr.name() == "value") {
    auto converted = convertTensor(attr.t(), nullptr, -1, n.loc);
    if (failed(converted))
      return failure();
    value = *converted;
  } else if (attr.name() == "value_float") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getF32Type()), attr.f());
  } else if (attr.name() == "value_floats") {
    SmallVector<float> values(attr.floats().begin(), attr.floats().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, b.getF32Type()),
        llvm::ArrayRef<float>(values));
  } else if (attr.name() == "value_int") {
    value = DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   static_cast<int64_t>(attr.i()));
  } else if (attr.name() == "value_ints") {
    SmallVector<int64_t> values(attr.ints().begin(), attr.ints().end());
    value = DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(values.size())}, b.getI64Type()),
        llvm::ArrayRef<int64_t>(values));
  }
  return n.create("nn.constant", {}, {b.getNamedAttr("value", value)}, 1);
}

Values importConstantOfShape(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) || failed(n.expectAttributes({{"value", Kind::Tensor}})))
    return failure();
  DenseElementsAttr value;
  if (const auto *attr = n.attribute("value")) {
    auto converted = convertTensor(attr->t(), nullptr, -1, n.loc);
    if (failed(converted))
      return failure();
    value = *converted;
    if (value.getNumElements() != 1)
      return n.error() << "ConstantOfShape's value must hold one element";
  } else {
    value = DenseElementsAttr::get(RankedTensorType::get({1}, n.builder.getF32Type()), 0.0f);
  }
  return n.create("nn.constant_of_shape", {n.input(0)},
                  {n.builder.getNamedAttr("value", value)}, 1);
}

// Versions per op, from the ONNX changelog.
#define VERSIONS(...)                                                          \
  [] {                                                                         \
    static const int v[] = {__VA_ARGS__};                                      \
    return llvm::ArrayRef<int>(v);                                             \
  }()

const llvm::StringMap<OpSupport> &table() {
  static const llvm::StringMap<OpSupport> ops = [] {
    llvm::StringMap<OpSupport> t;
    const AddOp add = [&](const char *name, llvm::ArrayRef<int> versions, int minVersion,
                          NodeHandler handler) {
      t[name] = OpSupport{versions.vec(), minVersion, std::move(handler)};
    };
    const std::vector<AttrSpec> window = {{"auto_pad", Kind::String}, {"dilations", Kind::Ints},
                                          {"kernel_shape", Kind::Ints}, {"pads", Kind::Ints},
                                          {"strides", Kind::Ints}};
    // Pooling needs its window; a convolution reads it from the weight.
    std::vector<AttrSpec> pool = window;
    for (AttrSpec &spec : pool)
      spec.required = llvm::StringRef(spec.name) == "kernel_shape";
    auto with = [](std::vector<AttrSpec> a, std::vector<AttrSpec> b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    // Element-wise.
    add("Relu", VERSIONS(1, 6, 13, 14), 6, unary("nn.relu"));
    add("Erf", VERSIONS(9, 13), 9, unary("nn.erf"));
    add("Tanh", VERSIONS(1, 6, 13), 6, unary("nn.tanh"));
    add("Sigmoid", VERSIONS(1, 6, 13), 6, unary("nn.sigmoid"));
    add("Sqrt", VERSIONS(1, 6, 13), 6, unary("nn.sqrt"));
    add("Exp", VERSIONS(1, 6, 13), 6, unary("nn.exp"));
    add("Log", VERSIONS(1, 6, 13), 6, unary("nn.log"));
    add("Neg", VERSIONS(1, 6, 13), 6, unary("nn.neg"));
    add("Abs", VERSIONS(1, 6, 13), 6, unary("nn.abs"));
    add("Reciprocal", VERSIONS(1, 6, 13), 6, unary("nn.reciprocal"));
    add("Not", VERSIONS(1), 1, unary("nn.not"));
    add("Floor", VERSIONS(1, 6, 13), 6, unary("nn.floor"));
    add("Ceil", VERSIONS(1, 6, 13), 6, unary("nn.ceil"));
    add("Softplus", VERSIONS(1, 22), 1, unary("nn.softplus"));
    add("Sin", VERSIONS(7, 22), 7, unary("nn.sin"));
    add("Cos", VERSIONS(7, 22), 7, unary("nn.cos"));
    add("Tan", VERSIONS(7, 22), 7, unary("nn.tan"));
    add("Asin", VERSIONS(7, 22), 7, unary("nn.asin"));
    add("Acos", VERSIONS(7, 22), 7, unary("nn.acos"));
    add("Atan", VERSIONS(7, 22), 7, unary("nn.atan"));
    add("Sinh", VERSIONS(9, 22), 9, unary("nn.sinh"));
    add("Cosh", VERSIONS(9, 22), 9, unary("nn.cosh"));
    add("Asinh", VERSIONS(9, 22), 9, unary("nn.asinh"));
    add("Acosh", VERSIONS(9, 22), 9, unary("nn.acosh"));
    add("Atanh", VERSIONS(9, 22), 9, unary("nn.atanh"));
    add("Round", VERSIONS(11, 22), 11, unary("nn.round"));
    add("Sign", VERSIONS(9, 13), 9, unary("nn.sign"));
    add("Identity", VERSIONS(1, 13, 14, 16, 19, 21, 23), 1, unary("nn.identity"));
    add("HardSwish", VERSIONS(14, 22), 14, unary("nn.hard_swish"));
    add("Gelu", VERSIONS(20), 20, plain("nn.gelu", 1, 1, {{"approximate", Kind::String}}));
    add("LeakyRelu", VERSIONS(1, 6, 16), 6, plain("nn.leaky_relu", 1, 1, {{"alpha", Kind::Float}}));
    add("HardSigmoid", VERSIONS(1, 6, 22), 6,
        plain("nn.hard_sigmoid", 1, 1, {{"alpha", Kind::Float}, {"beta", Kind::Float}}));
    add("Cast", VERSIONS(1, 6, 9, 13, 19, 21, 23), 6, importCast);
    add("Clip", VERSIONS(1, 6, 11, 12, 13), 6, importClip);
    add("Add", VERSIONS(1, 6, 7, 13, 14), 7, binary("nn.add"));
    add("Sub", VERSIONS(1, 6, 7, 13, 14), 7, binary("nn.sub"));
    add("Mul", VERSIONS(1, 6, 7, 13, 14), 7, binary("nn.mul"));
    add("Div", VERSIONS(1, 6, 7, 13, 14), 7, binary("nn.div"));
    add("Mod", VERSIONS(10, 13), 10, plain("nn.mod", 2, 2, {{"fmod", Kind::Int}}));
    add("Equal", VERSIONS(1, 7, 11, 13, 19), 7, binary("nn.equal"));
    add("Less", VERSIONS(1, 7, 9, 13), 7, binary("nn.less"));
    add("LessOrEqual", VERSIONS(12, 16), 12, binary("nn.less_or_equal"));
    add("Greater", VERSIONS(1, 7, 9, 13), 7, binary("nn.greater"));
    add("GreaterOrEqual", VERSIONS(12, 16), 12, binary("nn.greater_or_equal"));
    add("And", VERSIONS(1, 7), 7, binary("nn.and"));
    add("Or", VERSIONS(1, 7), 7, binary("nn.or"));
    add("Max", VERSIONS(1, 6, 8, 12, 13), 8, variadic("nn.max"));
    add("Min", VERSIONS(1, 6, 8, 12, 13), 8, variadic("nn.min"));
    add("Sum", VERSIONS(1, 6, 8, 13), 8, variadic("nn.add"));
    add("Where", VERSIONS(9, 16), 9, plain("nn.where", 3, 3));
    // Linear algebra and windows.
    add("MatMul", VERSIONS(1, 9, 13), 1, binary("nn.matmul"));
    add("Gemm", VERSIONS(1, 6, 7, 9, 11, 13), 7,
        plain("nn.gemm", 2, 3,
              {{"alpha", Kind::Float}, {"beta", Kind::Float}, {"transA", Kind::Int},
               {"transB", Kind::Int}}));
    add("Conv", VERSIONS(1, 11, 22), 1, plain("nn.conv", 2, 3, with(window, {{"group", Kind::Int}})));
    add("MaxPool", VERSIONS(1, 8, 10, 11, 12, 22), 1,
        plain("nn.max_pool", 1, 1,
              with(pool, {{"ceil_mode", Kind::Int}, {"storage_order", Kind::Int}})));
    add("AveragePool", VERSIONS(1, 7, 10, 11, 19, 22), 1,
        plain("nn.average_pool", 1, 1,
              with(pool, {{"ceil_mode", Kind::Int}, {"count_include_pad", Kind::Int}})));
    add("GlobalAveragePool", VERSIONS(1, 22), 1, unary("nn.global_average_pool"));
    add("GlobalMaxPool", VERSIONS(1, 22), 1, unary("nn.global_max_pool"));
    // Normalisation.
    add("BatchNormalization", VERSIONS(1, 6, 7, 9, 14, 15), 9, importBatchNorm);
    add("LayerNormalization", VERSIONS(17), 17,
        [layerNorm = plain("nn.layer_norm", 2, 3,
                           {{"axis", Kind::Int}, {"epsilon", Kind::Float},
                            {"stash_type", Kind::Int}})](NodeImporter &n) -> Values {
          return n.numOutputs() > 1 ? importLayerNormWithStatistics(n) : layerNorm(n);
        });
    add("Softmax", VERSIONS(1, 11, 13), 1, softmax("nn.softmax"));
    add("LogSoftmax", VERSIONS(1, 11, 13), 1, softmax("nn.log_softmax"));
    add("Dropout", VERSIONS(1, 6, 7, 10, 12, 13, 22), 7, importDropout);
    // Reductions: axes became an input in opset 13 (ReduceSum) or 18.
    add("ReduceMean", VERSIONS(1, 11, 13, 18), 1, reduce("nn.reduce_mean", 18));
    add("ReduceSum", VERSIONS(1, 11, 13), 1, reduce("nn.reduce_sum", 13));
    add("ReduceMax", VERSIONS(1, 11, 12, 13, 18, 20), 1, reduce("nn.reduce_max", 18));
    add("ReduceMin", VERSIONS(1, 11, 12, 13, 18, 20), 1, reduce("nn.reduce_min", 18));
    add("ReduceProd", VERSIONS(1, 11, 13, 18), 1, reduce("nn.reduce_prod", 18));
    // Shape and data movement.
    add("Shape", VERSIONS(1, 13, 15, 19, 21, 23), 1,
        plain("nn.shape", 1, 1, {{"start", Kind::Int}, {"end", Kind::Int}}));
    add("Reshape", VERSIONS(1, 5, 13, 14, 19, 21, 23), 5,
        plain("nn.reshape", 2, 2, {{"allowzero", Kind::Int}}));
    add("Flatten", VERSIONS(1, 9, 11, 13, 21, 23), 1, plain("nn.flatten", 1, 1, {{"axis", Kind::Int}}));
    add("Squeeze", VERSIONS(1, 11, 13, 21, 23), 1, squeeze("nn.squeeze", false));
    add("Unsqueeze", VERSIONS(1, 11, 13, 21, 23), 1, squeeze("nn.unsqueeze", true));
    add("Transpose", VERSIONS(1, 13, 21, 23), 1, plain("nn.transpose", 1, 1, {{"perm", Kind::Ints}}));
    add("Concat", VERSIONS(1, 4, 11, 13), 4, plain("nn.concat", 1, 1u << 16, {{"axis", Kind::Int, true}}));
    add("Split", VERSIONS(1, 2, 11, 13, 18), 2, importSplit);
    add("Slice", VERSIONS(1, 10, 11, 13), 10, importSlice);
    add("Gather", VERSIONS(1, 11, 13), 1, plain("nn.gather", 2, 2, {{"axis", Kind::Int}}));
    add("Expand", VERSIONS(8, 13), 8, binary("nn.expand"));
    add("Tile", VERSIONS(1, 6, 13), 6, binary("nn.tile"));
    add("Pad", VERSIONS(1, 2, 11, 13, 18, 19, 21, 23), 2, importPad);
    add("Trilu", VERSIONS(14), 14, plain("nn.trilu", 1, 2, {{"upper", Kind::Int}}));
    add("Constant", VERSIONS(1, 9, 11, 12, 13, 19, 21, 23), 1, importConstant);
    add("ConstantOfShape", VERSIONS(9, 20, 21, 23), 9, importConstantOfShape);
    add("Range", VERSIONS(11), 11, plain("nn.range", 3, 3));
    // Functions of the ops above (activations, reductions, Mean, Size, CastLike).
    addCompositeOps(add);
    addIndexOps(add);
    addEinsum(add);
    addResize(add);
    addControlFlow(add);
    addRecurrent(add);
    addSpectral(add);
    addSampling(add);
    addDeterminant(add);
    return t;
  }();
  return ops;
}
} // namespace

const OpSupport *pipe::onnx_import::lookupOp(llvm::StringRef opType) {
  auto it = table().find(opType);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> pipe::onnx_import::supportedOpTypes() {
  std::vector<std::string> names;
  for (const auto &entry : table())
    names.push_back(entry.getKey().str());
  std::sort(names.begin(), names.end());
  return names;
}
