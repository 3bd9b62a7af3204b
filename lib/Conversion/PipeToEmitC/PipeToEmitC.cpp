//===- PipeToEmitC.cpp - one C++ program per rank from a pipeline ---------===//
//
// Lowers a differentiated, scheduled pipe.pipeline to one emitc.file per rank.
// Each op becomes one call of the runtime C ABI (runtime/include/
// pipe_runtime.h) on tensors the program allocates with their static shape;
// every value is freed after its last use, and the forward hands the values
// its backward reads to saved slots (docs/runtime-abi.md). The program of a
// rank is straight-line code: its stages' forward and backward functions,
// then a step function that runs the rank's actions in the checked order of
// the pipeline's `order`, reduces tied gradients and updates the parameters
// the rank owns.
//
//===----------------------------------------------------------------------===//
#include "pipe/Conversion/Passes.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Threading.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <map>
#include <set>

namespace pipe {
#define GEN_PASS_DEF_CONVERTPIPETOEMITC
#include "pipe/Conversion/Passes.h.inc"
} // namespace pipe

using namespace mlir;
using namespace pipe;
using namespace pipe::pipeline;
namespace nn = pipe::nn;
using llvm::SmallVector;

namespace {

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

/// A C string literal; bytes outside printable ASCII are escaped.
std::string cString(StringRef text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      // Octal: unlike \x, it cannot swallow the digits that follow.
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\%03o", c);
      out += buffer;
    }
  }
  return out + "\"";
}

/// A double that reads back exactly; infinities as HUGE_VAL (math.h).
std::string number(double value) {
  if (std::isinf(value))
    return value < 0 ? "-HUGE_VAL" : "HUGE_VAL";
  if (std::isnan(value))
    return "NAN";
  return pipeline::formatDouble(value); // shortest text that reads back exactly
}

std::string ints(ArrayRef<int64_t> values) {
  std::string out = "PIPE_INTS(";
  for (auto [i, v] : llvm::enumerate(values))
    out += (i ? ", " : "") + std::to_string(v);
  return out + ")";
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// The runtime's dtype for an element type, or failure with an error.
FailureOr<std::string> dtypeName(Operation *where, Type element) {
  if (element.isF32())
    return std::string("PIPE_F32");
  if (element.isF64())
    return std::string("PIPE_F64");
  if (element.isF16())
    return std::string("PIPE_F16");
  if (element.isBF16())
    return std::string("PIPE_BF16");
  if (element.isInteger(64))
    return std::string("PIPE_I64");
  if (element.isInteger(32))
    return std::string("PIPE_I32");
  if (element.isInteger(1))
    return std::string("PIPE_BOOL");
  return where->emitOpError("has a value of element type ")
         << element << ", which the runtime cannot hold (f32, f64, f16, bf16, i64, i32, i1)";
}

std::string shortDtype(Type element) {
  if (element.isF32())
    return "f32";
  if (element.isF64())
    return "f64";
  if (element.isF16())
    return "f16";
  if (element.isBF16())
    return "bf16";
  if (element.isInteger(1))
    return "bool";
  if (auto integer = dyn_cast<IntegerType>(element))
    return "i" + std::to_string(integer.getWidth());
  return "unknown";
}

StringRef nodeNameOf(Operation *op) { return pipeline::nodeNameOf(op->getLoc()); }

//===----------------------------------------------------------------------===//
// Pipeline-wide tables: parameters, nodes, ranks
//===----------------------------------------------------------------------===//

struct Tables {
  int64_t ranks = 0;
  std::vector<int64_t> rankOfStage;
  std::vector<StageOp> stages;
  llvm::StringMap<int32_t> parameterIds;
  std::vector<ProgramParameter> parameters;
  llvm::StringMap<int32_t> nodeIds;
  std::vector<std::string> nodes;
  llvm::DenseMap<Operation *, int64_t> dropoutKeys;
  SmallVector<SmallVector<ActionAttr>> order;
};

/// Synthetic integer inputs must be valid indices where they are used as
/// such: the size of the gathered dim, the classes of a loss's labels or of
/// a comparison with the ids 0 .. K-1 (through views, casts and selects),
/// the smallest of these; 2 (0 or 1, a mask) otherwise.
int64_t integerRange(Value input) {
  int64_t range = 0;
  SmallVector<Value> work{input};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (OpOperand &use : v.getUses()) {
      Operation *user = use.getOwner();
      auto bound = [&](int64_t dim) { range = range == 0 ? dim : std::min(range, dim); };
      if (auto gather = dyn_cast<nn::GatherOp>(user); gather && use.getOperandNumber() == 1) {
        auto data = typeOf(gather.getInput());
        bound(data.getDimSize(*nn::normalizeAxis(gather.getAxis(), data.getRank())));
      } else if (auto loss = dyn_cast<nn::SoftmaxCrossEntropyLossOp>(user);
                 loss && use.getOperandNumber() == 1) {
        // The labels of a loss in the graph: classes are dim 1 of the scores.
        bound(typeOf(loss->getOperand(0)).getDimSize(1));
      } else if (isa<nn::EqualOp>(user)) {
        // Compared with the class ids 0 .. K-1 (an imported NegativeLogLikelihoodLoss
        // or OneHot picks its class this way).
        Value other = user->getOperand(1 - use.getOperandNumber());
        DenseElementsAttr ids;
        if (matchPattern(other, m_Constant(&ids)) && isa<IntegerType>(ids.getElementType()) &&
            ids.getNumElements() > 1) {
          int64_t k = 0;
          bool iota = true;
          for (const APInt &id : ids.getValues<APInt>())
            iota = iota && id.getSExtValue() == k++;
          if (iota)
            bound(k);
        }
      } else if (isa<nn::ReshapeOp, nn::FlattenOp, nn::SqueezeOp, nn::UnsqueezeOp,
                     nn::IdentityOp, nn::CastOp>(user) ||
                 (isa<nn::WhereOp>(user) && use.getOperandNumber() > 0)) {
        work.push_back(user->getResult(0));
      }
    }
  }
  return range == 0 ? 2 : range;
}

