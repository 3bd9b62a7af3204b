//===- OnnxImporter.cpp - ONNX model to the nn dialect --------------------===//
//
// Graph inputs become function arguments (symbolic dims bound by the
// options), initializers become nn.param ops (integer ones used for shape
// arithmetic become nn.constant), nodes become nn ops through the handler
// table, graph outputs are returned. Every op is located at its node's name.
//
//===----------------------------------------------------------------------===//
#include "pipe/Import/Onnx/OnnxImporter.h"

#include "ModelFile.h"
#include "NodeImporter.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace pipe;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
/// Integer initializers up to this size are shape arithmetic, not weights.
constexpr int64_t kMaxIntegerConstantElements = 4096;

class GraphImporter {
public:
  GraphImporter(ModelFile &file, MLIRContext *context, const ImportOptions &options,
                llvm::StringRef path)
      : file(file), context(context), options(options), path(path),
        fileLoc(FileLineColLoc::get(context, path, 0, 0)), builder(context) {}

  OwningOpRef<ModuleOp> run();

private:
  Location nameLoc(llvm::StringRef name) {
    return NameLoc::get(StringAttr::get(context, name), fileLoc);
  }
  LogicalResult findOpset();
  FailureOr<Type> inputType(const onnx::ValueInfoProto &input);
  LogicalResult importInitializer(const InitializerData &data);
  LogicalResult importNode(const onnx::NodeProto &node, size_t index);
  LogicalResult define(llvm::StringRef name, Value value, Location loc);

  ModelFile &file;
  MLIRContext *context;
  const ImportOptions &options;
  llvm::StringRef path;
  Location fileLoc;
  OpBuilder builder;
  int64_t opset = 0;
  llvm::StringMap<Value> values;
  /// Names that some node or graph output consumes.
  llvm::StringSet<> used;
};

LogicalResult GraphImporter::findOpset() {
  for (const onnx::OperatorSetIdProto &id : file.model.opset_import())
    if (id.domain().empty() || id.domain() == "ai.onnx")
      opset = id.version();
  if (opset == 0 && file.model.opset_import_size() == 0 && file.model.ir_version() < 3)
    opset = 1; // IR version 1-2 models carry no opset_import: opset 1.
  if (opset <= 0)
    return emitError(fileLoc) << "the model imports no default-domain opset";
  if (opset > kNewestKnownOpset)
    emitWarning(fileLoc) << "opset " << opset << " is newer than the newest this importer "
                         << "knows (" << kNewestKnownOpset
                         << "); ops are assumed unchanged since then";
  return success();
}

