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
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace pipe;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
/// Integer initializers up to this size are shape arithmetic, not weights.
constexpr int64_t kMaxIntegerConstantElements = 4096;

/// Calls `fn` on each graph that `node`'s attributes hold (If's branches, a
/// Loop's or Scan's body), with the attribute's name.
void forEachSubgraph(const onnx::NodeProto &node,
                     llvm::function_ref<void(llvm::StringRef, const onnx::GraphProto &)> fn) {
  for (const onnx::AttributeProto &attr : node.attribute()) {
    if (attr.has_g())
      fn(attr.name(), attr.g());
    for (const onnx::GraphProto &graph : attr.graphs())
      fn(attr.name(), graph);
  }
}

class GraphImporter : public SubgraphImporter {
public:
  GraphImporter(ModelFile &file, MLIRContext *context, const ImportOptions &options,
                llvm::StringRef path)
      : file(file), context(context), options(options), path(path),
        fileLoc(FileLineColLoc::get(context, path, 0, 0)), builder(context) {}

  OwningOpRef<ModuleOp> run();

  FailureOr<SmallVector<Value>> importSubgraph(const NodeImporter &parent,
                                               const onnx::GraphProto &graph, ValueRange inputs,
                                               llvm::StringRef scope) override;

private:
  Location nameLoc(llvm::StringRef name) {
    return NameLoc::get(StringAttr::get(context, name), fileLoc);
  }
  LogicalResult findOpset();
  FailureOr<Type> inputType(const onnx::ValueInfoProto &input);
  LogicalResult importInitializer(const InitializerData &data);
  /// The path of an initializer's external data file, checked to lie inside the
  /// model's folder.
  FailureOr<std::string> externalDataFile(llvm::StringRef tensorName,
                                          llvm::StringRef location, Location loc);
  /// Imports `node`, the `index`th of its graph; `prefix` names the scope of a
  /// subgraph's node ("If_0/then/").
  LogicalResult importNode(const onnx::NodeProto &node, size_t index, llvm::StringRef prefix);
  /// Why the importer cannot take `node`'s op ("unsupported op 'X' (opset
  /// N)"), or nothing when it can; `version` is the op version it would use.
  std::optional<std::string> unsupported(const onnx::NodeProto &node, int &version) const;
  /// Every unsupported op of the graph at once: one error per distinct op,
  /// at its first node, with the number of nodes.
  LogicalResult checkOpsSupported(const onnx::GraphProto &graph);
  /// Adds the names that `graph`'s nodes and outputs consume, subgraphs
  /// included, to `used`.
  void collectUsed(const onnx::GraphProto &graph);
  /// `--dim NAME=V` names a symbolic dim of a graph input, and does not bind
  /// a batch dim that `--micro-batch-size` binds to another size.
  LogicalResult checkDimBindings(const onnx::GraphProto &graph);
  LogicalResult define(llvm::StringRef name, Value value, Location loc);
  /// Names are UTF-8 and node names unique, in `graph` and its subgraphs.
  LogicalResult checkNames(const onnx::GraphProto &graph);
  /// A graph output's declared element type and static dims match what the
  /// model computes.
  LogicalResult checkDeclaredOutput(const onnx::ValueInfoProto &output, Type computed);

  ModelFile &file;
  MLIRContext *context;
  const ImportOptions &options;
  llvm::StringRef path;
  Location fileLoc;
  OpBuilder builder;
  int64_t opset = 0;
  llvm::StringMap<Value> values;
  /// The names the subgraph being imported defines (null outside one): they
  /// leave `values` when it ends.
  std::vector<std::string> *scopeNames = nullptr;
  /// Names that some node or graph output consumes.
  llvm::StringSet<> used;
};

