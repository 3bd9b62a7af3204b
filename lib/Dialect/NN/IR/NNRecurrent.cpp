//===- NNRecurrent.cpp - verifier and shape rule of nn.lstm/gru/rnn -------===//
//
// The constraints rnn_c1 .. rnn_c5 (docs/nn-dialect.md), shared by the three
// ops, and their shape rule: Y [seq, dirs, batch, hidden] and the last states
// [dirs, batch, hidden] (layout 1: [batch, seq, dirs, hidden] and
// [batch, dirs, hidden]).
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNRecurrent.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;

namespace {

/// An activation name, how many of alpha and beta it takes, and their
/// defaults (those of the ONNX op of the same name).
struct ActivationSpec {
  llvm::StringRef name;
  int params;
  double alpha, beta;
};
constexpr ActivationSpec kActivations[] = {
    {"Sigmoid", 0, 0, 0},          {"Tanh", 0, 0, 0},        {"Relu", 0, 0, 0},
    {"Softsign", 0, 0, 0},         {"Softplus", 0, 0, 0},    {"LeakyRelu", 1, 0.01, 0},
    {"HardSigmoid", 2, 0.2, 0.5},  {"Affine", 2, 1.0, 0},    {"ScaledTanh", 2, 1.0, 1.0},
};

template <typename OpT>
RecurrentLayer common(OpT op, RecurrentCell cell) {
  RecurrentLayer l;
  l.cell = cell;
  l.x = op.getX();
  l.w = op.getW();
  l.r = op.getR();
  l.b = op.getB();
  l.initialH = op.getInitialH();
  l.hiddenSize = op.getHiddenSize();
  l.layout = op.getLayout();
  l.direction = op.getDirection();
  l.activations = op.getActivationsAttr();
  if (auto alphas = op.getActivationAlpha())
    l.alphas = *alphas;
  if (auto betas = op.getActivationBeta())
    l.betas = *betas;
  if (auto clip = op.getClipAttr())
    l.clip = clip.getValueAsDouble();
  l.sequenceLengths = op.getSequenceLens();
  return l;
}

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// The shape of a ranked `v` against `expected` (dynamic dims match any).
bool shapeIs(RankedTensorType type, llvm::ArrayRef<int64_t> expected) {
  if (type.getRank() != static_cast<int64_t>(expected.size()))
    return false;
  for (auto [dim, want] : llvm::zip(type.getShape(), expected))
    if (!ShapedType::isDynamic(dim) && !ShapedType::isDynamic(want) && dim != want)
      return false;
  return true;
}

std::string shapeText(llvm::ArrayRef<int64_t> shape) {
  std::string text = "[";
  for (auto [i, dim] : llvm::enumerate(shape)) {
    if (i)
      text += ", ";
    text += ShapedType::isDynamic(dim) ? "?" : std::to_string(dim);
  }
  return text + "]";
}

LogicalResult verifyRecurrent(Operation *op) {
  RecurrentLayer l = *getRecurrentLayer(op);
  auto error = [&](llvm::StringRef id) { return op->emitOpError("[") << id << "] "; };
  if (l.hiddenSize < 1)
    return error("rnn_c1") << "hidden_size must be >= 1, got " << l.hiddenSize;
  if (l.direction != "forward" && l.direction != "reverse" && l.direction != "bidirectional")
    return error("rnn_c1") << "direction '" << l.direction
                           << "' is not forward, reverse or bidirectional";
  if (l.layout != 0 && l.layout != 1)
    return error("rnn_c1") << "layout must be 0 or 1, got " << l.layout;
  std::string message;
  if (failed(l.resolveActivations(message)))
    return error("rnn_c2") << message;
  if (!isa<FloatType>(elementOf(l.x)))
    return error("rnn_c3") << "X must have a floating-point element type, got " << elementOf(l.x);
  for (Value v : {l.w, l.r, l.b, l.initialH, l.initialC, l.peepholes})
    if (v && elementOf(v) != elementOf(l.x))
      return error("rnn_c3") << "X, W, R, B, the initial states and the peepholes must have "
                                "the same element type, got "
                             << elementOf(l.x) << " and " << elementOf(v);
  auto x = getRankedType(l.x);
  if (!x)
    return success();
  if (x.getRank() != 3)
    return error("rnn_c4") << "X must be 3-D, got rank " << x.getRank();
  const int64_t dirs = l.directions(), hidden = l.hiddenSize, gates = l.gates();
  const int64_t steps = x.getDimSize(l.layout ? 1 : 0), batch = x.getDimSize(l.layout ? 0 : 1),
                features = x.getDimSize(2);
  SmallVector<int64_t> state = l.layout ? SmallVector<int64_t>{batch, dirs, hidden}
                                        : SmallVector<int64_t>{dirs, batch, hidden};
  struct Expected {
    Value v;
    const char *name;
    SmallVector<int64_t> shape;
  };
  Expected expected[] = {{l.w, "W", {dirs, gates * hidden, features}},
                         {l.r, "R", {dirs, gates * hidden, hidden}},
                         {l.b, "B", {dirs, 2 * gates * hidden}},
                         {l.initialH, "initial_h", state},
                         {l.initialC, "initial_c", state},
                         {l.peepholes, "P", {dirs, 3 * hidden}}};
  for (const Expected &e : expected) {
    if (!e.v)
      continue;
    auto type = getRankedType(e.v);
    if (type && !shapeIs(type, e.shape))
      return error("rnn_c4") << e.name << " must be " << shapeText(e.shape) << " ("
                             << dirs << " direction(s), " << gates << " gate(s) of hidden_size "
                             << hidden << ", " << features << " input features), got "
                             << e.v.getType();
  }
  if (l.sequenceLengths) {
    if (!ShapedType::isDynamic(batch) && static_cast<int64_t>(l.sequenceLengths->size()) != batch)
      return error("rnn_c5") << "sequence_lens has " << l.sequenceLengths->size()
                             << " entries for a batch of " << batch;
    for (int64_t length : *l.sequenceLengths)
      if (length < 0 || (!ShapedType::isDynamic(steps) && length > steps))
        return error("rnn_c5") << "sequence length " << length << " is outside [0, " << steps
                               << "]";
  }
  return success();
}

LogicalResult inferRecurrent(Operation *op, SmallVectorImpl<Type> &types) {
  RecurrentLayer l = *getRecurrentLayer(op);
  Type element = elementOf(l.x);
  auto x = getRankedType(l.x);
  if (!x || x.getRank() != 3) {
    types.append(op->getNumResults(), UnrankedTensorType::get(element));
    return success();
  }
  const int64_t dirs = l.directions(), hidden = l.hiddenSize;
  const int64_t steps = x.getDimSize(l.layout ? 1 : 0), batch = x.getDimSize(l.layout ? 0 : 1);
  if (l.layout) {
    types.push_back(RankedTensorType::get({batch, steps, dirs, hidden}, element));
    types.append(op->getNumResults() - 1, RankedTensorType::get({batch, dirs, hidden}, element));
  } else {
    types.push_back(RankedTensorType::get({steps, dirs, batch, hidden}, element));
    types.append(op->getNumResults() - 1, RankedTensorType::get({dirs, batch, hidden}, element));
  }
  return success();
}

} // namespace