FailureOr<Tables> buildTables(PipelineOp pipeline) {
  Tables t;
  int64_t count = pipeline.getNumStages();
  t.stages.resize(count);
  t.rankOfStage.assign(count, 0);
  for (StageOp stage : pipeline.getBody().getOps<StageOp>()) {
    t.stages[stage.getIndex()] = stage;
    t.rankOfStage[stage.getIndex()] = stage.getDevice();
    t.ranks = std::max(t.ranks, stage.getDevice() + 1);
    if (stage.getBackward().empty())
      return stage.emitOpError("has no backward program (run pipe-differentiate first)");
  }
  if (!pipeline.getTrainingAttr())
    return pipeline.emitOpError("has no training set-up (run pipe-differentiate first)");
  ArrayAttr order = pipeline.getOrderAttr();
  if (!order)
    return pipeline.emitOpError("has no schedule order (run pipe-schedule first)");
  if (static_cast<int64_t>(order.size()) < t.ranks)
    return pipeline.emitOpError("the schedule orders ")
           << order.size() << " GPUs but the stages use " << t.ranks;
  t.ranks = std::max<int64_t>(t.ranks, order.size());
  for (Attribute list : order) {
    t.order.emplace_back();
    for (Attribute action : cast<ArrayAttr>(list))
      t.order.back().push_back(cast<ActionAttr>(action));
  }

  for (StageOp stage : t.stages) {
    for (Region *region : {&stage.getBody(), &stage.getBackward()}) {
      WalkResult walk = region->walk([&](Operation *op) -> WalkResult {
        if (StringRef node = nodeNameOf(op); !node.empty() && !t.nodeIds.count(node)) {
          t.nodeIds[node] = static_cast<int32_t>(t.nodes.size());
          t.nodes.push_back(node.str());
        }
        if (isa<nn::DropoutOp>(op))
          t.dropoutKeys[op] = static_cast<int64_t>(t.dropoutKeys.size());
        auto param = dyn_cast<ParamOp>(op);
        if (!param)
          return WalkResult::advance();
        auto it = t.parameterIds.find(param.getName());
        if (it != t.parameterIds.end()) {
          const ProgramParameter &known = t.parameters[it->second];
          if (ArrayRef<int64_t>(known.shape) != typeOf(param.getValue()).getShape() ||
              known.offset != param.getOffset() || known.source != param.getSource())
            return param.emitOpError("parameter '")
                   << param.getName() << "' is referenced with different types or bytes";
          return WalkResult::advance();
        }
        ProgramParameter p;
        p.id = static_cast<int32_t>(t.parameters.size());
        p.name = param.getName().str();
        p.source = param.getSource();
        p.path = param.getPath().str();
        p.offset = param.getOffset();
        p.length = param.getLength();
        p.trainable = param.getTrainable();
        p.dtype = shortDtype(typeOf(param.getValue()).getElementType());
        auto shape = typeOf(param.getValue()).getShape();
        p.shape.assign(shape.begin(), shape.end());
        if (param.getOwner() < 0 || param.getOwner() >= count)
          return param.emitOpError("owner stage ") << param.getOwner() << " does not exist";
        p.ownerRank = t.rankOfStage[param.getOwner()];
        std::set<int64_t> ranks;
        for (int64_t user : param.getUsers())
          if (user >= 0 && user < count)
            ranks.insert(t.rankOfStage[user]);
        p.ranks.assign(ranks.begin(), ranks.end());
        t.parameterIds[p.name] = p.id;
        t.parameters.push_back(std::move(p));
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
  }
  return t;
}

//===----------------------------------------------------------------------===//
// Emission of one rank
//===----------------------------------------------------------------------===//

/// One argument of a runtime call: an SSA value or literal C++ text.
struct Arg {
  Value value;
  std::string text;
  Arg(Value value) : value(value) {}
  Arg(std::string text) : text(std::move(text)) {}
  Arg(const char *text) : text(text) {}
  Arg(int64_t number) : text(std::to_string(number)) {}
};

class RankEmitter {
public:
  RankEmitter(Tables &tables, int64_t rank, emitc::FileOp file)
      : tables(tables), rank(rank), file(file), builder(file.getContext()) {
    MLIRContext *ctx = file.getContext();
    rankType = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "pipe_rank"));
    tensorType = emitc::PointerType::get(emitc::OpaqueType::get(ctx, "pipe_tensor"));
  }

  LogicalResult emit(PipelineOp pipeline);

  Tables &tables;
  int64_t rank;
  emitc::FileOp file;
  OpBuilder builder;
  ProgramMemory *memory = nullptr;
  Type rankType, tensorType;
  /// Constant data already emitted, by value, and the last of them (or the
  /// include before the first).
  llvm::DenseMap<Attribute, std::string> constants;
  Operation *constantsEnd = nullptr;

  /// A file-level array holding `data`'s elements bit for bit.
  FailureOr<std::string> constantArray(Operation *where, DenseElementsAttr data);
  emitc::FuncOp function(StringRef name, ArrayRef<Type> inputs, ArrayRef<Type> results,
                         bool isStatic);
  Value call(OpBuilder &b, Location loc, StringRef callee, ArrayRef<Arg> args,
             bool returnsTensor);
};

FailureOr<std::string> RankEmitter::constantArray(Operation *where, DenseElementsAttr data) {
  if (auto it = constants.find(data); it != constants.end())
    return it->second;
  std::string name = "pipe_constant" + std::to_string(constants.size());
  Type element = data.getElementType();
  std::string type;
  SmallVector<std::string> items;
  if (element.isF32()) {
    type = "uint32_t";
    for (APFloat f : data.getValues<APFloat>())
      items.push_back(llvm::formatv("{0:x}u", f.bitcastToAPInt().getZExtValue()).str());
  } else if (element.isF64()) {
    type = "uint64_t";
    for (APFloat f : data.getValues<APFloat>())
      items.push_back(llvm::formatv("{0:x}ull", f.bitcastToAPInt().getZExtValue()).str());
  } else if (element.isInteger(1)) {
    type = "uint8_t";
    for (APInt i : data.getValues<APInt>())
      items.push_back(i.isZero() ? "0" : "1");
  } else if (element.isInteger(64) || element.isInteger(32)) {
    type = element.isInteger(64) ? "int64_t" : "int32_t";
    for (APInt i : data.getValues<APInt>()) {
      int64_t v = i.getSExtValue();
      // The most negative value has no literal of its own in C++.
      items.push_back(v == INT64_MIN ? "(-9223372036854775807LL - 1)"
                                     : std::to_string(v) + (element.isInteger(64) ? "LL" : ""));
    }
  } else {
    return where->emitOpError("has a constant of element type ")
           << element << ", which the runtime cannot hold";
  }
  std::string text = "static const " + type + " " + name + "[" + std::to_string(items.size()) +
                     "] = {";
  for (auto [i, item] : llvm::enumerate(items))
    text += (i % 8 == 0 ? "\n    " : " ") + item + (i + 1 < items.size() ? "," : "");
  text += "};";
  // After the include and the constants already there, before any function.
  OpBuilder b(file.getContext());
  b.setInsertionPointAfter(constantsEnd);
  constantsEnd = emitc::VerbatimOp::create(b, where->getLoc(), b.getStringAttr(text));
  constants[data] = name;
  return name;
}

emitc::FuncOp RankEmitter::function(StringRef name, ArrayRef<Type> inputs,
                                    ArrayRef<Type> results, bool isStatic) {
  OpBuilder b = OpBuilder::atBlockEnd(&file.getBodyRegion().front());
  auto func = emitc::FuncOp::create(b, file.getLoc(), name,
                                    b.getFunctionType(inputs, results));
  if (isStatic)
    func.setSpecifiersAttr(b.getStrArrayAttr({"static"}));
  func.addEntryBlock();
  return func;
}

Value RankEmitter::call(OpBuilder &b, Location loc, StringRef callee, ArrayRef<Arg> args,
                        bool returnsTensor) {
  SmallVector<Value> operands;
  SmallVector<Attribute> order;
  for (const Arg &arg : args) {
    if (arg.value) {
      order.push_back(b.getIndexAttr(operands.size()));
      operands.push_back(arg.value);
    } else {
      order.push_back(emitc::OpaqueAttr::get(b.getContext(), arg.text));
    }
  }
  SmallVector<Type> results;
  if (returnsTensor)
    results.push_back(tensorType);
  auto op = emitc::CallOpaqueOp::create(b, loc, results, callee, operands,
                                        b.getArrayAttr(order), ArrayAttr());
  return returnsTensor ? op.getResult(0) : Value();
}

/// Emits one stage function (the forward or the backward of a stage).
class FunctionEmitter {
public:
  FunctionEmitter(RankEmitter &rank, StageOp stage, bool backward, emitc::FuncOp func)
      : rank(rank), stage(stage), backward(backward), func(func),
        b(OpBuilder::atBlockEnd(&func.getBody().front())) {}

  LogicalResult emit(Block &block);

private:
  Value r() { return func.getArgument(0); }
  Value mb() { return func.getArgument(1); }
  Value call(Location loc, StringRef callee, ArrayRef<Arg> args, bool returnsTensor = false) {
    return rank.call(b, loc, callee, args, returnsTensor);
  }
  /// The emitted value of `v`; constants and parameters are materialised at
  /// their first use as a tensor (most constants are shapes and axes the calls
  /// take as literals; a gradient accumulation names its parameter by id).
  Value get(Value v) {
    if (Value known = values.lookup(v))
      return known;
    if (auto constant = v.getDefiningOp<nn::ConstantOp>())
      if (succeeded(materialize(constant)))
        return values.lookup(v);
    if (auto param = v.getDefiningOp<ParamOp>()) {
      int32_t id = rank.tables.parameterIds.lookup(param.getName());
      values[v] = call(param.getLoc(), "pipe_param", {r(), static_cast<int64_t>(id)}, true);
      notOwned.insert(v);
      return values[v];
    }
    return Value();
  }
  LogicalResult materialize(nn::ConstantOp constant);
  Arg optional(Value v) { return v ? Arg(get(v)) : Arg("nullptr"); }
  FailureOr<Value> alloc(Operation *op, Value result);
  LogicalResult allocAll(Operation *op);
  LogicalResult lower(Operation *op);
  LogicalResult lowerNN(Operation *op);
  FailureOr<std::string> dtype(Operation *op, Value v) {
    return dtypeName(op, typeOf(v).getElementType());
  }
  std::string shape(Value v) { return ints(typeOf(v).getShape()); }
  int64_t rankOf(int64_t stageIndex) { return rank.tables.rankOfStage[stageIndex]; }
  void view(Operation *op, Value from, Value to) {
    values[to] = call(op->getLoc(), "pipe_view", {r(), get(from), shape(to)}, true);
    shareStorage(get(from), values[to]);
  }

public:
  /// The peaks of the replayed allocations, and the bytes handed to saved
  /// slots (see ProgramMemory).
  double peakWorkspace = 0, peakReceived = 0, savedBytes = 0;

private:
  // A replay of the program's allocations: each emitted tensor's storage,
  // shared by views, with its bytes and whether it is workspace or received.
  struct Storage {
    double bytes = 0;
    int references = 0;
    bool received = false;
    bool counted = true; ///< false once saved (it leaves the function)
  };
  void track(Value t, Value of, bool received);
  /// A kernel's scratch: live on top of the workspace while the kernel runs.
  void scratch(double bytes) { peakWorkspace = std::max(peakWorkspace, liveWorkspace + bytes); }
  void shareStorage(Value from, Value to);
  void dropReference(Value t);
  void leave(Value t);
  std::vector<Storage> storages;
  llvm::DenseMap<Value, size_t> storageOf;
  double liveWorkspace = 0, liveReceived = 0;

  RankEmitter &rank;
  StageOp stage;
  bool backward;
  emitc::FuncOp func;
  OpBuilder b;
  llvm::DenseMap<Value, Value> values;
  /// Values the function does not own: parameters, and values handed to
  /// saved slots.
  llvm::DenseSet<Value> notOwned;
  /// A forward's saved values not yet handed to their slot, and their slots (its
  /// pipe.return's list): each is saved as soon as it exists, and leaves the map.
  llvm::DenseMap<Value, int64_t> savedSlot;
  /// Hands `v` to its saved slot now if the forward saves it.
  void saveIfKept(Value v, Location at);
  int32_t currentNode = -1;
};

static double bytesOf(Value v) {
  auto type = typeOf(v);
  Type element = type.getElementType();
  double size = element.isInteger(1) ? 1 : std::max<unsigned>(1, element.getIntOrFloatBitWidth() / 8);
  return size * static_cast<double>(type.getNumElements());
}

void FunctionEmitter::track(Value t, Value of, bool received) {
  Storage storage;
  storage.bytes = bytesOf(of);
  storage.references = 1;
  storage.received = received;
  storageOf[t] = storages.size();
  storages.push_back(storage);
  (received ? liveReceived : liveWorkspace) += storage.bytes;
  peakWorkspace = std::max(peakWorkspace, liveWorkspace);
  peakReceived = std::max(peakReceived, liveReceived);
}

void FunctionEmitter::shareStorage(Value from, Value to) {
  auto it = storageOf.find(from);
  if (it == storageOf.end())
    return;
  // Read the index before inserting `to`: the insertion may grow the map and
  // invalidate `it` (this read freed memory and crashed pipe-opt now and then).
  size_t index = it->second;
  storageOf[to] = index;
  ++storages[index].references;
}

void FunctionEmitter::dropReference(Value t) {
  auto it = storageOf.find(t);
  if (it == storageOf.end())
    return;
  Storage &storage = storages[it->second];
  if (--storage.references == 0 && storage.counted)
    (storage.received ? liveReceived : liveWorkspace) -= storage.bytes;
  storageOf.erase(it);
}

void FunctionEmitter::leave(Value t) {
  auto it = storageOf.find(t);
  if (it == storageOf.end())
    return;
  Storage &storage = storages[it->second];
  if (storage.counted) {
    (storage.received ? liveReceived : liveWorkspace) -= storage.bytes;
    savedBytes += storage.bytes;
  }
  storage.counted = false;
  storageOf.erase(it);
}

FailureOr<Value> FunctionEmitter::alloc(Operation *op, Value result) {
  auto dt = dtype(op, result);
  if (failed(dt))
    return failure();
  Value t = call(op->getLoc(), "pipe_alloc", {r(), *dt, shape(result), "PIPE_MEM_WORKSPACE"},
                 true);
  values[result] = t;
  track(t, result, /*received=*/false);
  return t;
}

LogicalResult FunctionEmitter::allocAll(Operation *op) {
  for (Value result : op->getResults())
    if (failed(alloc(op, result)))
      return failure();
  return success();
}

void FunctionEmitter::saveIfKept(Value v, Location at) {
  auto slot = savedSlot.find(v);
  if (slot == savedSlot.end() || notOwned.contains(v) || !values.count(v))
    return; // not saved, or pipe.return reports why it cannot be
  call(at, "pipe_save", {r(), stage.getIndex(), mb(), slot->second, get(v)});
  leave(get(v));
  notOwned.insert(v);
  savedSlot.erase(slot);
}

LogicalResult FunctionEmitter::emit(Block &block) {
  Location loc = stage.getLoc();
  // A forward saves each kept value as soon as it is computed, so that its
  // WORKSPACE holds only what is not saved (the memory model's split).
  if (auto ret = dyn_cast<ReturnOp>(block.getTerminator()); ret && !backward)
    for (auto [slot, value] : llvm::enumerate(ret.getSaved()))
      if (!savedSlot.try_emplace(value, static_cast<int64_t>(slot)).second)
        return ret.emitOpError("saves the same value in two slots");
  // Block arguments: model inputs of a forward, saved values of a backward.
  for (BlockArgument arg : block.getArguments()) {
    Operation *where = stage.getOperation();
    auto dt = dtypeName(where, typeOf(arg).getElementType());
    if (failed(dt))
      return failure();
    if (backward) {
      values[arg] = call(loc, "pipe_restore",
                         {r(), stage.getIndex(), mb(), static_cast<int64_t>(arg.getArgNumber())},
                         true);
      // Not workspace: a restored value stays SAVED until it is freed.
      continue;
    }
    int64_t input = stage.getModelInputs()[arg.getArgNumber()];
    int64_t range = isa<IntegerType>(typeOf(arg).getElementType()) ? integerRange(arg) : 0;
    values[arg] = call(loc, "pipe_input", {r(), mb(), input, *dt, shape(arg), range}, true);
    track(values[arg], arg, /*received=*/false);
    saveIfKept(arg, loc);
  }

  // The last op that uses each value: it is freed right after.
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation &op : block)
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;
  auto release = [&](Value v, Location at) {
    if (notOwned.contains(v) || !values.count(v))
      return;
    call(at, "pipe_free", {r(), get(v)});
    dropReference(get(v));
    notOwned.insert(v);
  };
  for (BlockArgument arg : block.getArguments())
    if (arg.use_empty())
      release(arg, loc);

  for (Operation &op : block) {
    auto node = rank.tables.nodeIds.find(nodeNameOf(&op));
    if (node != rank.tables.nodeIds.end() && node->second != currentNode) {
      currentNode = node->second;
      call(op.getLoc(), "pipe_node", {r(), static_cast<int64_t>(currentNode)});
    }
    if (failed(lower(&op)))
      return failure();
    for (Value result : op.getResults())
      saveIfKept(result, op.getLoc());
    llvm::SetVector<Value> operands(op.operand_begin(), op.operand_end());
    for (Value v : operands)
      if (lastUse.lookup(v) == &op)
        release(v, op.getLoc());
    for (Value result : op.getResults())
      if (result.use_empty())
        release(result, op.getLoc());
  }
  emitc::ReturnOp::create(b, loc, Value());
  return success();
}

