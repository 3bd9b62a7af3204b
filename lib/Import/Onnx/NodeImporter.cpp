//===- NodeImporter.cpp - importing one ONNX node -------------------------===//
#include "NodeImporter.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/Support/Endian.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

Type pipe::onnx_import::convertDataType(int32_t dataType, MLIRContext *context) {
  Builder b(context);
  switch (dataType) {
  case onnx::TensorProto::FLOAT: return b.getF32Type();
  case onnx::TensorProto::DOUBLE: return b.getF64Type();
  case onnx::TensorProto::FLOAT16: return b.getF16Type();
  case onnx::TensorProto::BFLOAT16: return b.getBF16Type();
  case onnx::TensorProto::INT8: return b.getIntegerType(8);
  case onnx::TensorProto::INT16: return b.getIntegerType(16);
  case onnx::TensorProto::INT32: return b.getIntegerType(32);
  case onnx::TensorProto::INT64: return b.getIntegerType(64);
  case onnx::TensorProto::UINT8: return b.getIntegerType(8, /*isSigned=*/false);
  case onnx::TensorProto::UINT16: return b.getIntegerType(16, false);
  case onnx::TensorProto::UINT32: return b.getIntegerType(32, false);
  case onnx::TensorProto::UINT64: return b.getIntegerType(64, false);
  case onnx::TensorProto::BOOL: return b.getIntegerType(1);
  case 17: return Float8E4M3FNType::get(context);   // FLOAT8E4M3FN (ONNX 1.14)
  case 18: return Float8E4M3FNUZType::get(context); // FLOAT8E4M3FNUZ
  case 19: return Float8E5M2Type::get(context);     // FLOAT8E5M2
  case 20: return Float8E5M2FNUZType::get(context); // FLOAT8E5M2FNUZ
  default: return {};
  }
}

const char *pipe::onnx_import::tensorDataField(const onnx::TensorProto &tensor) {
  if (tensor.float_data_size()) return "float_data";
  if (tensor.int32_data_size()) return "int32_data";
  if (tensor.string_data_size()) return "string_data";
  if (tensor.int64_data_size()) return "int64_data";
  if (tensor.double_data_size()) return "double_data";
  if (tensor.uint64_data_size()) return "uint64_data";
  return nullptr;
}

LogicalResult pipe::onnx_import::checkTypedData(const onnx::TensorProto &tensor, int64_t count,
                                                Location loc) {
  using T = onnx::TensorProto;
  struct Field {
    const char *name;
    int size;
    bool holds; // whether the field may hold the tensor's data type
  };
  const int32_t dt = tensor.data_type();
  // Which field carries which data type: onnx/onnx.proto, TensorProto.
  const Field fields[] = {
      {"float_data", tensor.float_data_size(), dt == T::FLOAT},
      {"int32_data", tensor.int32_data_size(),
       dt == T::INT32 || dt == T::INT16 || dt == T::INT8 || dt == T::UINT16 ||
           dt == T::UINT8 || dt == T::BOOL || dt == T::FLOAT16 || dt == T::BFLOAT16 ||
           (dt >= 17 && dt <= 20)}, // the FLOAT8 types
      {"string_data", tensor.string_data_size(), dt == T::STRING},
      {"int64_data", tensor.int64_data_size(), dt == T::INT64},
      {"double_data", tensor.double_data_size(), dt == T::DOUBLE},
      {"uint64_data", tensor.uint64_data_size(), dt == T::UINT32 || dt == T::UINT64},
  };
  const Field *used = nullptr;
  for (const Field &field : fields) {
    if (field.size == 0)
      continue;
    if (used)
      return emitError(loc) << "tensor '" << tensor.name() << "' holds values in both "
                            << used->name << " and " << field.name;
    used = &field;
  }
  if (!used) {
    if (count == 0)
      return success();
    return emitError(loc) << "tensor '" << tensor.name() << "' holds no data (its shape needs "
                          << count << " values)";
  }
  if (!used->holds)
    return emitError(loc) << "tensor '" << tensor.name() << "' of data type " << dt
                          << " stores its values in " << used->name
                          << ", which holds other types";
  if (used->size != count)
    return emitError(loc) << "tensor '" << tensor.name() << "' holds " << used->size
                          << " values in " << used->name << ", its shape needs " << count;
  return success();
}