FailureOr<Type> GraphImporter::inputType(const onnx::ValueInfoProto &input) {
  Location loc = nameLoc(input.name());
  if (!input.type().has_tensor_type())
    return emitError(loc) << "input '" << input.name() << "' is not a tensor";
  const auto &tensorType = input.type().tensor_type();
  Type element = convertDataType(tensorType.elem_type(), context);
  if (!element)
    return emitError(loc) << "input '" << input.name() << "' has unsupported element type "
                          << tensorType.elem_type();
  if (!tensorType.has_shape())
    return emitError(loc) << "input '" << input.name() << "' has no shape (unknown rank)";
  SmallVector<int64_t> shape;
  for (int i = 0; i < tensorType.shape().dim_size(); ++i) {
    const auto &dim = tensorType.shape().dim(i);
    if (dim.has_dim_value() && dim.dim_value() >= 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
    auto bound = options.dims.find(symbol);
    if (!symbol.empty() && bound != options.dims.end()) {
      shape.push_back(bound->second);
    } else if (i == 0 && options.microBatchSize) {
      shape.push_back(*options.microBatchSize);
    } else {
      auto diag = emitError(loc) << "input '" << input.name() << "' dim " << i;
      if (!symbol.empty())
        diag << " ('" << symbol << "')";
      diag << " is dynamic; bind it with "
           << (i == 0 ? "--micro-batch-size=N or " : "") << "--dim "
           << (symbol.empty() ? std::string("NAME") : symbol) << "=N";
      return failure();
    }
  }
  return Type(RankedTensorType::get(shape, element));
}

LogicalResult GraphImporter::define(llvm::StringRef name, Value value, Location loc) {
  if (!values.try_emplace(name, value).second)
    return emitError(loc) << "value '" << name << "' is defined twice";
  return success();
}

LogicalResult GraphImporter::importInitializer(const InitializerData &data) {
  const onnx::TensorProto &tensor = data.tensor;
  Location loc = nameLoc(tensor.name());
  Type element = convertDataType(tensor.data_type(), context);
  if (!element)
    return emitError(loc) << "initializer '" << tensor.name()
                          << "' has unsupported data type " << tensor.data_type();
  SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  int64_t elements = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
      return emitError(loc) << "initializer '" << tensor.name()
                            << "' has an invalid shape (a negative dim or too many elements)";
  auto type = RankedTensorType::get(shape, element);
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  if (isa<IntegerType>(element) && !external &&
      type.getNumElements() <= kMaxIntegerConstantElements) {
    auto value = convertTensor(tensor, data.rawBytes, data.rawLength, loc);
    if (failed(value))
      return failure();
    return define(tensor.name(), nn::ConstantOp::create(builder, loc, type, *value), loc);
  }
  int64_t byteSize;
  if (__builtin_mul_overflow(elements,
                             std::max<int64_t>(1, (element.getIntOrFloatBitWidth() + 7) / 8),
                             &byteSize))
    return emitError(loc) << "initializer '" << tensor.name() << "' is too large";
  std::string source = "inline", dataPath;
  int64_t offset = -1, length = -1;
  if (external) {
    source = "external";
    offset = 0;
    length = byteSize;
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      if (entry.key() == "location") {
        dataPath = entry.value();
        continue;
      }
      if (entry.key() != "offset" && entry.key() != "length")
        continue;
      int64_t value;
      if (llvm::StringRef(entry.value()).getAsInteger(10, value) || value < 0)
        return emitError(loc) << "initializer '" << tensor.name() << "' has an invalid "
                              << entry.key() << " '" << entry.value() << "'";
      (entry.key() == "offset" ? offset : length) = value;
    }
    if (dataPath.empty())
      return emitError(loc) << "initializer '" << tensor.name()
                            << "' is external but names no data file";
    llvm::SmallString<256> full(llvm::sys::path::parent_path(path));
    llvm::sys::path::append(full, dataPath);
    uint64_t fileSize = 0;
    if (llvm::sys::fs::file_size(full, fileSize))
      return emitError(loc) << "initializer '" << tensor.name() << "': external data file '"
                            << full << "' cannot be read";
    int64_t end;
    if (__builtin_add_overflow(offset, length, &end) || static_cast<uint64_t>(end) > fileSize)
      return emitError(loc) << "initializer '" << tensor.name() << "' needs bytes [" << offset
                            << ", " << offset + length << ") of '" << full
                            << "', which has " << fileSize;
  } else if (data.rawOffset >= 0) {
    source = "file";
    offset = data.rawOffset;
    length = data.rawLength;
  }
  if (length >= 0 && length != byteSize)
    return emitError(loc) << "initializer '" << tensor.name() << "' has " << length
                          << " bytes, its shape and type need " << byteSize;
  auto param = nn::ParamOp::create(builder, loc, type, builder.getStringAttr(tensor.name()),
                                   builder.getStringAttr(source),
                                   builder.getStringAttr(dataPath),
                                   builder.getI64IntegerAttr(offset),
                                   builder.getI64IntegerAttr(length),
                                   builder.getBoolAttr(!isa<IntegerType>(element)));
  return define(tensor.name(), param, loc);
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node, size_t index) {
  std::string name = nodeDisplayName(node.name(), node.op_type(), index);
  Location loc = nameLoc(name);
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return emitError(loc) << "unsupported op '" << node.domain() << "." << node.op_type()
                          << "' (custom domain)";
  const OpSupport *support = lookupOp(node.op_type());
  if (!support)
    return emitError(loc) << "unsupported op '" << node.op_type() << "' (opset " << opset
                          << ")";
  int version = 0;
  for (int v : support->versions)
    if (v <= opset)
      version = v;
  if (version == 0)
    return emitError(loc) << "op '" << node.op_type() << "' does not exist in opset " << opset
                          << " (it was introduced in opset " << support->versions.front()
                          << ")";
  if (version < support->minVersion)
    return emitError(loc) << "op '" << node.op_type() << "' version " << version << " (opset "
                          << opset << ") is not supported; the oldest supported version is "
                          << support->minVersion;
  SmallVector<Value> inputs;
  for (const std::string &input : node.input()) {
    if (input.empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = values.find(input);
    if (it == values.end())
      return emitError(loc) << "input '" << input << "' of " << node.op_type()
                            << " is not defined before the node";
    inputs.push_back(it->second);
  }
  NodeImporter importer(node, version, opset, loc, builder, std::move(inputs));
  auto results = support->handler(importer);
  if (failed(results))
    return failure();
  for (int i = 0; i < node.output_size(); ++i) {
    if (node.output(i).empty())
      continue;
    if (static_cast<size_t>(i) >= results->size()) {
      if (!used.contains(node.output(i)))
        continue;
      return emitError(loc) << node.op_type() << " output #" << i << " ('" << node.output(i)
                            << "') is used but not supported";
    }
    if (failed(define(node.output(i), (*results)[i], loc)))
      return failure();
  }
  return success();
}

OwningOpRef<ModuleOp> GraphImporter::run() {
  if (failed(findOpset()))
    return nullptr;
  const onnx::GraphProto &graph = file.model.graph();
  if (graph.sparse_initializer_size())
    return emitError(fileLoc) << "sparse initializers are not supported", nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  llvm::StringMap<const InitializerData *> initializers;
  for (const InitializerData &data : file.initializers)
    initializers[data.tensor.name()] = &data;

  SmallVector<Type> argTypes;
  SmallVector<const onnx::ValueInfoProto *> args;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (initializers.count(input.name()))
      continue; // Old exports list initializers as inputs too.
    auto type = inputType(input);
    if (failed(type))
      return nullptr;
    argTypes.push_back(*type);
    args.push_back(&input);
  }
  auto func = func::FuncOp::create(builder, fileLoc, options.functionName,
                                   builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  builder.setInsertionPointToStart(entry);
  for (auto [arg, info] : llvm::zip(entry->getArguments(), args)) {
    arg.setLoc(nameLoc(info->name()));
    if (failed(define(info->name(), arg, nameLoc(info->name()))))
      return nullptr;
  }
  SmallVector<Attribute> argNames;
  for (const auto *info : args)
    argNames.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("onnx.name", builder.getStringAttr(info->name()))));
  func.setAllArgAttrs(argNames);

  // Only initializers that nodes use are imported (exports also carry
  // unused buffers such as batch-norm's num_batches_tracked).
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &input : node.input())
      used.insert(input);
  for (const onnx::ValueInfoProto &output : graph.output())
    used.insert(output.name());
  for (const InitializerData &data : file.initializers)
    if (used.contains(data.tensor.name()) && failed(importInitializer(data)))
      return nullptr;

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index)))
      return nullptr;

  SmallVector<Value> results;
  SmallVector<Attribute> resultNames;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    auto it = values.find(output.name());
    if (it == values.end())
      return emitError(nameLoc(output.name()))
                 << "graph output '" << output.name() << "' is never computed",
             nullptr;
    results.push_back(it->second);
    resultNames.push_back(builder.getDictionaryAttr(
        builder.getNamedAttr("onnx.name", builder.getStringAttr(output.name()))));
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  func.setAllResultAttrs(resultNames);

  // Batch-norm running statistics are buffers, not trained parameters.
  func.walk([](nn::BatchNormOp op) {
    for (Value stat : {op.getMean(), op.getVar()})
      if (auto param = stat.getDefiningOp<nn::ParamOp>())
        param.setTrainable(false);
  });

  if (failed(nn::inferShapesInFunction(func, options.inferShapes)))
    return nullptr;
  if (failed(verify(*module)))
    return nullptr;
  return module;
}
} // namespace

std::string pipe::onnx_import::nodeDisplayName(llvm::StringRef name, llvm::StringRef opType,
                                               size_t index) {
  return name.empty() ? (opType + "_" + llvm::Twine(index)).str() : name.str();
}

std::vector<std::string> pipe::onnx_import::supportedOnnxOps() { return supportedOpTypes(); }

bool pipe::onnx_import::isOnnxFile(llvm::StringRef path) {
  return path.ends_with(".onnx") || path.ends_with(".onnxtext");
}

OwningOpRef<ModuleOp> pipe::onnx_import::importOnnxFile(llvm::StringRef path,
                                                        MLIRContext *context,
                                                        const ImportOptions &options) {
  context->loadDialect<nn::NNDialect, func::FuncDialect>();
  std::string error;
  auto file = readModelFile(path, error);
  if (!file) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << error;
    return nullptr;
  }
  GraphImporter importer(*file, context, options, path);
  return importer.run();
}