LogicalResult FunctionEmitter::lower(Operation *op) {
  Location loc = op->getLoc();
  if (isa<ParamOp>(op))
    return success(); // fetched where a call takes it (an update takes its id only)
  if (auto recv = dyn_cast<RecvOp>(op)) {
    auto dt = dtype(op, recv.getValue());
    if (failed(dt))
      return failure();
    std::string kind =
        recv.getKind() == TransferKind::gradient ? "PIPE_TRANSFER_GRADIENT"
                                                 : "PIPE_TRANSFER_ACTIVATION";
    values[recv.getValue()] =
        call(loc, "pipe_recv",
             {r(), rankOf(recv.getPeer()), recv.getTag(), kind, mb(), *dt, shape(recv.getValue())},
             true);
    track(values[recv.getValue()], recv.getValue(), /*received=*/true);
    return success();
  }
  if (auto send = dyn_cast<SendOp>(op)) {
    std::string kind =
        send.getKind() == TransferKind::gradient ? "PIPE_TRANSFER_GRADIENT"
                                                 : "PIPE_TRANSFER_ACTIVATION";
    call(loc, "pipe_send",
         {r(), get(send.getValue()), rankOf(send.getPeer()), send.getTag(), kind, mb()});
    return success();
  }
  if (auto label = dyn_cast<LabelOp>(op)) {
    auto dt = dtype(op, label.getValue());
    if (failed(dt))
      return failure();
    values[label.getValue()] = call(
        loc, "pipe_label",
        {r(), mb(), label.getIndex(), *dt, shape(label.getValue()), label.getRange()}, true);
    track(values[label.getValue()], label.getValue(), /*received=*/false);
    return success();
  }
  if (auto grad = dyn_cast<OutputGradOp>(op)) {
    auto dt = dtype(op, grad.getValue());
    if (failed(dt))
      return failure();
    values[grad.getValue()] = call(
        loc, "pipe_output_grad", {r(), mb(), grad.getIndex(), *dt, shape(grad.getValue())}, true);
    track(values[grad.getValue()], grad.getValue(), /*received=*/false);
    return success();
  }
  if (auto loss = dyn_cast<LossOp>(op)) {
    call(loc, "pipe_loss", {r(), get(loss.getValue())});
    return success();
  }
  if (auto accumulate = dyn_cast<AccumulateGradOp>(op)) {
    auto param = accumulate.getParam().getDefiningOp<ParamOp>();
    int32_t id = rank.tables.parameterIds.lookup(param.getName());
    call(loc, "pipe_accumulate_grad",
         {r(), static_cast<int64_t>(id), get(accumulate.getGradient())});
    return success();
  }
  if (auto ret = dyn_cast<ReturnOp>(op)) {
    for (auto [slot, value] : llvm::enumerate(ret.getSaved())) {
      if (!savedSlot.count(value))
        continue; // saved as soon as it was computed
      if (notOwned.contains(value))
        return ret.emitOpError("saves a parameter or a value it does not own");
      call(loc, "pipe_save",
           {r(), stage.getIndex(), mb(), static_cast<int64_t>(slot), get(value)});
      leave(get(value));
      notOwned.insert(value);
    }
    return success();
  }
  if (isa<GradOp>(op))
    return op->emitOpError("is a gradient placeholder (run pipe-differentiate first)");
  if (isa<nn::NNDialect>(op->getDialect()))
    return lowerNN(op);
  return op->emitOpError("has no lowering to the runtime");
}

