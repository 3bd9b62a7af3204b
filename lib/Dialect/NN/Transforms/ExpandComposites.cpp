//===- ExpandComposites.cpp - nn.lstm, nn.gru, nn.rnn as their cells ------===//
//
// A recurrent layer over a sequence of static length is its cells, one per
// step and direction, each a few matmuls and element-wise ops: that formula
// is its cost, its gradient (backpropagation through time by the ops' own
// rules) and its kernels. The input's projection X W^T (+ both biases) is
// one matmul over all steps; each step adds H R^T, splits the gates and
// applies the activations. Directions: forward, reverse, bidirectional;
// layouts 0 ([seq, batch, ...]) and 1 ([batch, seq, ...]); initial states,
// peepholes, clip, input_forget, linear_before_reset, the activations and
// their alpha/beta. sequence_lens shorter than the sequence freeze a batch
// entry's state and zero its outputs past its length.
//
//===----------------------------------------------------------------------===//
#include "pipe/Dialect/NN/IR/NNRecurrent.h"
#include "pipe/Dialect/NN/Transforms/OpComposer.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"

namespace pipe::nn {
#define GEN_PASS_DEF_NNEXPANDCOMPOSITES
#include "pipe/Dialect/NN/Transforms/Passes.h.inc"
} // namespace pipe::nn

using namespace mlir;
using namespace pipe::nn;
using llvm::SmallVector;