FailureOr<DenseElementsAttr>
pipe::onnx_import::convertTensor(const onnx::TensorProto &tensor, const char *rawBytes,
                                 int64_t rawLength, Location loc) {
  MLIRContext *context = loc.getContext();
  Type element = convertDataType(tensor.data_type(), context);
  if (!element)
    return emitError(loc) << "tensor '" << tensor.name() << "' has unsupported data type "
                          << tensor.data_type();
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  int64_t count = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(count, d, &count) || count > (int64_t(1) << 40))
      return emitError(loc) << "tensor '" << tensor.name() << "' has an invalid shape";
  auto type = RankedTensorType::get(shape, element);
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
    return emitError(loc) << "tensor '" << tensor.name()
                          << "' keeps its data externally, which is only supported "
                             "for initializers";
  if (!rawBytes && tensor.has_raw_data()) {
    rawBytes = tensor.raw_data().data();
    rawLength = static_cast<int64_t>(tensor.raw_data().size());
  }
  unsigned bits = element.getIntOrFloatBitWidth();
  unsigned bytes = element.isInteger(1) ? 1 : (bits + 7) / 8;
  auto sizeError = [&](int64_t have) {
    return emitError(loc) << "tensor '" << tensor.name() << "' holds " << have
                          << " values, its shape needs " << count;
  };
  if (!rawBytes && failed(checkTypedData(tensor, count, loc)))
    return failure();
  if (rawBytes && tensorDataField(tensor))
    return emitError(loc) << "tensor '" << tensor.name() << "' holds its values both in "
                          << "raw_data and in " << tensorDataField(tensor);
  SmallVector<APInt> ints;
  if (rawBytes) {
    if (rawLength != count * static_cast<int64_t>(bytes))
      return sizeError(rawLength / std::max(1u, bytes));
    for (int64_t i = 0; i < count; ++i) {
      uint64_t word = 0;
      for (unsigned k = 0; k < bytes; ++k)
        word |= static_cast<uint64_t>(static_cast<uint8_t>(rawBytes[i * bytes + k])) << (8 * k);
      ints.push_back(APInt(bits, element.isInteger(1) ? (word != 0) : word));
    }
  } else if (tensor.float_data_size()) {
    if (tensor.float_data_size() != count)
      return sizeError(tensor.float_data_size());
    for (float f : tensor.float_data())
      ints.push_back(APFloat(f).bitcastToAPInt());
  } else if (tensor.double_data_size()) {
    if (tensor.double_data_size() != count)
      return sizeError(tensor.double_data_size());
    for (double d : tensor.double_data())
      ints.push_back(APFloat(d).bitcastToAPInt());
  } else if (tensor.int64_data_size()) {
    if (tensor.int64_data_size() != count)
      return sizeError(tensor.int64_data_size());
    for (int64_t v : tensor.int64_data())
      ints.push_back(APInt(bits, v, /*isSigned=*/true, /*implicitTrunc=*/true));
  } else if (tensor.uint64_data_size()) {
    if (tensor.uint64_data_size() != count)
      return sizeError(tensor.uint64_data_size());
    for (uint64_t v : tensor.uint64_data())
      ints.push_back(APInt(bits, v, false, true));
  } else if (tensor.int32_data_size()) {
    // int32_data also carries the bits of int8/16, uint8/16, bool and float16.
    if (tensor.int32_data_size() != count)
      return sizeError(tensor.int32_data_size());
    for (int32_t v : tensor.int32_data())
      ints.push_back(element.isInteger(1)
                         ? APInt(1, v != 0)
                         : APInt(bits, static_cast<uint64_t>(static_cast<int64_t>(v)), false,
                                 true));
  }
  if (auto floatType = dyn_cast<FloatType>(element)) {
    SmallVector<APFloat> floats;
    for (const APInt &v : ints)
      floats.push_back(APFloat(floatType.getFloatSemantics(), v));
    return DenseElementsAttr::get(type, floats);
  }
  return DenseElementsAttr::get(type, ints);
}

unsigned NodeImporter::numOutputs() const {
  unsigned n = node.output_size();
  while (n > 0 && node.output(n - 1).empty())
    --n;
  return n;
}

InFlightDiagnostic NodeImporter::error() const { return emitError(loc); }

LogicalResult NodeImporter::expectInputs(unsigned min, unsigned max) {
  if (numInputs() < min || numInputs() > max)
    return error() << node.op_type() << " takes " << min
                   << (min == max ? "" : (" to " + std::to_string(max)))
                   << " inputs, the node has " << numInputs();
  for (unsigned i = 0; i < min; ++i)
    if (!input(i))
      return error() << node.op_type() << " input #" << i << " is required";
  return success();
}