LogicalResult FunctionEmitter::materialize(nn::ConstantOp constant) {
  Operation *op = constant;
  Location loc = constant.getLoc();
  Value result = constant.getOutput();
  auto dt = dtype(op, result);
  auto data = dyn_cast<DenseElementsAttr>(constant.getValue());
  if (failed(dt))
    return failure();
  if (!data)
    return op->emitOpError("has a constant the runtime cannot read");
  if (data.isSplat()) {
    double value = isa<FloatType>(data.getElementType())
                       ? data.getSplatValue<APFloat>().convertToDouble()
                       : static_cast<double>(data.getSplatValue<APInt>().getSExtValue());
    if (data.getElementType().isInteger(1))
      value = data.getSplatValue<APInt>().isZero() ? 0 : 1;
    values[result] = call(loc, "pipe_splat", {r(), *dt, shape(result), number(value)}, true);
    return success();
  }
  auto name = rank.constantArray(op, data);
  if (failed(name))
    return failure();
  values[result] = call(loc, "pipe_constant", {r(), *dt, shape(result), *name}, true);
  return success();
}

//===----------------------------------------------------------------------===//
// nn ops: one runtime kernel each
//===----------------------------------------------------------------------===//

std::string unaryName(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case<nn::ReluOp>([](auto) { return "PIPE_RELU"; })
      .Case<nn::ErfOp>([](auto) { return "PIPE_ERF"; })
      .Case<nn::TanhOp>([](auto) { return "PIPE_TANH"; })
      .Case<nn::SigmoidOp>([](auto) { return "PIPE_SIGMOID"; })
      .Case<nn::SqrtOp>([](auto) { return "PIPE_SQRT"; })
      .Case<nn::ExpOp>([](auto) { return "PIPE_EXP"; })
      .Case<nn::LogOp>([](auto) { return "PIPE_LOG"; })
      .Case<nn::NegOp>([](auto) { return "PIPE_NEG"; })
      .Case<nn::AbsOp>([](auto) { return "PIPE_ABS"; })
      .Case<nn::ReciprocalOp>([](auto) { return "PIPE_RECIPROCAL"; })
      .Case<nn::NotOp>([](auto) { return "PIPE_NOT"; })
      .Case<nn::FloorOp>([](auto) { return "PIPE_FLOOR"; })
      .Case<nn::CeilOp>([](auto) { return "PIPE_CEIL"; })
      .Case<nn::SoftplusOp>([](auto) { return "PIPE_SOFTPLUS"; })
      .Case<nn::SinOp>([](auto) { return "PIPE_SIN"; })
      .Case<nn::CosOp>([](auto) { return "PIPE_COS"; })
      .Case<nn::TanOp>([](auto) { return "PIPE_TAN"; })
      .Case<nn::AsinOp>([](auto) { return "PIPE_ASIN"; })
      .Case<nn::AcosOp>([](auto) { return "PIPE_ACOS"; })
      .Case<nn::AtanOp>([](auto) { return "PIPE_ATAN"; })
      .Case<nn::SinhOp>([](auto) { return "PIPE_SINH"; })
      .Case<nn::CoshOp>([](auto) { return "PIPE_COSH"; })
      .Case<nn::AsinhOp>([](auto) { return "PIPE_ASINH"; })
      .Case<nn::AcoshOp>([](auto) { return "PIPE_ACOSH"; })
      .Case<nn::AtanhOp>([](auto) { return "PIPE_ATANH"; })
      .Case<nn::RoundOp>([](auto) { return "PIPE_ROUND"; })
      .Case<nn::SignOp>([](auto) { return "PIPE_SIGN"; })
      .Case<nn::GeluOp>([](nn::GeluOp g) {
        return g.getApproximate() == "tanh" ? "PIPE_GELU_TANH" : "PIPE_GELU";
      })
      .Case<nn::LeakyReluOp>([](auto) { return "PIPE_LEAKY_RELU"; })
      .Case<nn::HardSigmoidOp>([](auto) { return "PIPE_HARD_SIGMOID"; })
      .Case<nn::HardSwishOp>([](auto) { return "PIPE_HARD_SWISH"; })
      .Case<nn::ClipOp>([](auto) { return "PIPE_CLIP"; })
      .Default([](Operation *) { return ""; });
}

std::string unaryGradName(nn::UnaryFunction fn) {
  std::string name = nn::stringifyUnaryFunction(fn).upper();
  return "PIPE_" + name;
}

std::string binaryName(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::string>(op)
      .Case<nn::AddOp>([](auto) { return "PIPE_ADD"; })
      .Case<nn::SubOp>([](auto) { return "PIPE_SUB"; })
      .Case<nn::MulOp>([](auto) { return "PIPE_MUL"; })
      .Case<nn::DivOp>([](auto) { return "PIPE_DIV"; })
      .Case<nn::PowOp>([](auto) { return "PIPE_POW"; })
      .Case<nn::ModOp>([](nn::ModOp m) { return m.getFmod() ? "PIPE_FMOD" : "PIPE_MOD"; })
      .Case<nn::EqualOp>([](auto) { return "PIPE_EQUAL"; })
      .Case<nn::LessOp>([](auto) { return "PIPE_LESS"; })
      .Case<nn::LessOrEqualOp>([](auto) { return "PIPE_LESS_EQUAL"; })
      .Case<nn::GreaterOp>([](auto) { return "PIPE_GREATER"; })
      .Case<nn::GreaterOrEqualOp>([](auto) { return "PIPE_GREATER_EQUAL"; })
      .Case<nn::AndOp>([](auto) { return "PIPE_AND"; })
      .Case<nn::OrOp>([](auto) { return "PIPE_OR"; })
      .Case<nn::MaxOp>([](auto) { return "PIPE_MAX"; })
      .Case<nn::MinOp>([](auto) { return "PIPE_MIN"; })
      .Default([](Operation *) { return ""; });
}

/// Explicit window of a conv or pool op (defaults filled, auto_pad resolved).
FailureOr<nn::WindowGeometry> window(Operation *op, Value input, ArrayRef<int64_t> kernel,
                                     std::optional<ArrayRef<int64_t>> strides,
                                     std::optional<ArrayRef<int64_t>> dilations,
                                     std::optional<ArrayRef<int64_t>> pads, StringRef autoPad,
                                     bool ceilMode) {
  std::string error;
  auto geometry = nn::computeWindowGeometry(typeOf(input).getShape().drop_front(2), kernel,
                                            strides, dilations, pads, autoPad, ceilMode, error);
  if (!geometry)
    return op->emitOpError(error);
  return *geometry;
}

/// The runtime's im2col scratch of a convolution (nn::convScratchBytes).
double convScratchBytes(Value weight, Value output, ArrayRef<int64_t> strides,
                        ArrayRef<int64_t> pads) {
  return nn::convScratchBytes(typeOf(weight).getShape(), typeOf(output).getShape(), strides,
                              pads);
}

std::string padsOf(const nn::WindowGeometry &g) {
  SmallVector<int64_t> pads(g.padsBegin);
  pads.append(g.padsEnd.begin(), g.padsEnd.end());
  return ints(pads);
}

FailureOr<SmallVector<int64_t>> constantInts(Operation *op, Value v, StringRef what) {
  auto values = nn::getConstantInts(v);
  if (!values)
    return op->emitOpError("needs constant ") << what << " to run";
  return *values;
}

int64_t normalized(int64_t axis, Value v) {
  return *nn::normalizeAxis(axis, typeOf(v).getRank());
}