LogicalResult GraphImporter::findOpset() {
  // One entry per domain ("" and "ai.onnx" are the same), as ONNX's checker requires.
  llvm::StringMap<int64_t> versions;
  for (const onnx::OperatorSetIdProto &id : file.model.opset_import()) {
    std::string domain = id.domain() == "ai.onnx" ? "" : id.domain();
    auto [it, inserted] = versions.try_emplace(domain, id.version());
    if (!inserted)
      return emitError(fileLoc) << "opset_import lists the domain '"
                                << (domain.empty() ? "ai.onnx" : llvm::json::fixUTF8(domain))
                                << "' twice (versions " << it->second << " and "
                                << id.version() << ")";
    if (domain.empty())
      opset = id.version();
  }
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
    if (dim.has_dim_value() && dim.dim_value() == 0)
      return emitError(loc) << "input '" << input.name() << "' dim " << i
                            << " is 0: a tensor without elements cannot be trained on";
    if (dim.has_dim_value() && dim.dim_value() > 0) {
      shape.push_back(dim.dim_value());
      continue;
    }
    std::string symbol = dim.has_dim_param() ? dim.dim_param() : "";
    auto bound = options.dims.find(symbol);
    std::optional<int64_t> size;
    if (!symbol.empty() && bound != options.dims.end())
      size = bound->second;
    else if (i == 0 && options.microBatchSize)
      size = *options.microBatchSize;
    if (size) {
      if (*size < 1)
        return emitError(loc) << "input '" << input.name() << "' dim " << i
                              << " is bound to " << *size << "; sizes must be at least 1";
      shape.push_back(*size);
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
  if (!nn::isWithinSizeLimits(shape))
    return emitError(loc) << "input '" << input.name()
                          << "' is larger than the size limits (dims up to 2^40, 2^48 "
                             "elements)";
  return Type(RankedTensorType::get(shape, element));
}

LogicalResult GraphImporter::define(llvm::StringRef name, Value value, Location loc) {
  if (!values.try_emplace(name, value).second)
    return emitError(loc) << "value '" << name << "' is defined twice";
  if (scopeNames)
    scopeNames->push_back(name.str());
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
  if (!nn::isWithinSizeLimits(shape))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "' is larger than the size limits (dims up to 2^40, 2^48 "
                             "elements)";
  auto type = RankedTensorType::get(shape, element);
  bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
  if (!external && tensor.external_data_size() > 0)
    return emitError(loc) << "initializer '" << tensor.name()
                          << "' lists external_data but its data_location is not EXTERNAL";
  if (external && (data.rawBytes || tensorDataField(tensor)))
    return emitError(loc) << "initializer '" << tensor.name()
                          << "' is stored externally and also holds data in the model";
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
  nn::ParamSource source = nn::ParamSource::inline_;
  std::string dataPath;
  int64_t offset = -1, length = -1;
  if (external) {
    source = nn::ParamSource::external;
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
                              << entry.key() << " '" << llvm::json::fixUTF8(entry.value())
                              << "'";
      (entry.key() == "offset" ? offset : length) = value;
    }
    auto full = externalDataFile(tensor.name(), dataPath, loc);
    if (failed(full))
      return failure();
    uint64_t fileSize = 0;
    if (llvm::sys::fs::file_size(*full, fileSize))
      return emitError(loc) << "initializer '" << tensor.name() << "': external data file '"
                            << *full << "' cannot be read";
    int64_t end;
    if (__builtin_add_overflow(offset, length, &end) || static_cast<uint64_t>(end) > fileSize)
      return emitError(loc) << "initializer '" << tensor.name() << "' needs bytes [" << offset
                            << ", " << offset + length << ") of '" << *full
                            << "', which has " << fileSize;
  } else if (data.rawBytes) {
    if (data.rawOffset >= 0) {
      source = nn::ParamSource::file;
      offset = data.rawOffset;
    }
    length = data.rawLength;
    if (tensorDataField(tensor))
      return emitError(loc) << "initializer '" << tensor.name() << "' holds its values both in "
                            << "raw_data and in " << tensorDataField(tensor);
  } else {
    // Values in a typed field (float_data, ...): the field must suit the data
    // type and hold exactly one value per element, as ONNX's checker requires.
    if (failed(checkTypedData(tensor, elements, loc)))
      return failure();
  }
  if (length >= 0 && length != byteSize)
    return emitError(loc) << "initializer '" << tensor.name() << "' has " << length
                          << " bytes, its shape and type need " << byteSize;
  auto param = nn::ParamOp::create(builder, loc, type, builder.getStringAttr(tensor.name()),
                                   nn::ParamSourceAttr::get(builder.getContext(), source),
                                   builder.getStringAttr(dataPath),
                                   builder.getI64IntegerAttr(offset),
                                   builder.getI64IntegerAttr(length),
                                   builder.getBoolAttr(!isa<IntegerType>(element)));
  return define(tensor.name(), param, loc);
}