namespace {
using AttributeType = onnx::AttributeProto::AttributeType;

const char *typeName(AttributeType type) {
  switch (type) {
  case onnx::AttributeProto::FLOAT: return "a float";
  case onnx::AttributeProto::INT: return "an int";
  case onnx::AttributeProto::STRING: return "a string";
  case onnx::AttributeProto::TENSOR: return "a tensor";
  case onnx::AttributeProto::GRAPH: return "a graph";
  case onnx::AttributeProto::SPARSE_TENSOR: return "a sparse tensor";
  case onnx::AttributeProto::TYPE_PROTO: return "a type";
  case onnx::AttributeProto::FLOATS: return "a list of floats";
  case onnx::AttributeProto::INTS: return "a list of ints";
  case onnx::AttributeProto::STRINGS: return "a list of strings";
  case onnx::AttributeProto::TENSORS: return "a list of tensors";
  case onnx::AttributeProto::GRAPHS: return "a list of graphs";
  case onnx::AttributeProto::SPARSE_TENSORS: return "a list of sparse tensors";
  case onnx::AttributeProto::TYPE_PROTOS: return "a list of types";
  default: return "of an unknown type";
  }
}

AttributeType typeOf(AttrKind kind) {
  switch (kind) {
  case AttrKind::Int: return onnx::AttributeProto::INT;
  case AttrKind::Float: return onnx::AttributeProto::FLOAT;
  case AttrKind::String: return onnx::AttributeProto::STRING;
  case AttrKind::Ints: return onnx::AttributeProto::INTS;
  case AttrKind::Floats: return onnx::AttributeProto::FLOATS;
  case AttrKind::Strings: return onnx::AttributeProto::STRINGS;
  case AttrKind::Tensor: return onnx::AttributeProto::TENSOR;
  case AttrKind::Graph: return onnx::AttributeProto::GRAPH;
  }
  return onnx::AttributeProto::UNDEFINED;
}
} // namespace

std::string pipe::onnx_import::checkAttributeKind(const onnx::AttributeProto &attr,
                                                  AttrKind expected) {
  // The value fields that hold something (onnx/onnx.proto, AttributeProto).
  SmallVector<AttributeType, 2> filled;
  if (attr.has_f()) filled.push_back(onnx::AttributeProto::FLOAT);
  if (attr.has_i()) filled.push_back(onnx::AttributeProto::INT);
  if (attr.has_s()) filled.push_back(onnx::AttributeProto::STRING);
  if (attr.has_t()) filled.push_back(onnx::AttributeProto::TENSOR);
  if (attr.has_g()) filled.push_back(onnx::AttributeProto::GRAPH);
  if (attr.has_sparse_tensor()) filled.push_back(onnx::AttributeProto::SPARSE_TENSOR);
  if (attr.has_tp()) filled.push_back(onnx::AttributeProto::TYPE_PROTO);
  if (attr.floats_size()) filled.push_back(onnx::AttributeProto::FLOATS);
  if (attr.ints_size()) filled.push_back(onnx::AttributeProto::INTS);
  if (attr.strings_size()) filled.push_back(onnx::AttributeProto::STRINGS);
  if (attr.tensors_size()) filled.push_back(onnx::AttributeProto::TENSORS);
  if (attr.graphs_size()) filled.push_back(onnx::AttributeProto::GRAPHS);
  if (attr.sparse_tensors_size()) filled.push_back(onnx::AttributeProto::SPARSE_TENSORS);
  if (attr.type_protos_size()) filled.push_back(onnx::AttributeProto::TYPE_PROTOS);
  if (filled.size() > 1)
    return std::string("holds both ") + typeName(filled[0]) + " and " + typeName(filled[1]);
  AttributeType type = attr.type();
  if (type == onnx::AttributeProto::UNDEFINED) {
    if (filled.empty())
      return "has no type and no value";
    type = filled.front();
  } else if (!filled.empty() && filled.front() != type) {
    return std::string("is declared ") + typeName(type) + " but holds " +
           typeName(filled.front());
  }
  if (type != typeOf(expected))
    return std::string("is ") + typeName(type) + ", not " + typeName(typeOf(expected));
  return "";
}

LogicalResult NodeImporter::expectAttributes(llvm::ArrayRef<AttrSpec> known) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    const AttrSpec *spec =
        llvm::find_if(known, [&](const AttrSpec &s) { return attr.name() == s.name; });
    if (spec == known.end())
      return error() << "unsupported attribute '" << attr.name() << "' on " << node.op_type()
                     << " (opset " << opset << ")";
    std::string problem = checkAttributeKind(attr, spec->kind);
    if (!problem.empty())
      return error() << "attribute '" << attr.name() << "' of " << node.op_type() << " "
                     << problem;
  }
  for (const AttrSpec &spec : known)
    if (spec.required && !attribute(spec.name))
      return error() << node.op_type() << " needs the attribute '" << spec.name << "'";
  return success();
}