LogicalResult FunctionEmitter::lowerNN(Operation *op) {
  Location loc = op->getLoc();

  if (isa<nn::ConstantOp>(op))
    return success(); // materialised where a call takes it as a tensor
  if (isa<nn::ReshapeOp, nn::FlattenOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::IdentityOp>(op)) {
    view(op, op->getOperand(0), op->getResult(0));
    return success();
  }
  if (auto shapeOp = dyn_cast<nn::ShapeOp>(op)) {
    SmallVector<int64_t> dims(typeOf(shapeOp.getInput()).getShape());
    int64_t rankOfInput = static_cast<int64_t>(dims.size());
    int64_t start = std::clamp<int64_t>(shapeOp.getStart() < 0 ? shapeOp.getStart() + rankOfInput
                                                               : shapeOp.getStart(),
                                        0, rankOfInput);
    int64_t end = rankOfInput;
    if (auto e = shapeOp.getEnd())
      end = std::clamp<int64_t>(*e < 0 ? *e + rankOfInput : *e, 0, rankOfInput);
    SmallVector<int64_t> picked(dims.begin() + start, dims.begin() + std::max(start, end));
    auto type = RankedTensorType::get({static_cast<int64_t>(picked.size())}, b.getI64Type());
    auto name = rank.constantArray(op, DenseElementsAttr::get(type, ArrayRef<int64_t>(picked)));
    if (failed(name))
      return failure();
    values[shapeOp.getOutput()] =
        call(loc, "pipe_constant", {r(), "PIPE_I64", shape(shapeOp.getOutput()), *name}, true);
    return success();
  }
  if (std::string fn = unaryName(op); !fn.empty()) {
    double alpha = 0, beta = 0;
    if (auto leaky = dyn_cast<nn::LeakyReluOp>(op))
      alpha = leaky.getAlpha().convertToDouble();
    if (auto hard = dyn_cast<nn::HardSigmoidOp>(op)) {
      alpha = hard.getAlpha().convertToDouble();
      beta = hard.getBeta().convertToDouble();
    }
    if (auto clip = dyn_cast<nn::ClipOp>(op)) {
      auto low = pipe::nn::getConstantScalar(clip.getMin());
      auto high = pipe::nn::getConstantScalar(clip.getMax());
      if (!low || !high)
        return op->emitOpError("needs constant bounds to run");
      alpha = *low;
      beta = *high;
    }
    if (failed(allocAll(op)))
      return failure();
    call(loc, "pipe_k_unary",
         {r(), fn, get(op->getOperand(0)), get(op->getResult(0)), number(alpha), number(beta)});
    return success();
  }
  if (std::string fn = binaryName(op); !fn.empty()) {
    if (failed(allocAll(op)))
      return failure();
    call(loc, "pipe_k_binary",
         {r(), fn, get(op->getOperand(0)), get(op->getOperand(1)), get(op->getResult(0))});
    return success();
  }

  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<nn::CastOp>([&](auto cast) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_cast", {r(), get(cast.getInput()), get(cast.getOutput())});
        return success();
      })
      .Case<nn::WhereOp>([&](nn::WhereOp w) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_where",
             {r(), get(w.getCondition()), get(w.getX()), get(w.getY()), get(w.getOutput())});
        return success();
      })
      .Case<nn::MatMulOp>([&](nn::MatMulOp m) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_matmul", {r(), get(m.getLhs()), get(m.getRhs()), get(m.getOutput())});
        return success();
      })
      .Case<nn::GemmOp>([&](nn::GemmOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_gemm",
             {r(), get(g.getA()), get(g.getB()), optional(g.getC()), get(g.getOutput()),
              number(g.getAlpha().convertToDouble()), number(g.getBeta().convertToDouble()),
              g.getTransA(), g.getTransB()});
        return success();
      })
      .Case<nn::ConvOp>([&](nn::ConvOp c) -> LogicalResult {
        SmallVector<int64_t> kernel(typeOf(c.getWeight()).getShape().drop_front(2));
        auto w = window(op, c.getInput(), kernel, c.getStrides(), c.getDilations(), c.getPads(),
                        c.getAutoPad(), false);
        if (failed(w) || failed(allocAll(op)))
          return failure();
        SmallVector<int64_t> pads(w->padsBegin);
        pads.append(w->padsEnd.begin(), w->padsEnd.end());
        scratch(convScratchBytes(c.getWeight(), c.getOutput(), w->strides, pads));
        call(loc, "pipe_k_conv",
             {r(), get(c.getInput()), get(c.getWeight()), optional(c.getBias()),
              get(c.getOutput()), ints(w->strides), padsOf(*w), ints(w->dilations),
              c.getGroup()});
        return success();
      })
      .Case<nn::MaxPoolOp>([&](nn::MaxPoolOp p) -> LogicalResult {
        if (p.getStorageOrder() != 0)
          return op->emitOpError("with storage_order 1 cannot run");
        auto w = window(op, p.getInput(), p.getKernelShape(), p.getStrides(), p.getDilations(),
                        p.getPads(), p.getAutoPad(), p.getCeilMode() != 0);
        if (failed(w) || failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_max_pool",
             {r(), get(p.getInput()), get(p.getOutput()), optional(p.getIndices()),
              ints(w->kernel), ints(w->strides), padsOf(*w), ints(w->dilations)});
        return success();
      })
      .Case<nn::AveragePoolOp>([&](nn::AveragePoolOp p) -> LogicalResult {
        auto w = window(op, p.getInput(), p.getKernelShape(), p.getStrides(), p.getDilations(),
                        p.getPads(), p.getAutoPad(), p.getCeilMode() != 0);
        if (failed(w) || failed(allocAll(op)))
          return failure();
        if (llvm::any_of(w->dilations, [](int64_t d) { return d != 1; }))
          return op->emitOpError("with dilations cannot run");
        call(loc, "pipe_k_average_pool",
             {r(), get(p.getInput()), get(p.getOutput()), ints(w->kernel), ints(w->strides),
              padsOf(*w), p.getCountIncludePad()});
        return success();
      })
      .Case<nn::GlobalAveragePoolOp, nn::GlobalMaxPoolOp>([&](auto p) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        auto spatial = typeOf(p.getInput()).getShape().drop_front(2);
        SmallVector<int64_t> ones(spatial.size(), 1), zeros(2 * spatial.size(), 0);
        if (isa<nn::GlobalAveragePoolOp>(op))
          call(loc, "pipe_k_average_pool",
               {r(), get(p.getInput()), get(p.getOutput()), ints(spatial), ints(ones),
                ints(zeros), int64_t(0)});
        else
          call(loc, "pipe_k_max_pool",
               {r(), get(p.getInput()), get(p.getOutput()), "nullptr", ints(spatial), ints(ones),
                ints(zeros), ints(ones)});
        return success();
      })
      .Case<nn::BatchNormOp>([&](nn::BatchNormOp bn) -> LogicalResult {
        if (bn.getTrainingMode() != 0 || !bn.getRunningStats().empty())
          return op->emitOpError("in training mode has no kernel (pipe-differentiate gives it "
                                 "its training form)");
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_batch_norm_infer",
             {r(), get(bn.getInput()), get(bn.getScale()), get(bn.getBias()), get(bn.getMean()),
              get(bn.getVar()), get(bn.getOutput()), number(bn.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<nn::BatchNormTrainOp>([&](nn::BatchNormTrainOp bn) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_batch_norm_train",
             {r(), get(bn.getInput()), get(bn.getScale()), get(bn.getBias()),
              get(bn.getRunningMean()), get(bn.getRunningVar()), get(bn.getOutput()),
              get(bn.getSavedMean()), get(bn.getSavedInvstd()),
              number(bn.getEpsilon().convertToDouble()),
              number(bn.getMomentum().convertToDouble())});
        return success();
      })
      .Case<nn::LayerNormOp>([&](nn::LayerNormOp ln) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        auto stats = ln.getStatistics();
        call(loc, "pipe_k_layer_norm",
             {r(), get(ln.getInput()), get(ln.getScale()), optional(ln.getBias()),
              get(ln.getOutput()), stats.size() > 0 ? Arg(get(stats[0])) : Arg("nullptr"),
              stats.size() > 1 ? Arg(get(stats[1])) : Arg("nullptr"),
              normalized(ln.getAxis(), ln.getInput()),
              number(ln.getEpsilon().convertToDouble())});
        return success();
      })
      .Case<nn::SoftmaxOp, nn::LogSoftmaxOp>([&](auto s) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, isa<nn::SoftmaxOp>(op) ? "pipe_k_softmax" : "pipe_k_log_softmax",
             {r(), get(s.getInput()), get(s.getOutput()), normalized(s.getAxis(), s.getInput())});
        return success();
      })
      .Case<nn::DropoutOp>([&](nn::DropoutOp d) -> LogicalResult {
        auto training = nn::getConstantInts(d.getTrainingMode());
        auto ratio = pipe::nn::getConstantScalar(d.getRatio());
        bool inactive = (training && !training->empty() && (*training)[0] == 0) ||
                        (ratio && *ratio == 0.0);
        if (inactive) {
          view(op, d.getInput(), d.getOutput());
          if (Value mask = d.getMask()) {
            values[mask] = call(loc, "pipe_splat", {r(), "PIPE_BOOL", shape(mask), "1.0"}, true);
          }
          return success();
        }
        if (!ratio)
          return op->emitOpError("needs a constant ratio to run");
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_dropout",
             {r(), get(d.getInput()), get(d.getOutput()), optional(d.getMask()), number(*ratio),
              mb(), rank.tables.dropoutKeys.lookup(op)});
        return success();
      })
      .Case<nn::ReduceSumOp, nn::ReduceMeanOp, nn::ReduceMaxOp, nn::ReduceMinOp,
            nn::ReduceProdOp>([&](auto red) -> LogicalResult {
        int64_t inputRank = typeOf(red.getInput()).getRank();
        SmallVector<int64_t> axes;
        if (red.getAxes()) {
          auto given = constantInts(op, red.getAxes(), "axes");
          if (failed(given))
            return failure();
          for (int64_t a : *given)
            axes.push_back(*nn::normalizeAxis(a, inputRank));
        }
        if (axes.empty() && red.getNoopWithEmptyAxes()) {
          view(op, red.getInput(), red.getOutput());
          return success();
        }
        if (axes.empty())
          for (int64_t d = 0; d < inputRank; ++d)
            axes.push_back(d);
        llvm::sort(axes);
        axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
        std::string fn = isa<nn::ReduceSumOp>(op)    ? "PIPE_REDUCE_SUM"
                         : isa<nn::ReduceMeanOp>(op) ? "PIPE_REDUCE_MEAN"
                         : isa<nn::ReduceMaxOp>(op)  ? "PIPE_REDUCE_MAX"
                         : isa<nn::ReduceMinOp>(op)  ? "PIPE_REDUCE_MIN"
                                                     : "PIPE_REDUCE_PROD";
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_reduce",
             {r(), fn, get(red.getInput()), get(red.getOutput()), ints(axes)});
        return success();
      })
      .Case<nn::TransposeOp>([&](nn::TransposeOp t) -> LogicalResult {
        int64_t n = typeOf(t.getInput()).getRank();
        SmallVector<int64_t> perm;
        if (auto given = t.getPerm())
          perm.assign(given->begin(), given->end());
        else
          for (int64_t d = n - 1; d >= 0; --d)
            perm.push_back(d);
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_transpose", {r(), get(t.getInput()), get(t.getOutput()), ints(perm)});
        return success();
      })
      .Case<nn::ConcatOp>([&](nn::ConcatOp c) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        int64_t axis = normalized(c.getAxis(), c.getOutput());
        int64_t n = typeOf(c.getOutput()).getRank(), offset = 0;
        SmallVector<int64_t> ones(n, 1);
        for (Value input : c.getInputs()) {
          SmallVector<int64_t> starts(n, 0);
          starts[axis] = offset;
          call(loc, "pipe_k_slice_assign",
               {r(), get(input), get(c.getOutput()), ints(starts), ints(ones)});
          offset += typeOf(input).getDimSize(axis);
        }
        return success();
      })
      .Case<nn::SplitOp>([&](nn::SplitOp s) -> LogicalResult {
        int64_t axis = normalized(s.getAxis(), s.getInput());
        int64_t n = typeOf(s.getInput()).getRank(), offset = 0;
        SmallVector<int64_t> ones(n, 1);
        for (Value output : s.getOutputs()) {
          int64_t size = typeOf(output).getDimSize(axis);
          if (!output.use_empty()) {
            if (failed(alloc(op, output)))
              return failure();
            SmallVector<int64_t> starts(n, 0);
            starts[axis] = offset;
            call(loc, "pipe_k_slice",
                 {r(), get(s.getInput()), get(output), ints(starts), ints(ones)});
          }
          offset += size;
        }
        return success();
      })
      .Case<nn::SliceOp>([&](nn::SliceOp s) -> LogicalResult {
        auto input = typeOf(s.getInput());
        auto starts = constantInts(op, s.getStarts(), "starts");
        auto ends = constantInts(op, s.getEnds(), "ends");
        auto axes = constantInts(op, s.getAxes(), "axes");
        auto steps = constantInts(op, s.getSteps(), "steps");
        if (failed(starts) || failed(ends) || failed(axes) || failed(steps))
          return failure();
        SmallVector<int64_t> fullStarts(input.getRank(), 0), fullSteps(input.getRank(), 1);
        for (size_t i = 0; i < axes->size(); ++i) {
          int64_t axis = *nn::normalizeAxis((*axes)[i], input.getRank());
          fullStarts[axis] =
              nn::clampSlice(input.getDimSize(axis), (*starts)[i], (*ends)[i], (*steps)[i])
                  .start;
          fullSteps[axis] = (*steps)[i];
        }
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_slice",
             {r(), get(s.getInput()), get(s.getOutput()), ints(fullStarts), ints(fullSteps)});
        return success();
      })
      .Case<nn::GatherOp>([&](nn::GatherOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_gather",
             {r(), get(g.getInput()), get(g.getIndices()), get(g.getOutput()),
              normalized(g.getAxis(), g.getInput())});
        return success();
      })
      .Case<nn::ExpandOp, nn::TileOp>([&](auto e) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, isa<nn::ExpandOp>(op) ? "pipe_k_expand" : "pipe_k_tile",
             {r(), get(e.getInput()), get(e.getOutput())});
        return success();
      })
      .Case<nn::PadOp>([&](nn::PadOp p) -> LogicalResult {
        auto pads = constantInts(op, p.getPads(), "pads");
        auto axes = constantInts(op, p.getAxes(), "axes");
        if (failed(pads) || failed(axes))
          return failure();
        int64_t n = typeOf(p.getInput()).getRank();
        SmallVector<int64_t> full(2 * n, 0);
        for (size_t i = 0; i < axes->size(); ++i) {
          int64_t axis = *nn::normalizeAxis((*axes)[i], n);
          full[axis] = (*pads)[i];
          full[n + axis] = (*pads)[i + axes->size()];
        }
        double value = 0;
        if (typeOf(p.getConstantValue()).getNumElements() > 0) {
          auto given = pipe::nn::getConstantScalar(p.getConstantValue());
          if (!given)
            return op->emitOpError("needs a constant padding value to run");
          value = *given;
        }
        std::string mode = p.getMode() == "reflect" ? "PIPE_PAD_REFLECT"
                           : p.getMode() == "edge"  ? "PIPE_PAD_EDGE"
                           : p.getMode() == "wrap"  ? "PIPE_PAD_WRAP"
                                                    : "PIPE_PAD_CONSTANT";
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_pad",
             {r(), get(p.getInput()), get(p.getOutput()), ints(full), mode, number(value)});
        return success();
      })
      .Case<nn::TriluOp>([&](nn::TriluOp t) -> LogicalResult {
        int64_t k = 0;
        if (t.getK()) {
          auto given = pipe::nn::getConstantScalar(t.getK());
          if (!given)
            return op->emitOpError("needs a constant k to run");
          k = static_cast<int64_t>(*given);
        }
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_trilu", {r(), get(t.getInput()), get(t.getOutput()), k, t.getUpper()});
        return success();
      })
      .Case<nn::RangeOp>([&](nn::RangeOp range) -> LogicalResult {
        auto start = pipe::nn::getConstantScalar(range.getStart());
        auto delta = pipe::nn::getConstantScalar(range.getDelta());
        if (!start || !delta)
          return op->emitOpError("needs constant start and delta to run");
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_range",
             {r(), get(range.getOutput()), number(*start), number(*delta)});
        return success();
      })
      .Case<nn::ConstantOfShapeOp>([&](nn::ConstantOfShapeOp c) -> LogicalResult {
        auto dt = dtype(op, c.getOutput());
        auto data = dyn_cast<DenseElementsAttr>(c.getValue());
        if (failed(dt) || !data || data.getNumElements() != 1)
          return failed(dt) ? failure() : op->emitOpError("needs a one-element value to run");
        double value = isa<FloatType>(data.getElementType())
                           ? (*data.getValues<APFloat>().begin()).convertToDouble()
                           : static_cast<double>((*data.getValues<APInt>().begin()).getSExtValue());
        values[c.getOutput()] =
            call(loc, "pipe_splat", {r(), *dt, shape(c.getOutput()), number(value)}, true);
        return success();
      })
      // Gradient ops.
      .Case<nn::UnaryGradOp>([&](nn::UnaryGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_unary_grad",
             {r(), unaryGradName(g.getFunction()), get(g.getSaved()), get(g.getGrad()),
              get(g.getOutput()), number(g.getAlpha().convertToDouble()),
              number(g.getBeta().convertToDouble())});
        return success();
      })
      .Case<nn::ConvGradInputOp>([&](nn::ConvGradInputOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        scratch(convScratchBytes(g.getWeight(), g.getGrad(), g.getStrides(), g.getPads()));
        call(loc, "pipe_k_conv_grad_input",
             {r(), get(g.getGrad()), get(g.getWeight()), get(g.getOutput()),
              ints(g.getStrides()), ints(g.getPads()), ints(g.getDilations()), g.getGroup()});
        return success();
      })
      .Case<nn::ConvGradWeightOp>([&](nn::ConvGradWeightOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        scratch(convScratchBytes(g.getOutput(), g.getGrad(), g.getStrides(), g.getPads()));
        call(loc, "pipe_k_conv_grad_weight",
             {r(), get(g.getInput()), get(g.getGrad()), get(g.getOutput()),
              ints(g.getStrides()), ints(g.getPads()), ints(g.getDilations()), g.getGroup()});
        return success();
      })
      .Case<nn::MaxPoolGradOp>([&](nn::MaxPoolGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_max_pool_grad",
             {r(), get(g.getGrad()), get(g.getIndices()), get(g.getOutput())});
        return success();
      })
      .Case<nn::AveragePoolGradOp>([&](nn::AveragePoolGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_average_pool_grad",
             {r(), get(g.getGrad()), get(g.getOutput()), ints(g.getKernelShape()),
              ints(g.getStrides()), ints(g.getPads()), g.getCountIncludePad()});
        return success();
      })
      .Case<nn::BatchNormGradOp, nn::LayerNormGradOp>([&](auto g) -> LogicalResult {
        // Results nothing uses are not computed.
        for (Value result : op->getResults())
          if (!result.use_empty() && failed(alloc(op, result)))
            return failure();
        auto out = [&](Value v) { return v.use_empty() ? Arg("nullptr") : Arg(get(v)); };
        if (auto bn = dyn_cast<nn::BatchNormGradOp>(op)) {
          call(loc, "pipe_k_batch_norm_grad",
               {r(), get(bn.getInput()), get(bn.getScale()), get(bn.getSavedMean()),
                get(bn.getSavedInvstd()), get(bn.getGrad()), out(bn.getInputGrad()),
                out(bn.getScaleGrad()), out(bn.getBiasGrad())});
        } else {
          auto ln = cast<nn::LayerNormGradOp>(op);
          call(loc, "pipe_k_layer_norm_grad",
               {r(), get(ln.getInput()), get(ln.getScale()), get(ln.getMean()),
                get(ln.getInvstd()), get(ln.getGrad()), out(ln.getInputGrad()),
                out(ln.getScaleGrad()), out(ln.getBiasGrad()), ln.getAxis()});
        }
        return success();
      })
      .Case<nn::SoftmaxGradOp, nn::LogSoftmaxGradOp>([&](auto g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, isa<nn::SoftmaxGradOp>(op) ? "pipe_k_softmax_grad" : "pipe_k_log_softmax_grad",
             {r(), get(g.getOutput()), get(g.getGrad()), get(g.getInputGrad()), g.getAxis()});
        return success();
      })
      .Case<nn::GatherGradOp>([&](nn::GatherGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_gather_grad",
             {r(), get(g.getGrad()), get(g.getIndices()), get(g.getOutput()), g.getAxis()});
        return success();
      })
      .Case<nn::SliceGradOp>([&](nn::SliceGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        call(loc, "pipe_k_fill", {r(), get(g.getOutput()), "0.0"});
        call(loc, "pipe_k_slice_assign",
             {r(), get(g.getGrad()), get(g.getOutput()), ints(g.getStarts()),
              ints(g.getSteps())});
        return success();
      })
      .Case<nn::SoftmaxCrossEntropyLossOp>([&](nn::SoftmaxCrossEntropyLossOp l) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        std::string ignore = l.getIgnoreIndex() ? std::to_string(*l.getIgnoreIndex()) + "LL"
                                                : "INT64_MIN";
        call(loc, "pipe_k_softmax_cross_entropy",
             {r(), get(l.getLogits()), get(l.getLabels()), get(l.getLoss()),
              get(l.getLogProb()), ignore, "1.0"});
        return success();
      })
      .Case<nn::SoftmaxCrossEntropyLossGradOp>([&](nn::SoftmaxCrossEntropyLossGradOp g) -> LogicalResult {
        if (failed(allocAll(op)))
          return failure();
        std::string ignore = g.getIgnoreIndex() ? std::to_string(*g.getIgnoreIndex()) + "LL"
                                                : "INT64_MIN";
        call(loc, "pipe_k_softmax_cross_entropy_grad",
             {r(), get(g.getGrad()), get(g.getLogProb()), get(g.getLabels()),
              get(g.getLogitsGrad()), ignore, "1.0"});
        return success();
      })
      .Default([&](Operation *) -> LogicalResult {
        return op->emitOpError("has no kernel in the runtime");
      });
}