FailureOr<std::string> GraphImporter::externalDataFile(llvm::StringRef tensorName,
                                                       llvm::StringRef location, Location loc) {
  // ONNX's rules for external data (onnx/checker.cc, resolve_external_data_location):
  // a relative path without "..", naming a regular file inside the model's folder.
  // Symbolic links are resolved before the containment check, so none leads out.
  auto refuse = [&](const llvm::Twine &why) {
    return emitError(loc) << "initializer '" << tensorName << "': external data location '"
                          << llvm::json::fixUTF8(location) << "' " << why;
  };
  if (location.empty())
    return emitError(loc) << "initializer '" << tensorName
                          << "' is external but names no data file";
  if (location.contains('\0'))
    return refuse("contains a NUL byte");
  if (!llvm::json::isUTF8(location))
    return refuse("is not valid UTF-8");
  if (llvm::sys::path::is_absolute(location, llvm::sys::path::Style::posix))
    return refuse("is absolute; it must be relative to the model's folder");
  for (auto it = llvm::sys::path::begin(location, llvm::sys::path::Style::posix),
            end = llvm::sys::path::end(location);
       it != end; ++it)
    if (*it == "..")
      return refuse("contains '..'; it must stay inside the model's folder");
  llvm::SmallString<256> folder(llvm::sys::path::parent_path(path));
  if (folder.empty())
    folder = ".";
  llvm::SmallString<256> full(folder);
  llvm::sys::path::append(full, location);
  llvm::SmallString<256> realFolder, realFile;
  if (llvm::sys::fs::real_path(folder, realFolder))
    return emitError(loc) << "initializer '" << tensorName << "': the model's folder '"
                          << folder << "' cannot be resolved";
  if (llvm::sys::fs::real_path(full, realFile))
    return emitError(loc) << "initializer '" << tensorName << "': external data file '" << full
                          << "' cannot be read";
  llvm::StringRef inside(realFile);
  if (realFile == realFolder)
    return refuse("names the model's folder, not a file");
  if (!inside.consume_front(realFolder) || !inside.starts_with("/"))
    return refuse("resolves outside the model's folder (through a symbolic link)");
  if (!llvm::sys::fs::is_regular_file(realFile))
    return refuse("is not a regular file");
  return full.str().str();
}

std::optional<std::string> GraphImporter::unsupported(const onnx::NodeProto &node,
                                                      int &version) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (!node.domain().empty() && node.domain() != "ai.onnx") {
    os << "unsupported op '" << node.domain() << "." << node.op_type() << "' (custom domain)";
    return text;
  }
  const OpSupport *support = lookupOp(node.op_type());
  if (!support) {
    os << "unsupported op '" << node.op_type() << "' (opset " << opset << ")";
    return text;
  }
  version = 0;
  for (int v : support->versions)
    if (v <= opset)
      version = v;
  if (version == 0) {
    os << "op '" << node.op_type() << "' does not exist in opset " << opset
       << " (it was introduced in opset " << support->versions.front() << ")";
    return text;
  }
  if (version < support->minVersion) {
    os << "op '" << node.op_type() << "' version " << version << " (opset " << opset
       << ") is not supported; the oldest supported version is " << support->minVersion;
    return text;
  }
  return std::nullopt;
}

LogicalResult GraphImporter::checkOpsSupported(const onnx::GraphProto &graph) {
  struct Unsupported {
    std::string reason, firstNode;
    int nodes = 0;
  };
  // One entry per reason (it names the op), in order of first appearance.
  std::vector<Unsupported> found;
  llvm::StringMap<size_t> indexOf;
  // A subgraph's node is named after its control-flow node and attribute.
  std::function<void(const onnx::GraphProto &, const std::string &)> visit =
      [&](const onnx::GraphProto &g, const std::string &prefix) {
        for (auto [index, node] : llvm::enumerate(g.node())) {
          std::string name = prefix + nodeDisplayName(node.name(), node.op_type(), index);
          forEachSubgraph(node, [&](llvm::StringRef attr, const onnx::GraphProto &sub) {
            visit(sub, name + "/" + attr.str() + "/");
          });
          int version = 0;
          std::optional<std::string> reason = unsupported(node, version);
          if (!reason)
            continue;
          auto [it, first] = indexOf.try_emplace(*reason, found.size());
          if (first)
            found.push_back({*reason, name, 0});
          ++found[it->second].nodes;
        }
      };
  visit(graph, "");
  for (const Unsupported &entry : found) {
    InFlightDiagnostic diag = emitError(nameLoc(entry.firstNode)) << entry.reason;
    if (entry.nodes > 1)
      diag << ", in " << entry.nodes << " nodes (the first here)";
  }
  return failure(!found.empty());
}

