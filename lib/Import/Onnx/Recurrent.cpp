//===- Recurrent.cpp - ONNX LSTM, GRU and RNN unrolled into nn ops --------===//
//
// A recurrent layer over a sequence of static length is its cells, one per
// step and direction, each a few matmuls and element-wise ops: that is how
// it is imported, so that its cost is the unrolled cells' and its gradient
// is backpropagation through time by the ops' own rules. The input's
// projection X W^T (+ both biases) is one matmul over all steps; each step
// adds H R^T, splits the gates and applies the activations. Directions:
// forward, reverse, bidirectional; layouts 0 ([seq, batch, ...]) and 1
// ([batch, seq, ...]); initial states, peepholes, clip, input_forget,
// linear_before_reset, the activations and their alpha/beta. Constant
// sequence_lens shorter than the sequence freeze a batch entry's state and
// zero its outputs past its length.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

enum class Cell { Lstm, Gru, Rnn };

/// One activation of the cell, with its alpha and beta.
struct Activation {
  std::string name;
  double alpha = 0, beta = 0;
};

/// Gates per cell, activations per direction, the default activations.
struct CellKind {
  int gates, activations;
  const char *defaults[3];
};
CellKind kindOf(Cell cell) {
  switch (cell) {
  case Cell::Lstm:
    return {4, 3, {"Sigmoid", "Tanh", "Tanh"}};
  case Cell::Gru:
    return {3, 2, {"Sigmoid", "Tanh", nullptr}};
  case Cell::Rnn:
    return {1, 1, {"Tanh", nullptr, nullptr}};
  }
  return {1, 1, {"Tanh", nullptr, nullptr}};
}

/// The activations a cell may use, and how many of alpha and beta each takes
/// (with their defaults).
struct ActivationSpec {
  const char *name;
  int params;
  double alpha, beta;
};
constexpr ActivationSpec kActivations[] = {
    {"Sigmoid", 0, 0, 0},   {"Tanh", 0, 0, 0},         {"Relu", 0, 0, 0},
    {"Softsign", 0, 0, 0},  {"Softplus", 0, 0, 0},     {"LeakyRelu", 1, 0.01, 0},
    {"HardSigmoid", 2, 0.2, 0.5}, {"Affine", 2, 1.0, 0}, {"ScaledTanh", 2, 1.0, 1.0},
};

Value activate(Composer &c, const Activation &f, Value x) {
  auto attr = [&](llvm::StringRef name, double value) {
    return c.n.builder.getNamedAttr(name, c.n.builder.getF32FloatAttr(value));
  };
  if (f.name == "Sigmoid")
    return c.unary("nn.sigmoid", x);
  if (f.name == "Tanh")
    return c.unary("nn.tanh", x);
  if (f.name == "Relu")
    return c.unary("nn.relu", x);
  if (f.name == "Softplus")
    return c.unary("nn.softplus", x);
  if (f.name == "Softsign") {
    Value magnitude = c.unary("nn.abs", x);
    Value one = c.scalar(1, x);
    Value denominator = c.add(one, magnitude);
    return c.div(x, denominator);
  }
  if (f.name == "LeakyRelu")
    return c.op("nn.leaky_relu", {x}, {attr("alpha", f.alpha)});
  if (f.name == "HardSigmoid")
    return c.op("nn.hard_sigmoid", {x}, {attr("alpha", f.alpha), attr("beta", f.beta)});
  if (f.name == "Affine") {
    Value scale = c.scalar(f.alpha, x), shift = c.scalar(f.beta, x);
    Value scaled = c.mul(x, scale);
    return c.add(scaled, shift);
  }
  // ScaledTanh: alpha * tanh(beta * x).
  Value inner = c.scalar(f.beta, x), outer = c.scalar(f.alpha, x);
  Value scaled = c.mul(x, inner);
  Value tanh = c.unary("nn.tanh", scaled);
  return c.mul(outer, tanh);
}

/// Entry d of a [dirs, ...] input, without the dirs dim.
Value direction(Composer &c, Value x, int64_t d) {
  Value entry = c.slice(x, 0, d, d + 1);
  Value axis = c.n.constantI64({0});
  return c.op("nn.squeeze", {entry, axis});
}