//===----------------------------------------------------------------------===//
// The rank's file: stage functions, set-up, step
//===----------------------------------------------------------------------===//

std::string optimizerName(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::sgd:
    return "PIPE_SGD";
  case OptimizerKind::momentum:
    return "PIPE_MOMENTUM";
  case OptimizerKind::adam:
    return "PIPE_ADAM";
  case OptimizerKind::adamw:
    return "PIPE_ADAMW";
  }
  return "PIPE_SGD";
}

std::string sourceName(nn::ParamSource source) {
  switch (source) {
  case nn::ParamSource::file:
    return "PIPE_SOURCE_FILE";
  case nn::ParamSource::external:
    return "PIPE_SOURCE_EXTERNAL";
  case nn::ParamSource::inline_:
    return "PIPE_SOURCE_INLINE";
  }
  return "PIPE_SOURCE_INLINE";
}

LogicalResult RankEmitter::emit(PipelineOp pipeline) {
  MLIRContext *ctx = file.getContext();
  Location loc = pipeline.getLoc();
  OpBuilder top = OpBuilder::atBlockEnd(&file.getBodyRegion().front());
  constantsEnd = emitc::IncludeOp::create(top, loc, "pipe_runtime.h", false);
  Type mbType = IntegerType::get(ctx, 32);

  SmallVector<StageOp> mine;
  for (StageOp stage : tables.stages)
    if (stage.getDevice() == rank)
      mine.push_back(stage);
  for (StageOp stage : mine) {
    for (bool backward : {false, true}) {
      std::string name = "stage" + std::to_string(stage.getIndex()) +
                         (backward ? "_backward" : "_forward");
      emitc::FuncOp func = function(name, {rankType, mbType}, {}, /*isStatic=*/true);
      FunctionEmitter body(*this, stage, backward, func);
      Region &region = backward ? stage.getBackward() : stage.getBody();
      if (failed(body.emit(region.front())))
        return failure();
      if (memory) {
        size_t s = static_cast<size_t>(stage.getIndex());
        (backward ? memory->backwardWorkspace : memory->forwardWorkspace)[s] =
            body.peakWorkspace;
        (backward ? memory->backwardReceived : memory->forwardReceived)[s] = body.peakReceived;
        if (!backward)
          memory->saved[s] = body.savedBytes;
      }
    }
  }

  top.setInsertionPointToEnd(&file.getBodyRegion().front());
  emitc::VerbatimOp::create(top, loc, top.getStringAttr("extern \"C\" {"));
  auto constant = [&](StringRef name, int64_t value) {
    emitc::FuncOp func = function(name, {}, {IntegerType::get(ctx, 32)}, false);
    OpBuilder b = OpBuilder::atBlockEnd(&func.getBody().front());
    Value v = emitc::LiteralOp::create(b, loc, IntegerType::get(ctx, 32),
                                       value < 0 ? "PIPE_ABI_VERSION" : std::to_string(value));
    emitc::ReturnOp::create(b, loc, v);
  };
  constant("pipe_program_abi_version", -1);
  constant("pipe_program_rank", rank);

  // Set-up: optimizer, nodes, stages, parameters.
  {
    emitc::FuncOp setup = function("pipe_program_setup", {rankType}, {}, false);
    OpBuilder b = OpBuilder::atBlockEnd(&setup.getBody().front());
    Value r = setup.getArgument(0);
    TrainingAttr training = pipeline.getTrainingAttr();
    call(b, loc, "pipe_set_optimizer",
         {r, optimizerName(training.getOptimizer()), number(training.getLr().getValueAsDouble()),
          number(training.getMomentum().getValueAsDouble()),
          number(training.getBeta1().getValueAsDouble()),
          number(training.getBeta2().getValueAsDouble()),
          number(training.getEps().getValueAsDouble()),
          number(training.getWeightDecay().getValueAsDouble())},
         false);
    std::set<int32_t> nodesUsed;
    for (StageOp stage : mine)
      stage.walk([&](Operation *op) {
        auto it = tables.nodeIds.find(nodeNameOf(op));
        if (it != tables.nodeIds.end())
          nodesUsed.insert(it->second);
      });
    for (int32_t node : nodesUsed)
      call(b, loc, "pipe_declare_node",
           {r, static_cast<int64_t>(node), cString(tables.nodes[node])}, false);
    for (StageOp stage : mine) {
      auto ret = cast<ReturnOp>(stage.getBody().front().getTerminator());
      call(b, loc, "pipe_declare_stage",
           {r, stage.getIndex(), static_cast<int64_t>(ret.getSaved().size())}, false);
    }
    for (const ProgramParameter &p : tables.parameters) {
      if (!llvm::is_contained(p.ranks, rank))
        continue;
      Type element = p.dtype == "f32"    ? Type(Float32Type::get(ctx))
                     : p.dtype == "f64"  ? Type(Float64Type::get(ctx))
                     : p.dtype == "i64"  ? Type(IntegerType::get(ctx, 64))
                     : p.dtype == "i32"  ? Type(IntegerType::get(ctx, 32))
                     : p.dtype == "bool" ? Type(IntegerType::get(ctx, 1))
                                         : Type(Float16Type::get(ctx));
      auto dt = dtypeName(pipeline, element);
      if (failed(dt))
        return failure();
      call(b, loc, "pipe_declare_param",
           {r, static_cast<int64_t>(p.id), cString(p.name), *dt, ints(p.shape),
            sourceName(p.source), cString(p.path), p.offset, p.length,
            static_cast<int64_t>(p.trainable), p.ownerRank},
           false);
    }
    emitc::ReturnOp::create(b, loc, Value());
  }

  // The step: actions in order, then tied gradients and the optimizer.
  {
    emitc::FuncOp step = function("pipe_program_step", {rankType}, {}, false);
    OpBuilder b = OpBuilder::atBlockEnd(&step.getBody().front());
    Value r = step.getArgument(0);
    call(b, loc, "pipe_step_begin", {r}, false);
    for (ActionAttr action : tables.order[rank]) {
      std::string stage = std::to_string(action.getStage());
      std::string mb = std::to_string(action.getMb());
      std::string kind, callee;
      switch (action.getKind()) {
      case ActionKind::forward:
        kind = "PIPE_ACTION_FORWARD";
        callee = "stage" + stage + "_forward";
        break;
      case ActionKind::backward:
        kind = "PIPE_ACTION_BACKWARD";
        callee = "stage" + stage + "_backward";
        break;
      case ActionKind::backward_input:
        // The whole backward runs here; its weight half is not split off.
        kind = "PIPE_ACTION_BACKWARD_INPUT";
        callee = "stage" + stage + "_backward";
        break;
      case ActionKind::backward_weight:
        continue;
      }
      call(b, loc, "pipe_action_begin", {r, kind, action.getStage(), action.getMb()}, false);
      call(b, loc, callee, {r, mb}, false);
      call(b, loc, "pipe_action_end", {r}, false);
    }
    // Tied parameters used on several ranks: gradients to the owner.
    SmallVector<const ProgramParameter *> tied;
    for (const ProgramParameter &p : tables.parameters)
      if (p.trainable && p.ranks.size() > 1 && llvm::is_contained(p.ranks, rank))
        tied.push_back(&p);
    if (!tied.empty()) {
      call(b, loc, "pipe_action_begin", {r, "PIPE_ACTION_REDUCE", -1, -1}, false);
      for (const ProgramParameter *p : tied) {
        if (p->ownerRank != rank) {
          call(b, loc, "pipe_send_param_grad", {r, static_cast<int64_t>(p->id), p->ownerRank},
               false);
          continue;
        }
        for (int64_t user : p->ranks)
          if (user != rank)
            call(b, loc, "pipe_recv_add_param_grad", {r, static_cast<int64_t>(p->id), user},
                 false);
      }
      call(b, loc, "pipe_action_end", {r}, false);
    }
    call(b, loc, "pipe_action_begin", {r, "PIPE_ACTION_OPTIMIZER", -1, -1}, false);
    // Data-parallel replicas average the gradients first (nothing with one).
    call(b, loc, "pipe_all_reduce_grads", {r}, false);
    for (const ProgramParameter &p : tables.parameters)
      if (p.trainable && p.ownerRank == rank)
        call(b, loc, "pipe_update", {r, static_cast<int64_t>(p.id)}, false);
    for (const ProgramParameter *p : tied) {
      if (p->ownerRank == rank) {
        for (int64_t user : p->ranks)
          if (user != rank)
            call(b, loc, "pipe_send_param", {r, static_cast<int64_t>(p->id), user}, false);
      } else {
        call(b, loc, "pipe_recv_param", {r, static_cast<int64_t>(p->id), p->ownerRank}, false);
      }
    }
    call(b, loc, "pipe_action_end", {r}, false);
    call(b, loc, "pipe_step_end", {r}, false);
    emitc::ReturnOp::create(b, loc, Value());
  }
  top.setInsertionPointToEnd(&file.getBodyRegion().front());
  emitc::VerbatimOp::create(top, loc, top.getStringAttr("} // extern \"C\""));
  return success();
}