namespace {

Value activate(OpComposer &c, const RecurrentActivation &f, Value x) {
  auto attr = [&](llvm::StringRef name, double value) {
    return c.builder.getNamedAttr(name, c.builder.getF32FloatAttr(value));
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

FailureOr<SmallVector<Value>> expandRecurrent(Operation *op, const RecurrentLayer &l,
                                              OpBuilder &builder) {
  std::string message;
  auto fns = l.resolveActivations(message);
  auto x = dyn_cast<RankedTensorType>(l.x.getType());
  if (failed(fns) || !x || !x.hasStaticShape())
    return op->emitOpError("needs a static input and supported activations to be expanded");
  const int64_t dirs = l.directions(), hidden = l.hiddenSize, gates = l.gates(),
                perDirection = l.activationsPerDirection();
  const int64_t steps = x.getDimSize(l.layout ? 1 : 0), batch = x.getDimSize(l.layout ? 0 : 1);
  const bool lstm = l.cell == RecurrentCell::Lstm, gru = l.cell == RecurrentCell::Gru;
  SmallVector<int64_t> lengths;
  if (l.sequenceLengths && llvm::any_of(*l.sequenceLengths,
                                        [&](int64_t length) { return length != steps; }))
    lengths.assign(l.sequenceLengths->begin(), l.sequenceLengths->end());
  Type element = x.getElementType();

  OpComposer c(builder, op->getLoc());
  // Everything in layout 0: [seq, batch, features], states [dirs, batch, hidden].
  Value input = l.layout ? c.transpose(l.x, {1, 0, 2}) : l.x;
  Value initialH = l.initialH, initialC = l.initialC;
  if (l.layout && initialH)
    initialH = c.transpose(initialH, {1, 0, 2});
  if (l.layout && initialC)
    initialC = c.transpose(initialC, {1, 0, 2});
  auto clipped = [&](Value v) {
    if (!l.clip)
      return v;
    Value low = c.scalar(-*l.clip, v), high = c.scalar(*l.clip, v);
    Value capped = c.op("nn.min", {v, high});
    return c.op("nn.max", {capped, low});
  };
  auto gate = [&](Value all, int64_t g) { return c.slice(all, 1, g * hidden, (g + 1) * hidden); };
  SmallVector<Value> outputs, lastHidden, lastCell;
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = l.direction == "reverse" || d == 1;
    llvm::ArrayRef<RecurrentActivation> f =
        llvm::ArrayRef(*fns).slice(d * perDirection, perDirection);
    // X W^T + Wb + Rb for every step: [seq, batch, gates * hidden].
    Value w = c.select(l.w, 0, d);
    Value wT = c.transpose(w, {1, 0});
    Value projected = c.op("nn.matmul", {input, wT});
    Value r = c.select(l.r, 0, d);
    Value rT = c.transpose(r, {1, 0});
    Value recurrentBias;
    if (l.b) {
      Value biases = c.select(l.b, 0, d);
      Value inputBias = c.slice(biases, 0, 0, gates * hidden);
      recurrentBias = c.slice(biases, 0, gates * hidden, 2 * gates * hidden);
      // GRU's candidate keeps its recurrent bias apart (inside the reset).
      Value folded;
      if (!gru) {
        folded = c.add(inputBias, recurrentBias);
      } else {
        Value zr = c.slice(recurrentBias, 0, 0, 2 * hidden);
        Value zeros = c.constantOf({hidden}, SmallVector<double>(hidden, 0.0), element);
        Value padded = c.concat({zr, zeros}, 0);
        folded = c.add(inputBias, padded);
        recurrentBias = c.slice(recurrentBias, 0, 2 * hidden, 3 * hidden);
      }
      projected = c.add(projected, folded);
    }
    // Per-direction pieces every step reads: GRU's recurrent weights for the
    // z and r gates and for the candidate, LSTM's peepholes i, o, f.
    Value rzr, rh, pi, po, pf;
    if (gru) {
      rzr = c.slice(rT, 1, 0, 2 * hidden);
      rh = c.slice(rT, 1, 2 * hidden, 3 * hidden);
    }
    if (lstm && l.peepholes) {
      Value peephole = c.select(l.peepholes, 0, d);
      pi = c.slice(peephole, 0, 0, hidden);
      po = c.slice(peephole, 0, hidden, 2 * hidden);
      pf = c.slice(peephole, 0, 2 * hidden, 3 * hidden);
    }
    Value zerosState =
        c.constantOf({batch, hidden}, SmallVector<double>(batch * hidden, 0.0), element);
    Value h = initialH ? c.select(initialH, 0, d) : zerosState;
    Value cellState = lstm && initialC ? c.select(initialC, 0, d) : zerosState;
    SmallVector<Value> ys(steps);
    for (int64_t k = 0; k < steps; ++k) {
      const int64_t t = reverse ? steps - 1 - k : k;
      Value step = c.slice(projected, 0, t, t + 1);
      Value xt = c.reshape(step, {batch, gates * hidden});
      Value newH, newC;
      if (gru) {
        // H R^T for z and r; the candidate's (of H or of r * H) below.
        Value hr = c.op("nn.matmul", {h, rzr});
        Value xz = gate(xt, 0), xr = gate(xt, 1), xh = gate(xt, 2);
        Value preZ = c.add(xz, gate(hr, 0));
        Value preR = c.add(xr, gate(hr, 1));
        Value z = activate(c, f[0], clipped(preZ));
        Value reset = activate(c, f[0], clipped(preR));
        Value candidate;
        if (l.linearBeforeReset) {
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
        if (!lstm) {
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
          if (l.inputForget) {
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
        Value mask = c.constantOf({batch, 1}, valid, builder.getI1Type());
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
    outputs.push_back(c.concat(stacked, 0));
    lastHidden.push_back(c.reshape(h, {1, batch, hidden}));
    if (lstm)
      lastCell.push_back(c.reshape(cellState, {1, batch, hidden}));
  }
  Value y = c.concat(outputs, 1), yh = c.concat(lastHidden, 0);
  Value yc = lstm ? c.concat(lastCell, 0) : nullptr;
  if (l.layout) {
    y = c.transpose(y, {2, 0, 1, 3}); // [batch, seq, dirs, hidden]
    yh = c.transpose(yh, {1, 0, 2});  // [batch, dirs, hidden]
    if (yc)
      yc = c.transpose(yc, {1, 0, 2});
  }
  if (c.failed())
    return failure();
  SmallVector<Value> results{y, yh};
  if (lstm)
    results.push_back(yc);
  return results;
}

struct NNExpandCompositesPass
    : pipe::nn::impl::NNExpandCompositesBase<NNExpandCompositesPass> {
  void runOnOperation() override {
    if (failed(expandComposites(getOperation())))
      signalPassFailure();
  }
};

} // namespace

FailureOr<SmallVector<Value>> pipe::nn::expandComposite(Operation *op, OpBuilder &builder) {
  if (std::optional<RecurrentLayer> layer = getRecurrentLayer(op))
    return expandRecurrent(op, *layer, builder);
  return op->emitOpError("is not a composite op");
}

LogicalResult pipe::nn::expandComposites(Operation *root,
                                         llvm::function_ref<void(Operation *, Operation *)> onMade) {
  SmallVector<Operation *> composites;
  root->walk([&](Operation *op) {
    if (isComposite(op))
      composites.push_back(op);
  });
  for (Operation *op : composites) {
    OpBuilder builder(op);
    Operation *before = op->getPrevNode();
    auto values = expandComposite(op, builder);
    if (failed(values))
      return failure();
    SmallVector<Operation *> made;
    for (Operation *next = before ? before->getNextNode() : &op->getBlock()->front(); next != op;
         next = next->getNextNode())
      made.push_back(next);
    for (auto [result, value] : llvm::zip(op->getResults(), *values)) {
      if (result.getType() != value.getType())
        return op->emitOpError("expands to ")
               << value.getType() << " where its result is " << result.getType();
      result.replaceAllUsesWith(value);
    }
    // What computes only results nobody reads (a last state, the outputs of
    // a layer whose states alone are read) is not kept: neither run nor costed.
    SmallVector<Operation *> kept;
    for (Operation *formulaOp : llvm::reverse(made)) {
      if (formulaOp->use_empty())
        formulaOp->erase();
      else
        kept.push_back(formulaOp);
    }
    if (onMade)
      for (Operation *formulaOp : llvm::reverse(kept))
        onMade(op, formulaOp);
    op->erase();
  }
  return success();
}