LogicalResult GraphImporter::checkDimBindings(const onnx::GraphProto &graph) {
  if (options.dims.empty())
    return success();
  // Each symbolic dim of the graph's inputs, with where it first appears.
  std::vector<std::pair<std::string, std::string>> symbols;
  llvm::StringSet<> seen;
  for (const onnx::ValueInfoProto &input : graph.input()) {
    if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape())
      continue;
    const auto &shape = input.type().tensor_type().shape();
    for (int i = 0; i < shape.dim_size(); ++i) {
      const auto &dim = shape.dim(i);
      if (!dim.has_dim_param() || dim.has_dim_value() || dim.dim_param().empty())
        continue;
      if (seen.insert(dim.dim_param()).second)
        symbols.emplace_back(dim.dim_param(),
                             "input '" + input.name() + "' dim " + std::to_string(i));
      auto bound = options.dims.find(dim.dim_param());
      if (i == 0 && bound != options.dims.end() && options.microBatchSize &&
          *options.microBatchSize != bound->second)
        return emitError(nameLoc(input.name()))
               << "--dim " << dim.dim_param() << "=" << bound->second
               << " and --micro-batch-size=" << *options.microBatchSize << " both bind input '"
               << input.name() << "' dim 0; give one of them";
    }
  }
  for (const auto &binding : options.dims) {
    if (seen.contains(binding.getKey()))
      continue;
    auto diag = emitError(fileLoc) << "--dim " << binding.getKey()
                                   << ": the model has no symbolic dim of that name";
    if (symbols.empty()) {
      diag << "; its inputs have none";
    } else {
      std::string list;
      for (const auto &[symbol, where] : symbols)
        list += (list.empty() ? " '" : ", '") + symbol + "' (" + where + ")";
      diag << "; its symbolic dims are" << list;
    }
    return failure();
  }
  return success();
}

void GraphImporter::collectUsed(const onnx::GraphProto &graph) {
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &input : node.input())
      used.insert(input);
    forEachSubgraph(node, [&](llvm::StringRef, const onnx::GraphProto &g) {
      collectUsed(g);
      for (const onnx::ValueInfoProto &output : g.output())
        used.insert(output.name());
    });
  }
}

LogicalResult GraphImporter::importNode(const onnx::NodeProto &node, size_t index,
                                        llvm::StringRef prefix) {
  std::string name = (prefix + nodeDisplayName(node.name(), node.op_type(), index)).str();
  Location loc = nameLoc(name);
  int version = 0;
  if (std::optional<std::string> reason = unsupported(node, version))
    return emitError(loc) << *reason;
  const OpSupport *support = lookupOp(node.op_type());
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
  llvm::StringSet<> attributeNames;
  for (const onnx::AttributeProto &attr : node.attribute())
    if (!attributeNames.insert(attr.name()).second)
      return emitError(loc) << "attribute '" << llvm::json::fixUTF8(attr.name()) << "' of "
                            << node.op_type() << " is given twice";
  NodeImporter importer(node, version, opset, loc, builder, std::move(inputs), *this);
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

  if (failed(checkNames(graph)) || failed(checkOpsSupported(graph)) ||
      failed(checkDimBindings(graph)))
    return nullptr;
  if (graph.output_size() == 0)
    return emitError(fileLoc) << "the graph has no outputs: nothing would be computed",
           nullptr;

  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  llvm::StringMap<const InitializerData *> initializers;
  for (const InitializerData &data : file.initializers)
    if (!initializers.try_emplace(data.tensor.name(), &data).second)
      return emitError(nameLoc(data.tensor.name()))
                 << "initializer '" << data.tensor.name() << "' is defined twice",
             nullptr;

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
  collectUsed(graph);
  for (const onnx::ValueInfoProto &output : graph.output())
    used.insert(output.name());
  for (const InitializerData &data : file.initializers)
    if (used.contains(data.tensor.name()) && failed(importInitializer(data)))
      return nullptr;

  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index, "")))
      return nullptr;

  SmallVector<Value> results;
  SmallVector<Attribute> resultNames;
  llvm::StringSet<> outputNames;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    if (!outputNames.insert(output.name()).second)
      return emitError(nameLoc(output.name()))
                 << "graph output '" << output.name() << "' is listed twice",
             nullptr;
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
  if (options.inferShapes)
    for (auto [output, type] : llvm::zip(graph.output(), func.getResultTypes()))
      if (failed(checkDeclaredOutput(output, type)))
        return nullptr;
  return module;
}