int64_t RecurrentLayer::gates() const {
  return cell == RecurrentCell::Lstm ? 4 : cell == RecurrentCell::Gru ? 3 : 1;
}

int64_t RecurrentLayer::activationsPerDirection() const {
  return cell == RecurrentCell::Lstm ? 3 : cell == RecurrentCell::Gru ? 2 : 1;
}

llvm::StringRef RecurrentLayer::onnxName() const {
  return cell == RecurrentCell::Lstm ? "LSTM" : cell == RecurrentCell::Gru ? "GRU" : "RNN";
}

FailureOr<SmallVector<RecurrentActivation>>
RecurrentLayer::resolveActivations(std::string &error) const {
  static const char *const defaults[3][3] = {
      {"Sigmoid", "Tanh", "Tanh"}, {"Sigmoid", "Tanh", nullptr}, {"Tanh", nullptr, nullptr}};
  const int64_t perDirection = activationsPerDirection(), count = perDirection * directions();
  if (activations && static_cast<int64_t>(activations.size()) != count) {
    error = (llvm::Twine("has ") + llvm::Twine(activations.size()) + " activations, expected " +
             llvm::Twine(count))
                .str();
    return failure();
  }
  SmallVector<RecurrentActivation> result;
  size_t nextAlpha = 0, nextBeta = 0;
  for (int64_t i = 0; i < count; ++i) {
    llvm::StringRef name = activations ? cast<StringAttr>(activations[i]).getValue()
                                       : defaults[static_cast<int>(cell)][i % perDirection];
    const ActivationSpec *spec = nullptr;
    for (const ActivationSpec &candidate : kActivations)
      if (name == candidate.name)
        spec = &candidate;
    if (!spec) {
      error = ("activation '" + name + "' is not one of").str();
      for (const ActivationSpec &known : kActivations)
        error += (" " + known.name).str();
      return failure();
    }
    RecurrentActivation f{name.str(), spec->alpha, spec->beta};
    if (spec->params >= 1 && nextAlpha < alphas.size())
      f.alpha = alphas[nextAlpha++];
    if (spec->params >= 2 && nextBeta < betas.size())
      f.beta = betas[nextBeta++];
    result.push_back(f);
  }
  return result;
}

std::optional<RecurrentLayer> pipe::nn::getRecurrentLayer(Operation *op) {
  if (auto lstm = dyn_cast<LstmOp>(op)) {
    RecurrentLayer l = common(lstm, RecurrentCell::Lstm);
    l.initialC = lstm.getInitialC();
    l.peepholes = lstm.getP();
    l.inputForget = lstm.getInputForget();
    return l;
  }
  if (auto gru = dyn_cast<GruOp>(op)) {
    RecurrentLayer l = common(gru, RecurrentCell::Gru);
    l.linearBeforeReset = gru.getLinearBeforeReset();
    return l;
  }
  if (auto rnn = dyn_cast<RnnOp>(op))
    return common(rnn, RecurrentCell::Rnn);
  return std::nullopt;
}

bool pipe::nn::isComposite(Operation *op) { return isa<LstmOp, GruOp, RnnOp>(op); }

LogicalResult LstmOp::verify() { return verifyRecurrent(*this); }
LogicalResult GruOp::verify() { return verifyRecurrent(*this); }
LogicalResult RnnOp::verify() { return verifyRecurrent(*this); }
LogicalResult LstmOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrent(*this, types);
}
LogicalResult GruOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrent(*this, types);
}
LogicalResult RnnOp::inferResultTypes(SmallVectorImpl<Type> &types) {
  return inferRecurrent(*this, types);
}
