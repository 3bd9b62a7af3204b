//===- NodeImporter.h - importing one ONNX node -----------------*- C++ -*-===//
//
// The state a per-op handler sees while importing one node: its inputs as
// values, typed access to its attributes, and helpers that create nn ops
// (inferring and folding each one at once, so later handlers see shapes).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_IMPORT_ONNX_NODEIMPORTER_H
#define PIPE_LIB_IMPORT_ONNX_NODEIMPORTER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringSet.h"
#include <onnx/onnx_pb.h>

#include <functional>
#include <optional>
#include <vector>

namespace pipe::onnx_import {

/// The MLIR element type of an ONNX TensorProto data type, or null.
mlir::Type convertDataType(int32_t dataType, mlir::MLIRContext *context);

/// The typed value field of `tensor` that holds values (float_data, ...), or null.
const char *tensorDataField(const onnx::TensorProto &tensor);

/// Checks a tensor whose values are in a typed field: one field at most, suited
/// to the data type, holding exactly `count` values (ONNX's checker rules).
mlir::LogicalResult checkTypedData(const onnx::TensorProto &tensor, int64_t count,
                                   mlir::Location loc);

/// An ONNX tensor (typed fields or raw little-endian bytes) as an attribute;
/// `rawBytes` overrides the proto's raw_data when given.
mlir::FailureOr<mlir::DenseElementsAttr>
convertTensor(const onnx::TensorProto &tensor, const char *rawBytes, int64_t rawLength,
              mlir::Location loc);

/// The ONNX attribute types handlers read (AttributeProto.AttributeType).
enum class AttrKind { Int, Float, String, Ints, Floats, Strings, Tensor, Graph };

/// An attribute an op takes: its name, its type per the op's schema, and
/// whether the node must give it.
struct AttrSpec {
  const char *name;
  AttrKind kind;
  bool required = false;
};

/// Checks an attribute's type as ONNX's checker does: at most one value field,
/// the declared type agreeing with it (models before IR version 2 declare none;
/// the one field filled says it), and that type being `expected`. Returns an
/// empty string when it is fine, else the reason, e.g. "is a string, not a
/// float".
std::string checkAttributeKind(const onnx::AttributeProto &attr, AttrKind expected);

class NodeImporter;

/// Imports the subgraphs of control-flow nodes (If, Loop, Scan) into the graph
/// being imported, which is what unrolling them takes.
class SubgraphImporter {
public:
  virtual ~SubgraphImporter() = default;
  /// Imports `graph`'s nodes in the scope of `parent`'s graph, its inputs
  /// bound to `inputs`, and returns the values of its outputs. The ops are
  /// named `<parent's node>/<scope>/<node>`; the names the subgraph defines
  /// are forgotten afterwards, so a loop body can be imported once per
  /// iteration.
  virtual mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  importSubgraph(const NodeImporter &parent, const onnx::GraphProto &graph,
                 mlir::ValueRange inputs, llvm::StringRef scope) = 0;
};

class NodeImporter {
public:
  NodeImporter(const onnx::NodeProto &node, int64_t version, int64_t opset,
               mlir::Location loc, mlir::OpBuilder &builder,
               llvm::SmallVector<mlir::Value> inputs, SubgraphImporter &subgraphs)
      : node(node), version(version), opset(opset), loc(loc), builder(builder),
        subgraphs(subgraphs), inputs(std::move(inputs)) {}

  const onnx::NodeProto &node;
  /// The version of the op that the model's opset selects, and the opset.
  const int64_t version, opset;
  const mlir::Location loc;
  mlir::OpBuilder &builder;
  /// Where control-flow handlers import their subgraphs.
  SubgraphImporter &subgraphs;

  /// Input `i`, or null when it is absent or given as "".
  mlir::Value input(unsigned i) const { return i < inputs.size() ? inputs[i] : nullptr; }
  unsigned numInputs() const { return inputs.size(); }
  /// Number of outputs, not counting trailing "" ones.
  unsigned numOutputs() const;

  /// Errors unless min <= inputs <= max and inputs [0, min) are present.
  mlir::LogicalResult expectInputs(unsigned min, unsigned max);
  /// Errors on any attribute not in `known`, on one of another type than its
  /// spec says, and on a required one the node does not give. The typed getters
  /// below may only read attributes checked this way.
  mlir::LogicalResult expectAttributes(llvm::ArrayRef<AttrSpec> known);

  const onnx::AttributeProto *attribute(llvm::StringRef name) const;
  int64_t getInt(llvm::StringRef name, int64_t dflt) const;
  float getFloat(llvm::StringRef name, float dflt) const;
  std::string getString(llvm::StringRef name, llvm::StringRef dflt) const;
  std::optional<llvm::SmallVector<int64_t>> getInts(llvm::StringRef name) const;
  /// A graph attribute (checked by expectAttributes), or null when absent.
  const onnx::GraphProto *getGraph(llvm::StringRef name) const;

  /// `name = value` attributes for the nn op, converted from the node's.
  void copyInt(llvm::SmallVectorImpl<mlir::NamedAttribute> &attrs, llvm::StringRef name);
  void copyFloat(llvm::SmallVectorImpl<mlir::NamedAttribute> &attrs, llvm::StringRef name);
  void copyString(llvm::SmallVectorImpl<mlir::NamedAttribute> &attrs, llvm::StringRef name);
  void copyInts(llvm::SmallVectorImpl<mlir::NamedAttribute> &attrs, llvm::StringRef name);

  /// Constants the importer adds to normalise old opsets and absent inputs.
  mlir::Value constantI64(llvm::ArrayRef<int64_t> values, bool scalar = false);
  mlir::Value constantScalar(double value, mlir::Type elementType);
  mlir::Value constantInt(const llvm::APInt &value, mlir::Type elementType);
  mlir::Value constantBool(bool value);

  /// Creates `opName` with placeholder result types, infers and folds it.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  create(llvm::StringRef opName, mlir::ValueRange operands,
         llvm::ArrayRef<mlir::NamedAttribute> attrs, unsigned numResults);

  mlir::InFlightDiagnostic error() const;

private:
  llvm::SmallVector<mlir::Value> inputs;
};

/// A handler imports one node; it returns the values of the node's outputs.
using NodeHandler =
    std::function<mlir::FailureOr<llvm::SmallVector<mlir::Value>>(NodeImporter &)>;

struct OpSupport {
  /// Every version of the op in the ONNX changelog up to `kNewestKnownOpset`.
  std::vector<int> versions;
  /// The oldest version the handler understands.
  int minVersion;
  NodeHandler handler;
};

/// The newest default-domain opset whose op versions the table lists.
constexpr int64_t kNewestKnownOpset = 23;

/// The handler table, keyed by ONNX op type; null when the op is unsupported.
const OpSupport *lookupOp(llvm::StringRef opType);

/// The sorted list of supported op types (for messages and docs).
std::vector<std::string> supportedOpTypes();

} // namespace pipe::onnx_import

#endif // PIPE_LIB_IMPORT_ONNX_NODEIMPORTER_H