struct ConvertPipeToEmitCPass
    : pipe::impl::ConvertPipeToEmitCBase<ConvertPipeToEmitCPass> {
  void runOnOperation() override {
    if (failed(lowerPipelineToEmitC(getOperation())))
      signalPassFailure();
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

FailureOr<ProgramDescription> pipe::describeProgram(PipelineOp pipeline) {
  FailureOr<Tables> tables = buildTables(pipeline);
  if (failed(tables))
    return failure();
  ProgramDescription d;
  d.ranks = tables->ranks;
  d.stages = pipeline.getNumStages();
  d.microbatches = pipeline.getMicrobatches();
  if (PlanAttr plan = pipeline.getPlanAttr()) {
    d.replicas = plan.getReplicas();
    d.replicaLayout = plan.getReplicaLayout().str();
  }
  d.rankOfStage = tables->rankOfStage;
  d.parameters = tables->parameters;
  d.training = pipeline.getTrainingAttr();
  std::map<int64_t, ProgramTensor> inputs, labels, outputGrads;
  for (StageOp stage : tables->stages) {
    Block &forward = stage.getBody().front();
    for (BlockArgument arg : forward.getArguments()) {
      ProgramTensor t;
      t.index = stage.getModelInputs()[arg.getArgNumber()];
      if (auto name = dyn_cast<NameLoc>(arg.getLoc()))
        t.name = name.getName().str();
      t.dtype = shortDtype(typeOf(arg).getElementType());
      auto shape = typeOf(arg).getShape();
      t.shape.assign(shape.begin(), shape.end());
      t.range = isa<IntegerType>(typeOf(arg).getElementType()) ? integerRange(arg) : 0;
      auto [it, inserted] = inputs.emplace(t.index, t);
      if (!inserted)
        it->second.range = std::min(it->second.range, t.range);
    }
    stage.walk([&](Operation *op) {
      if (auto label = dyn_cast<LabelOp>(op)) {
        ProgramTensor t;
        t.index = label.getIndex();
        t.name = "label" + std::to_string(t.index);
        t.dtype = shortDtype(typeOf(label.getValue()).getElementType());
        auto shape = typeOf(label.getValue()).getShape();
        t.shape.assign(shape.begin(), shape.end());
        t.range = label.getRange();
        labels.emplace(t.index, t);
      } else if (auto grad = dyn_cast<OutputGradOp>(op)) {
        ProgramTensor t;
        t.index = grad.getIndex();
        t.name = "output_grad" + std::to_string(t.index);
        t.dtype = shortDtype(typeOf(grad.getValue()).getElementType());
        auto shape = typeOf(grad.getValue()).getShape();
        t.shape.assign(shape.begin(), shape.end());
        outputGrads.emplace(t.index, t);
      }
    });
  }
  for (auto &[index, t] : inputs)
    d.inputs.push_back(t);
  for (auto &[index, t] : labels)
    d.labels.push_back(t);
  for (auto &[index, t] : outputGrads)
    d.outputGradients.push_back(t);
  return d;
}

void pipe::loadPipeToEmitCDialects(MLIRContext *context) {
  context->getOrLoadDialect<emitc::EmitCDialect>();
}

LogicalResult pipe::lowerPipelineToEmitC(ModuleOp module, ProgramMemory *memory) {
  // Callers outside a pass manager (the main job) may not have loaded them.
  loadPipeToEmitCDialects(module.getContext());
  SmallVector<PipelineOp> pipelines(module.getOps<PipelineOp>());
  if (pipelines.size() != 1)
    return module.emitError("convert-pipe-to-emitc needs exactly one pipe.pipeline, found ")
           << pipelines.size();
  PipelineOp pipeline = pipelines.front();
  FailureOr<Tables> tables = buildTables(pipeline);
  if (failed(tables))
    return failure();
  OpBuilder b(pipeline);
  if (memory) {
    size_t stages = tables->stages.size();
    *memory = ProgramMemory();
    memory->forwardWorkspace.assign(stages, 0);
    memory->saved.assign(stages, 0);
    memory->backwardWorkspace.assign(stages, 0);
    memory->forwardReceived.assign(stages, 0);
    memory->backwardReceived.assign(stages, 0);
  }
  // One file per rank, each filled on its own thread: an emitter reads the
  // pipeline and the tables, builds only inside its file, and writes only its
  // own stages' entries of `memory`.
  SmallVector<emitc::FileOp> files;
  for (int64_t rank = 0; rank < tables->ranks; ++rank)
    files.push_back(
        emitc::FileOp::create(b, pipeline.getLoc(), "rank" + std::to_string(rank)));
  LogicalResult emitted = failableParallelForEachN(
      module.getContext(), 0, files.size(), [&](size_t rank) {
        RankEmitter emitter(*tables, static_cast<int64_t>(rank), files[rank]);
        emitter.memory = memory;
        return emitter.emit(pipeline);
      });
  if (failed(emitted))
    return failure();
  pipeline.erase();
  return success();
}

LogicalResult pipe::translateRankToCpp(ModuleOp module, int64_t rank, llvm::raw_ostream &os) {
  return emitc::translateToCpp(module, os, /*declareVariablesAtTop=*/false,
                               "rank" + std::to_string(rank));
}