LogicalResult GraphImporter::checkNames(const onnx::GraphProto &graph) {
  // Names become IR attributes, plan keys and JSON strings: ONNX requires
  // them to be UTF-8, and a byte that is not would surface far from here.
  auto check = [&](const std::string &name, const char *what) -> LogicalResult {
    size_t offset = 0;
    if (llvm::json::isUTF8(name, &offset))
      return success();
    return emitError(nameLoc(llvm::json::fixUTF8(name)))
           << what << " '" << llvm::json::fixUTF8(name) << "' is not valid UTF-8 (byte "
           << offset << ")";
  };
  for (const InitializerData &data : file.initializers)
    if (failed(check(data.tensor.name(), "initializer")))
      return failure();
  // The graph and each subgraph: a subgraph's nodes are named after their
  // control-flow node, so their names are unique within their own graph.
  std::function<LogicalResult(const onnx::GraphProto &)> checkGraph =
      [&](const onnx::GraphProto &g) -> LogicalResult {
    for (const onnx::ValueInfoProto &input : g.input())
      if (failed(check(input.name(), "graph input")))
        return failure();
    for (const onnx::ValueInfoProto &output : g.output())
      if (failed(check(output.name(), "graph output")))
        return failure();
    // Node names identify nodes in plans (stage_of) and in the written model.
    llvm::StringMap<size_t> nodeIndex;
    for (auto [index, node] : llvm::enumerate(g.node())) {
      if (failed(check(node.name(), "node name")) || failed(check(node.op_type(), "op type")) ||
          failed(check(node.domain(), "op domain")))
        return failure();
      for (const std::string &value : node.input())
        if (failed(check(value, "node input")))
          return failure();
      for (const std::string &value : node.output())
        if (failed(check(value, "node output")))
          return failure();
      std::string name = nodeDisplayName(node.name(), node.op_type(), index);
      auto [it, inserted] = nodeIndex.try_emplace(name, index);
      if (!inserted)
        return emitError(nameLoc(name)) << "nodes #" << it->second << " and #" << index
                                        << " are both named '" << name
                                        << "'; plans identify nodes by name";
      LogicalResult subgraphs = success();
      forEachSubgraph(node, [&](llvm::StringRef, const onnx::GraphProto &sub) {
        if (succeeded(subgraphs))
          subgraphs = checkGraph(sub);
      });
      if (failed(subgraphs))
        return failure();
    }
    return success();
  };
  return checkGraph(graph);
}

FailureOr<SmallVector<Value>> GraphImporter::importSubgraph(const NodeImporter &parent,
                                                            const onnx::GraphProto &graph,
                                                            ValueRange inputs,
                                                            llvm::StringRef scope) {
  std::string parentName = "node";
  if (auto name = dyn_cast<NameLoc>(parent.loc))
    parentName = name.getName().str();
  if (graph.input_size() != static_cast<int>(inputs.size()))
    return parent.error() << parent.node.op_type() << "'s subgraph (" << scope << ") has "
                          << graph.input_size() << " inputs, " << inputs.size() << " expected";
  if (graph.initializer_size() || graph.sparse_initializer_size())
    return parent.error() << parent.node.op_type() << "'s subgraph (" << scope
                          << ") has initializers; constants inside a subgraph must be "
                             "Constant nodes or initializers of the main graph";
  // Names defined here leave `values` at the end, whatever happens.
  std::vector<std::string> defined;
  std::vector<std::string> *outer = scopeNames;
  scopeNames = &defined;
  llvm::scope_exit restore([&] {
    scopeNames = outer;
    for (const std::string &name : defined)
      values.erase(name);
  });
  std::string prefix = parentName + "/" + scope.str() + "/";
  for (auto [info, value] : llvm::zip(graph.input(), inputs))
    if (failed(define(info.name(), value, nameLoc(prefix + info.name()))))
      return failure();
  for (auto [index, node] : llvm::enumerate(graph.node()))
    if (failed(importNode(node, index, prefix)))
      return failure();
  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &output : graph.output()) {
    auto it = values.find(output.name());
    if (it == values.end())
      return parent.error() << "output '" << output.name() << "' of " << parent.node.op_type()
                            << "'s subgraph (" << scope << ") is never computed";
    results.push_back(it->second);
  }
  return results;
}