/// The node's activations, one list per direction.
FailureOr<SmallVector<Activation>> activations(NodeImporter &n, CellKind kind, int64_t dirs) {
  SmallVector<Activation> result;
  const onnx::AttributeProto *names = n.attribute("activations");
  const int64_t count = kind.activations * dirs;
  if (names && names->strings_size() != count)
    return n.error() << n.node.op_type() << " has " << names->strings_size()
                     << " activations, expected " << count;
  const onnx::AttributeProto *alphas = n.attribute("activation_alpha");
  const onnx::AttributeProto *betas = n.attribute("activation_beta");
  int nextAlpha = 0, nextBeta = 0;
  for (int64_t i = 0; i < count; ++i) {
    std::string name = names ? names->strings(i) : kind.defaults[i % kind.activations];
    const ActivationSpec *spec = nullptr;
    for (const ActivationSpec &candidate : kActivations)
      if (name == candidate.name)
        spec = &candidate;
    if (!spec)
      return n.error() << n.node.op_type() << " activation '" << name << "' is not supported";
    Activation f{name, spec->alpha, spec->beta};
    if (spec->params >= 1 && alphas && nextAlpha < alphas->floats_size())
      f.alpha = alphas->floats(nextAlpha++);
    if (spec->params >= 2 && betas && nextBeta < betas->floats_size())
      f.beta = betas->floats(nextBeta++);
    result.push_back(f);
  }
  return result;
}