const onnx::AttributeProto *NodeImporter::attribute(llvm::StringRef name) const {
  for (const onnx::AttributeProto &attr : node.attribute())
    if (attr.name() == name)
      return &attr;
  return nullptr;
}

int64_t NodeImporter::getInt(llvm::StringRef name, int64_t dflt) const {
  const auto *attr = attribute(name);
  return attr ? attr->i() : dflt;
}

float NodeImporter::getFloat(llvm::StringRef name, float dflt) const {
  const auto *attr = attribute(name);
  return attr ? attr->f() : dflt;
}

std::string NodeImporter::getString(llvm::StringRef name, llvm::StringRef dflt) const {
  const auto *attr = attribute(name);
  return attr ? attr->s() : dflt.str();
}

const onnx::GraphProto *NodeImporter::getGraph(llvm::StringRef name) const {
  const auto *attr = attribute(name);
  return attr ? &attr->g() : nullptr;
}

std::optional<SmallVector<int64_t>> NodeImporter::getInts(llvm::StringRef name) const {
  const auto *attr = attribute(name);
  if (!attr)
    return std::nullopt;
  return SmallVector<int64_t>(attr->ints().begin(), attr->ints().end());
}

void NodeImporter::copyInt(SmallVectorImpl<NamedAttribute> &attrs, llvm::StringRef name) {
  if (const auto *attr = attribute(name))
    attrs.push_back(builder.getNamedAttr(name, builder.getI64IntegerAttr(attr->i())));
}
void NodeImporter::copyFloat(SmallVectorImpl<NamedAttribute> &attrs, llvm::StringRef name) {
  if (const auto *attr = attribute(name))
    attrs.push_back(builder.getNamedAttr(name, builder.getF32FloatAttr(attr->f())));
}
void NodeImporter::copyString(SmallVectorImpl<NamedAttribute> &attrs, llvm::StringRef name) {
  if (const auto *attr = attribute(name))
    attrs.push_back(builder.getNamedAttr(name, builder.getStringAttr(attr->s())));
}
void NodeImporter::copyInts(SmallVectorImpl<NamedAttribute> &attrs, llvm::StringRef name) {
  if (auto values = getInts(name))
    attrs.push_back(builder.getNamedAttr(name, builder.getDenseI64ArrayAttr(*values)));
}

Value NodeImporter::constantI64(llvm::ArrayRef<int64_t> values, bool scalar) {
  SmallVector<int64_t> shape;
  if (!scalar)
    shape.push_back(values.size());
  auto type = RankedTensorType::get(shape, builder.getIntegerType(64));
  return nn::ConstantOp::create(builder, loc, type, DenseIntElementsAttr::get(type, values));
}

Value NodeImporter::constantScalar(double value, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute attr;
  if (auto floatType = dyn_cast<FloatType>(elementType)) {
    APFloat f(value);
    bool lost;
    f.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
    attr = DenseElementsAttr::get(type, f);
  } else {
    attr = DenseElementsAttr::get(
        type, APInt(elementType.getIntOrFloatBitWidth(), static_cast<int64_t>(value), true));
  }
  return nn::ConstantOp::create(builder, loc, type, cast<ElementsAttr>(attr));
}

Value NodeImporter::constantInt(const APInt &value, Type elementType) {
  auto type = RankedTensorType::get({}, elementType);
  return nn::ConstantOp::create(builder, loc, type, DenseElementsAttr::get(type, value));
}

Value NodeImporter::constantBool(bool value) {
  auto type = RankedTensorType::get({}, builder.getI1Type());
  return nn::ConstantOp::create(builder, loc, type,
                                DenseElementsAttr::get(type, builder.getBoolAttr(value)));
}

FailureOr<SmallVector<Value>> NodeImporter::create(llvm::StringRef opName,
                                                   ValueRange operands,
                                                   llvm::ArrayRef<NamedAttribute> attrs,
                                                   unsigned numResults) {
  OperationState state(loc, opName);
  state.addOperands(operands);
  // Every attribute of an nn op is inherent, stored as a property.
  if (!attrs.empty())
    state.propertiesAttr = builder.getDictionaryAttr(attrs);
  state.addTypes(SmallVector<Type>(numResults, UnrankedTensorType::get(builder.getF32Type())));
  Operation *op = builder.create(state);
  return nn::inferAndFold(op, builder);
}