LogicalResult GraphImporter::checkDeclaredOutput(const onnx::ValueInfoProto &output,
                                                 Type computed) {
  if (!output.has_type() || !output.type().has_tensor_type())
    return success();
  const auto &declared = output.type().tensor_type();
  auto type = dyn_cast<RankedTensorType>(computed);
  auto mismatch = [&](const llvm::Twine &what) {
    return emitError(nameLoc(output.name()))
           << "graph output '" << output.name() << "' is declared with " << what
           << ", but the model computes " << computed;
  };
  if (declared.elem_type() != onnx::TensorProto::UNDEFINED) {
    Type element = convertDataType(declared.elem_type(), context);
    if (!element)
      return mismatch("the unsupported element type " + llvm::Twine(declared.elem_type()));
    if (element != cast<ShapedType>(computed).getElementType()) {
      std::string text;
      llvm::raw_string_ostream os(text);
      os << "element type " << element;
      return mismatch(os.str());
    }
  }
  if (!declared.has_shape() || !type)
    return success();
  const auto &shape = declared.shape();
  if (shape.dim_size() != type.getRank())
    return mismatch("rank " + llvm::Twine(shape.dim_size()));
  for (int i = 0; i < shape.dim_size(); ++i) {
    const auto &dim = shape.dim(i);
    int64_t expected = -1;
    if (dim.has_dim_value())
      expected = dim.dim_value();
    else if (dim.has_dim_param() && options.dims.count(dim.dim_param()))
      expected = options.dims.lookup(dim.dim_param());
    if (expected >= 0 && !type.isDynamicDim(i) && type.getDimSize(i) != expected)
      return mismatch("dim " + llvm::Twine(i) + " = " + llvm::Twine(expected));
  }
  return success();
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

static OwningOpRef<ModuleOp> importModel(std::unique_ptr<ModelFile> file, std::string &error,
                                         llvm::StringRef path, MLIRContext *context,
                                         const ImportOptions &options) {
  if (!file) {
    emitError(FileLineColLoc::get(context, path, 0, 0)) << error;
    return nullptr;
  }
  GraphImporter importer(*file, context, options, path);
  return importer.run();
}

OwningOpRef<ModuleOp> pipe::onnx_import::importOnnxFile(llvm::StringRef path,
                                                        MLIRContext *context,
                                                        const ImportOptions &options) {
  context->loadDialect<nn::NNDialect, func::FuncDialect>();
  std::string error;
  auto file = readModelFile(path, error);
  OwningOpRef<ModuleOp> module = importModel(std::move(file), error, path, context, options);
  if (module) {
    llvm::SmallString<256> absolute(path);
    (void)llvm::sys::fs::make_absolute(absolute);
    context->getOrLoadDialect<nn::NNDialect>()->getModelFileAttrHelper().setAttr(
        *module, StringAttr::get(context, absolute));
  }
  return module;
}

OwningOpRef<ModuleOp> pipe::onnx_import::importOnnxBuffer(llvm::StringRef bytes,
                                                          llvm::StringRef path,
                                                          MLIRContext *context,
                                                          const ImportOptions &options) {
  context->loadDialect<nn::NNDialect, func::FuncDialect>();
  std::string error;
  auto file = readModelBuffer(llvm::MemoryBuffer::getMemBuffer(bytes, path,
                                                               /*RequiresNullTerminator=*/false),
                              path.ends_with(".onnxtext"), error);
  return importModel(std::move(file), error, path, context, options);
}