Values importRecurrent(NodeImporter &n, Cell cell) {
  std::vector<AttrSpec> specs{{"activation_alpha", Kind::Floats},
                              {"activation_beta", Kind::Floats},
                              {"activations", Kind::Strings},
                              {"clip", Kind::Float},
                              {"direction", Kind::String},
                              {"hidden_size", Kind::Int, true},
                              {"layout", Kind::Int}};
  if (cell == Cell::Lstm)
    specs.push_back({"input_forget", Kind::Int});
  if (cell == Cell::Gru)
    specs.push_back({"linear_before_reset", Kind::Int});
  const unsigned maxInputs = cell == Cell::Lstm ? 8 : 6;
  if (failed(expectFloatNode(n, 3, maxInputs, specs)))
    return failure();
  const CellKind kind = kindOf(cell);
  const std::string directionName = n.getString("direction", "forward");
  if (directionName != "forward" && directionName != "reverse" &&
      directionName != "bidirectional")
    return n.error() << n.node.op_type() << " direction '" << directionName
                     << "' is not forward, reverse or bidirectional";
  const int64_t dirs = directionName == "bidirectional" ? 2 : 1;
  const int64_t hidden = n.getInt("hidden_size", 0), layout = n.getInt("layout", 0);
  auto x = rankedInput(n, 0), w = rankedInput(n, 1), r = rankedInput(n, 2);
  if (!x || !x.hasStaticShape() || x.getRank() != 3 || !w || !r)
    return n.error() << n.node.op_type() << " needs a static rank-3 input, got "
                     << n.input(0).getType();
  const int64_t steps = x.getDimSize(layout ? 1 : 0), batch = x.getDimSize(layout ? 0 : 1),
                features = x.getDimSize(2), gates = kind.gates;
  if (hidden < 1 || w.getShape() != llvm::ArrayRef<int64_t>{dirs, gates * hidden, features} ||
      r.getShape() != llvm::ArrayRef<int64_t>{dirs, gates * hidden, hidden})
    return n.error() << n.node.op_type() << " weights " << n.input(1).getType() << " and "
                     << n.input(2).getType() << " do not fit " << dirs << " direction(s), "
                     << gates << " gate(s) of hidden_size " << hidden << " and "
                     << features << " input features";
  auto fns = activations(n, kind, dirs);
  if (failed(fns))
    return failure();
  // Constant sequence lengths; all equal to the sequence is no mask at all.
  SmallVector<int64_t> lengths;
  if (n.input(4)) {
    auto given = constantInts(n, 4, "sequence_lens");
    if (failed(given))
      return failure();
    if (static_cast<int64_t>(given->size()) != batch)
      return n.error() << n.node.op_type() << " has " << given->size()
                       << " sequence_lens for a batch of " << batch;
    for (int64_t length : *given)
      if (length < 0 || length > steps)
        return n.error() << n.node.op_type() << " sequence length " << length
                         << " is outside [0, " << steps << "]";
    if (llvm::any_of(*given, [&](int64_t length) { return length != steps; }))
      lengths = *given;
  }
  const bool inputForget = cell == Cell::Lstm && n.getInt("input_forget", 0);
  const bool linearBeforeReset = cell == Cell::Gru && n.getInt("linear_before_reset", 0);
  const onnx::AttributeProto *clipAttr = n.attribute("clip");
  const double clip = clipAttr ? n.getFloat("clip", 0) : 0;
  Type element = x.getElementType();

  Composer c(n);
  Value input = n.input(0);
  if (layout)
    input = c.transpose(input, {1, 0, 2}); // [seq, batch, features]
  auto clipped = [&](Value v) {
    if (!clipAttr)
      return v;
    Value low = c.scalar(-clip, v), high = c.scalar(clip, v);
    Value capped = c.op("nn.min", {v, high});
    return c.op("nn.max", {capped, low});
  };
  auto gate = [&](Value all, int64_t g) { return c.slice(all, 1, g * hidden, (g + 1) * hidden); };
  SmallVector<Value> outputs, lastHidden, lastCell;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = directionName == "reverse" || d == 1;
    llvm::ArrayRef<Activation> f = llvm::ArrayRef(*fns).slice(d * kind.activations, kind.activations);
    // X W^T + Wb + Rb for every step: [seq, batch, gates * hidden].
    Value wT = c.transpose(direction(c, n.input(1), d), {1, 0});
    Value projected = c.op("nn.matmul", {input, wT});
    Value rT = c.transpose(direction(c, n.input(2), d), {1, 0});
    Value inputBias, recurrentBias;
    if (n.input(3)) {
      Value biases = direction(c, n.input(3), d);
      inputBias = c.slice(biases, 0, 0, gates * hidden);
      recurrentBias = c.slice(biases, 0, gates * hidden, 2 * gates * hidden);
      // GRU's candidate keeps its recurrent bias apart (inside the reset).
      Value folded = inputBias;
      if (cell != Cell::Gru) {
        folded = c.add(inputBias, recurrentBias);
      } else {
        Value zr = c.slice(recurrentBias, 0, 0, 2 * hidden);
        Value zeros = c.constantOf({hidden}, SmallVector<double>(hidden, 0.0), element);
        Value padded = c.op("nn.concat", {zr, zeros},
                            {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(0))});
        folded = c.add(inputBias, padded);
        recurrentBias = c.slice(recurrentBias, 0, 2 * hidden, 3 * hidden);
      }
      projected = c.add(projected, folded);
    }
    // Per-direction pieces every step reads: GRU's recurrent weights for the
    // z and r gates and for the candidate, LSTM's peepholes i, o, f.
    Value rzr, rh, pi, po, pf;
    if (cell == Cell::Gru) {
      rzr = c.slice(rT, 1, 0, 2 * hidden);
      rh = c.slice(rT, 1, 2 * hidden, 3 * hidden);
    }
    if (cell == Cell::Lstm && n.input(7)) {
      Value peephole = direction(c, n.input(7), d);
      pi = c.slice(peephole, 0, 0, hidden);
      po = c.slice(peephole, 0, hidden, 2 * hidden);
      pf = c.slice(peephole, 0, 2 * hidden, 3 * hidden);
    }
    Value zerosState = c.constantOf({batch, hidden}, SmallVector<double>(batch * hidden, 0.0), element);
    Value h = n.input(5) ? direction(c, n.input(5), d) : zerosState;
    Value cellState = cell == Cell::Lstm && n.input(6) ? direction(c, n.input(6), d) : zerosState;
    SmallVector<Value> ys(steps);
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t t = reverse ? steps - 1 - k : k;
      Value step = c.slice(projected, 0, t, t + 1);
      Value xt = c.reshape(step, {batch, gates * hidden});
      Value newH, newC;
      if (cell == Cell::Gru) {
        // H R^T for z and r; the candidate's (of H or of r * H) below.
        Value hr = c.op("nn.matmul", {h, rzr});
        Value xz = gate(xt, 0), xr = gate(xt, 1), xh = gate(xt, 2);
        Value preZ = c.add(xz, gate(hr, 0));
        Value preR = c.add(xr, gate(hr, 1));
        Value z = activate(c, f[0], clipped(preZ));
        Value reset = activate(c, f[0], clipped(preR));
        Value candidate;
        if (linearBeforeReset) {
          Value hh = c.op("nn.matmul", {h, rh});
          if (recurrentBias)
            hh = c.add(hh, recurrentBias);
          Value gated = c.mul(reset, hh);
          candidate = c.add(xh, gated);
        } else {
          Value resetH = c.mul(reset, h);
          Value hh = c.op("nn.matmul", {resetH, rh});
          if (recurrentBias)
            hh = c.add(hh, recurrentBias);
          candidate = c.add(xh, hh);
        }
        Value g = activate(c, f[1], clipped(candidate));
        // (1 - z) * g + z * h = g + z * (h - g).
        Value delta = c.sub(h, g);
        Value kept = c.mul(z, delta);
        newH = c.add(g, kept);
      } else {
        Value hr = c.op("nn.matmul", {h, rT});
        Value pre = c.add(xt, hr);
        if (cell == Cell::Rnn) {
          newH = activate(c, f[0], clipped(pre));
        } else {
          // Gates in ONNX's order i, o, f, c; peepholes i, o, f.
          Value preI = gate(pre, 0), preO = gate(pre, 1), preF = gate(pre, 2), preC = gate(pre, 3);
          if (pi) {
            Value ic = c.mul(pi, cellState);
            preI = c.add(preI, ic);
            Value fc = c.mul(pf, cellState);
            preF = c.add(preF, fc);
          }
          Value i = activate(c, f[0], clipped(preI));
          Value forget;
          if (inputForget) {
            Value one = c.scalar(1, i);
            forget = c.sub(one, i);
          } else {
            forget = activate(c, f[0], clipped(preF));
          }
          Value candidate = activate(c, f[1], clipped(preC));
          Value keptC = c.mul(forget, cellState);
          Value addedC = c.mul(i, candidate);
          newC = c.add(keptC, addedC);
          if (po) {
            Value oc = c.mul(po, newC);
            preO = c.add(preO, oc);
          }
          Value o = activate(c, f[0], clipped(preO));
          Value squashed = activate(c, f[2], newC);
          newH = c.mul(o, squashed);
        }
      }
      Value y = newH;
      if (!lengths.empty()) {
        SmallVector<double> valid;
        for (int64_t length : lengths)
          valid.push_back(t < length);
        Value mask = c.constantOf({batch, 1}, valid, n.builder.getI1Type());
        y = c.op("nn.where", {mask, newH, zerosState});
        newH = c.op("nn.where", {mask, newH, h});
        if (newC)
          newC = c.op("nn.where", {mask, newC, cellState});
      }
      h = newH;
      if (newC)
        cellState = newC;
      ys[t] = y;
    }
    // [seq, 1, batch, hidden] for this direction.
    SmallVector<Value> stacked;
    for (Value y : ys)
      stacked.push_back(c.reshape(y, {1, 1, batch, hidden}));
    outputs.push_back(steps == 1 ? stacked[0]
                                 : c.op("nn.concat", stacked,
                                        {n.builder.getNamedAttr("axis",
                                                                n.builder.getI64IntegerAttr(0))}));
    lastHidden.push_back(c.reshape(h, {1, batch, hidden}));
    if (cell == Cell::Lstm)
      lastCell.push_back(c.reshape(cellState, {1, batch, hidden}));
  }
  auto join = [&](llvm::ArrayRef<Value> parts, int64_t axis) {
    if (parts.size() == 1)
      return parts[0];
    return c.op("nn.concat", parts,
                {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(axis))});
  };
  Value y = join(outputs, 1), yh = join(lastHidden, 0);
  Value yc = cell == Cell::Lstm ? join(lastCell, 0) : nullptr;
  if (layout) {
    y = c.transpose(y, {2, 0, 1, 3});  // [batch, seq, dirs, hidden]
    yh = c.transpose(yh, {1, 0, 2});   // [batch, dirs, hidden]
    if (yc)
      yc = c.transpose(yc, {1, 0, 2});
  }
  auto result = c.result(y);
  if (succeeded(result)) {
    result->push_back(yh);
    if (cell == Cell::Lstm)
      result->push_back(yc);
    result->resize(std::max(1u, n.numOutputs()));
  }
  return result;
}
} // namespace

void pipe::onnx_import::addRecurrent(const AddOp &add) {
  add("LSTM", {1, 7, 14, 22}, 7, [](NodeImporter &n) { return importRecurrent(n, Cell::Lstm); });
  add("GRU", {1, 3, 7, 14, 22}, 7, [](NodeImporter &n) { return importRecurrent(n, Cell::Gru); });
  add("RNN", {1, 7, 14, 22}, 7, [](NodeImporter &n) { return importRecurrent(n, Cell::Rnn); });
}
