//===- MemoryModel.cpp - GPU memory of parameters and activations ---------===//
#include "pipe/Analysis/MemoryModel.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace pipe;

std::optional<OptimizerKind> pipe::parseOptimizerKind(llvm::StringRef text) {
  if (text.equals_insensitive("sgd"))
    return OptimizerKind::SGD;
  if (text.equals_insensitive("momentum"))
    return OptimizerKind::Momentum;
  if (text.equals_insensitive("adam") || text.equals_insensitive("adamw"))
    return OptimizerKind::Adam;
  return std::nullopt;
}

llvm::StringRef pipe::toString(OptimizerKind kind) {
  switch (kind) {
  case OptimizerKind::SGD: return "sgd";
  case OptimizerKind::Momentum: return "momentum";
  case OptimizerKind::Adam: return "adam";
  }
  return "adam";
}

ParameterMemory pipe::computeParameterMemory(ArrayRef<Operation *> ops,
                                             const TrainingPolicy &policy) {
  ParameterMemory m;
  for (Operation *op : ops) {
    auto param = dyn_cast<nn::ParamOp>(op);
    if (!param)
      continue;
    Value v = param.getOutput();
    double n = numElements(v);
    if (param.getTrainable() && isa<FloatType>(getElementTypeOrSelf(v.getType()))) {
      m.trainableParameters += n;
    } else {
      m.bufferElements += n;
      m.bufferBytes += n * elementBytes(v, 4);
    }
  }
  m.weightBytes = m.trainableParameters * policy.weightBytesPerParameter();
  m.gradientBytes = m.trainableParameters * policy.gradientBytesPerParameter();
  m.masterBytes = m.trainableParameters * policy.masterBytesPerParameter();
  m.optimizerBytes = m.trainableParameters * policy.optimizerBytesPerParameter();
  return m;
}

/// Views share their operand's storage: reshape-like ops and inactive dropout.
static bool isView(const CostAnalysis &analysis, Operation *op) {
  if (isa<nn::ReshapeOp, nn::FlattenOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::IdentityOp>(op))
    return true;
  if (isa<nn::DropoutOp>(op))
    if (const OpRecord *r = analysis.lookup(op))
      return r->cost.kind == KernelClass::Free;
  return false;
}

/// The value whose storage `v` uses: views (isView) share their operand's, when
/// the view is one of the ops `inside` accepts.
static Value storageRoot(const CostAnalysis &analysis, Value v,
                         llvm::function_ref<bool(Operation *)> inside) {
  while (Operation *def = v.getDefiningOp()) {
    if (!inside(def) || !isView(analysis, def) || def->getNumOperands() == 0)
      break;
    v = def->getOperand(0);
  }
  return v;
}

double pipe::kernelScratchBytes(Operation *op) {
  auto conv = dyn_cast<nn::ConvOp>(op);
  if (!conv)
    return 0;
  auto input = dyn_cast<RankedTensorType>(conv.getInput().getType());
  auto weight = dyn_cast<RankedTensorType>(conv.getWeight().getType());
  auto output = dyn_cast<RankedTensorType>(conv.getOutput().getType());
  if (!input || !weight || !output || !input.hasStaticShape() || !weight.hasStaticShape() ||
      !output.hasStaticShape())
    return 0;
  SmallVector<int64_t> kernel(weight.getShape().drop_front(2));
  std::string error;
  auto window = nn::computeWindowGeometry(input.getShape().drop_front(2), kernel,
                                          conv.getStrides(), conv.getDilations(),
                                          conv.getPads(), conv.getAutoPad(), false, error);
  if (!window)
    return 0;
  SmallVector<int64_t> pads(window->padsBegin);
  pads.append(window->padsEnd.begin(), window->padsEnd.end());
  return nn::convScratchBytes(weight.getShape(), output.getShape(), window->strides, pads);
}

namespace {
/// Runs `op`'s gradient rule into a block of its own, with a block argument
/// for each result gradient and forward value it asks for, to see what the
/// rule allocates besides the gradients it gives.
class RuleRecorder final : public nn::GradientEmitter {
public:
  RuleRecorder(const CostAnalysis &analysis, Operation *op)
      : analysis(analysis), op(op), builder(op->getContext()) {
    builder.setInsertionPointToEnd(&block);
  }
  ~RuleRecorder() override { block.dropAllReferences(); }

  OpBuilder &getBuilder() override { return builder; }
  Value getResultGradient(unsigned index) override {
    Value result = op->getResult(index);
    if (!analysis.requiresGrad(result))
      return Value();
    Value &known = resultGradients[result];
    if (!known)
      known = argument(result);
    return known;
  }
  bool needsGradient(unsigned index) override {
    Value operand = op->getOperand(index);
    return analysis.requiresGrad(operand) && isa<FloatType>(getElementTypeOrSelf(operand.getType()));
  }
  Value getForwardValue(Value value) override {
    Value &known = forward[value];
    if (!known) {
      known = argument(value);
      if (recomputed(value))
        recomputedArguments.insert(known);
    }
    return known;
  }
  void addOperandGradient(unsigned index, Value gradient) override {
    given.push_back({index, gradient, static_cast<int>(block.getOperations().size())});
  }

  /// The rule's timeline: its temporaries, the gradients it gives (and which
  /// are new allocations), and when the result gradients are freed.
  RuleMemory measure() {
    RuleMemory memory;
    if (auto rule = dyn_cast<nn::GradientOpInterface>(op)) {
      // A rule that does not apply reports why; that is pipe-differentiate's to say.
      ScopedDiagnosticHandler quiet(op->getContext(), [](Diagnostic &) { return success(); });
      if (failed(rule.emitGradient(*this)))
        return memory;
    }
    // Storage of each value the rule makes (views share their operand's), and
    // of the result gradients it reads (block arguments, not its own).
    llvm::DenseMap<Value, Value> rootOf;
    llvm::DenseMap<Value, std::pair<int, int>> range; // root -> first, last position
    for (auto &[result, gradient] : resultGradients) {
      rootOf[gradient] = gradient;
      range[gradient] = {-1, -1};
    }
    for (Value argument : recomputedArguments) {
      rootOf[argument] = argument;
      range[argument] = {-1, -1};
    }
    auto root = [&](Value v) {
      auto it = rootOf.find(v);
      return it == rootOf.end() ? Value() : it->second;
    };
    int position = 0;
    for (Operation &made : block) {
      for (Value operand : made.getOperands())
        if (Value r = root(operand)) {
          std::pair<int, int> &span = range[r];
          if (span.first < 0)
            span.first = position; // an argument: from its first read
          span.second = position;
        }
      bool view = isa<nn::ReshapeOp, nn::FlattenOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::IdentityOp>(made);
      for (Value result : made.getResults()) {
        Value r = view && made.getNumOperands() > 0 ? root(made.getOperand(0)) : result;
        if (view && !r)
          continue; // a view of an argument: no new storage
        rootOf[result] = r;
        auto [it, inserted] = range.try_emplace(r, position, position);
        if (!inserted)
          it->second.second = position;
      }
      ++position;
    }
    llvm::DenseSet<Value> givenRoots;
    for (const Given &g : given)
      if (Value r = root(g.gradient))
        givenRoots.insert(r);
    std::vector<double> live(static_cast<size_t>(position) + 1, 0.0);
    for (auto &[r, span] : range) {
      // Block arguments are the result gradients and forward values: the
      // recomputed ones are the stage's to charge.
      if (givenRoots.contains(r) || r.getDefiningOp<nn::ConstantOp>() || span.first < 0 ||
          isa<BlockArgument>(r))
        continue;
      live[span.first] += analysis.bytes(r);
      live[span.second + 1] -= analysis.bytes(r);
    }
    memory.temporariesAt.assign(static_cast<size_t>(position) + 1, 0.0);
    double running = 0;
    for (int k = 0; k < position; ++k) {
      memory.temporariesAt[k] = (running += live[k]);
      memory.temporaryBytes = std::max(memory.temporaryBytes, running);
    }
    memory.resultGradientsFreedAt.assign(static_cast<size_t>(position) + 1, 0.0);
    for (auto &[result, gradient] : resultGradients)
      if (!givenRoots.contains(gradient))
        for (int k = range.lookup(gradient).second + 1; k <= position; ++k)
          memory.resultGradientsFreedAt[k] += analysis.bytes(result);
    for (const Given &g : given) {
      RuleMemory::Given out;
      out.operand = g.operand;
      out.givenAt = g.at;
      out.madeAt = g.at;
      if (Value r = root(g.gradient); r && !isa<BlockArgument>(r)) {
        out.freshBytes = analysis.bytes(r);
        out.madeAt = range.lookup(r).first;
      }
      memory.given.push_back(out);
    }
    for (auto &[value, argument] : forward)
      if (recomputedArguments.contains(argument))
        memory.recomputed.push_back(value);
    return memory;
  }

private:
  Value argument(Value like) { return block.addArgument(like.getType(), op->getLoc()); }
  /// Whether pipe-differentiate computes `value` again in the backward into an
  /// allocation of its own: a value computed from parameters and constants only
  /// (a transposed weight), not one of them or a view of one.
  bool recomputed(Value value) {
    if (!analysis.isStatic(value))
      return false;
    while (Operation *def = value.getDefiningOp()) {
      if (isa<nn::ParamOp>(def) || def->hasTrait<OpTrait::ConstantLike>())
        return false;
      if (!isView(analysis, def) || def->getNumOperands() == 0)
        return true;
      value = def->getOperand(0);
    }
    return false;
  }

  const CostAnalysis &analysis;
  Operation *op;
  Block block;
  OpBuilder builder;
  llvm::DenseMap<Value, Value> forward;
  llvm::MapVector<Value, Value> resultGradients; ///< result -> its gradient argument
  llvm::SetVector<Value> recomputedArguments;    ///< forward values computed again
  struct Given {
    unsigned operand;
    Value gradient;
    int at; ///< ops of the rule made before it was given
  };
  SmallVector<Given> given;
};
} // namespace

RuleMemory pipe::measureGradientRule(const CostAnalysis &analysis, Operation *op) {
  return RuleRecorder(analysis, op).measure();
}

/// The most that computing `value` again holds at once: pipe-differentiate
/// clones the ops computing it from parameters and constants in program order;
/// each op's result (views share their operand's storage) lives until its last
/// reader among them, `value` itself to the end.
static double recomputePeakBytes(const CostAnalysis &analysis, Value value) {
  SmallVector<Operation *> needed;
  llvm::DenseSet<Operation *> seen;
  SmallVector<Value> pending{value};
  while (!pending.empty()) {
    Value v = pending.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !analysis.isStatic(v) || isParameterOrConstant(def) || !seen.insert(def).second)
      continue;
    needed.push_back(def);
    llvm::append_range(pending, def->getOperands());
  }
  llvm::sort(needed, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  llvm::DenseMap<Value, Value> rootOf;
  llvm::DenseMap<Value, size_t> lastRead;
  for (auto [k, op] : llvm::enumerate(needed)) {
    for (Value operand : op->getOperands())
      if (Value root = rootOf.lookup(operand))
        lastRead[root] = k;
    for (Value result : op->getResults())
      if (!isView(analysis, op) || op->getNumOperands() == 0)
        rootOf[result] = result;
      else if (Value root = rootOf.lookup(op->getOperand(0)))
        rootOf[result] = root; // a view of a parameter owns no storage
  }
  const Value kept = rootOf.lookup(value);
  double live = 0, peak = 0;
  for (auto [k, op] : llvm::enumerate(needed)) {
    for (Value result : op->getResults())
      if (rootOf.lookup(result) == result)
        live += analysis.bytes(result);
    peak = std::max(peak, live);
    for (Value result : op->getResults())
      if (rootOf.lookup(result) == result && result != kept &&
          lastRead.lookup(result) <= k)
        live -= analysis.bytes(result);
  }
  return peak;
}

StageMemory pipe::computeStageMemory(const CostAnalysis &analysis, ArrayRef<Operation *> ops,
                                     const TrainingPolicy &policy) {
  StageMemory m;
  m.parameters = computeParameterMemory(ops, policy);
  const int n = static_cast<int>(ops.size());
  if (n == 0)
    return m;
  llvm::DenseMap<Operation *, int> position;
  for (int i = 0; i < n; ++i)
    position[ops[i]] = i;

  auto rootOf = [&](Value v) {
    return storageRoot(analysis, v, [&](Operation *def) { return position.count(def) > 0; });
  };

  // Storage the stage allocates: activations, and values computed from
  // parameters and constants only by its own ops (a transposed weight, whose
  // gradient flows back to the weight), not parameters and constants themselves.
  auto tracked = [&](Value root) {
    if (!analysis.isStatic(root))
      return true;
    Operation *def = root.getDefiningOp();
    return def && position.count(def) && !isParameterOrConstant(def);
  };

  // Live ranges of every activation (by storage root) in forward positions.
  struct Range {
    int start = 0, end = -1;
  };
  llvm::MapVector<Value, Range> ranges;
  auto touch = [&](Value root, int at) {
    auto [it, inserted] = ranges.try_emplace(root);
    if (inserted) {
      Operation *def = root.getDefiningOp();
      auto pos = def ? position.find(def) : position.end();
      it->second.start = pos != position.end() ? pos->second : 0;
      it->second.end = it->second.start;
    }
    it->second.end = std::max(it->second.end, at);
  };
  for (int i = 0; i < n; ++i) {
    Operation *op = ops[i];
    for (Value v : op->getOperands())
      if (Value root = rootOf(v); tracked(root))
        touch(root, i);
    for (Value r : op->getResults()) {
      Value root = rootOf(r);
      if (!tracked(root))
        continue;
      touch(root, i);
      for (Operation *user : r.getUsers())
        if (!position.count(user)) // sent to a later stage or returned
          touch(root, n - 1);
    }
  }

  // Saved activations: each storage root once, plus the rules' extra bytes.
  llvm::DenseSet<Value> saved;
  for (Operation *op : ops) {
    const OpRecord *r = analysis.lookup(op);
    if (!r)
      continue;
    m.savedBytes += r->saved.extraBytes;
    for (Value v : r->saved.values) {
      if (analysis.isStatic(v))
        continue;
      Value root = rootOf(v);
      if (saved.insert(root).second)
        m.savedBytes += analysis.bytes(root);
    }
  }

  // Forward: transient = live values that are not kept for the backward.
  std::vector<double> delta(n + 1, 0.0);
  for (auto &[root, range] : ranges) {
    if (saved.contains(root))
      continue;
    delta[range.start] += analysis.bytes(root);
    delta[range.end + 1] -= analysis.bytes(root);
  }
  // Each kernel's scratch is live on top while it runs, forward and backward;
  // so is, in the backward, the gradient of each trainable parameter the op
  // reads, from the kernel that computes it to its accumulation.
  std::vector<double> scratch(n), parameterGradients(n, 0.0);
  std::vector<RuleMemory> rules(n);
  for (int i = 0; i < n; ++i) {
    scratch[i] = kernelScratchBytes(ops[i]);
    if (!isa<nn::ParamOp>(ops[i]) &&
        llvm::any_of(ops[i]->getResults(), [&](Value r) { return analysis.requiresGrad(r); })) {
      rules[i] = measureGradientRule(analysis, ops[i]);
    }
    for (Value operand : ops[i]->getOperands())
      if (auto param = operand.getDefiningOp<nn::ParamOp>())
        if (param.getTrainable() && isa<FloatType>(getElementTypeOrSelf(operand.getType())))
          parameterGradients[i] += numElements(operand) * policy.gradientBytesPerParameter();
  }
  double live = 0;
  for (int i = 0; i < n; ++i)
    m.forwardPeakBytes = std::max(m.forwardPeakBytes, (live += delta[i]) + scratch[i]);
  // The model inputs arrive as workspace when the forward starts, saved ones
  // included (they are saved right after).
  double inputs = 0;
  for (auto &[root, range] : ranges)
    if (isa<BlockArgument>(root))
      inputs += analysis.bytes(root);
  m.forwardPeakBytes = std::max(m.forwardPeakBytes, inputs);

  // Backward, in reverse order. Each value read several times gets a partial
  // gradient from each reader's rule, added to the sum so far as soon as the
  // rule gives it. Where a sum exists (every reader but the first in backward
  // order, or every one when a later stage sends the value's gradient back),
  // the new sum and the partial when the rule allocates it (not when it passes
  // a gradient on, as an add does) are live beside the old sum at that moment,
  // with the rule's temporaries and the gradients it made and has not given.
  // The first gradient of a value the op reads last starts with the rule that
  // makes it: live from when it is made (an allocated one) or from the rule's
  // end (one passed on shares the result gradient's storage until then).
  std::vector<llvm::SmallDenseMap<unsigned, double, 4>> accumulating(n), starting(n);
  llvm::DenseSet<Value> startsInRule;
  llvm::MapVector<Value, SmallVector<std::pair<int, unsigned>>> readers;
  for (int i = 0; i < n; ++i) {
    bool flowsBack = llvm::any_of(ops[i]->getResults(),
                                  [&](Value r) { return analysis.requiresGrad(r); });
    if (!flowsBack)
      continue;
    for (auto [index, operand] : llvm::enumerate(ops[i]->getOperands()))
      if (tracked(rootOf(operand)) && analysis.requiresGrad(operand))
        readers[operand].emplace_back(i, static_cast<unsigned>(index));
  }
  for (auto &[value, at] : readers) {
    bool sent = llvm::any_of(value.getUsers(),
                             [&](Operation *user) { return !position.count(user); });
    // `at` is in forward order: the last reader's rule runs first.
    for (size_t k = 0; k < at.size(); ++k) {
      auto [i, index] = at[k];
      if (sent || k + 1 < at.size()) {
        accumulating[i][index] = analysis.bytes(value);
        continue;
      }
      // The sum starts here when no later op keeps the value live.
      auto range = ranges.find(value);
      if (rootOf(value) == value && range != ranges.end() && range->second.end == i) {
        starting[i][index] = analysis.bytes(value);
        startsInRule.insert(value);
      }
    }
  }
  // Gradients in `delta`: live from the backward of the value's last consumer
  // (after its rule, for those that start in it) to the backward of its producer
  // (received gradients of sent values from the start, gradients of received
  // inputs until the end, when they are sent back).
  std::fill(delta.begin(), delta.end(), 0.0);
  for (auto &[root, range] : ranges) {
    if (!analysis.requiresGrad(root))
      continue;
    Operation *def = root.getDefiningOp();
    bool input = !def || !position.count(def);
    int revStart = n - 1 - range.end + (startsInRule.contains(root) ? 1 : 0);
    int revEnd = input ? n - 1 : n - 1 - range.start;
    if (revStart > revEnd)
      continue;
    delta[revStart] += analysis.bytes(root);
    delta[revEnd + 1] -= analysis.bytes(root);
  }
  // Forward values the backward computes again (a transposed weight): computed
  // once, before the first rule that reads one (in backward order), with what
  // computing it holds at once, and kept until the last.
  llvm::MapVector<Value, std::pair<int, int>> recomputedReaders; // forward positions
  for (int i = 0; i < n; ++i)
    for (Value v : rules[i].recomputed) {
      auto [it, inserted] = recomputedReaders.try_emplace(v, i, i);
      it->second.first = std::min(it->second.first, i);
      it->second.second = std::max(it->second.second, i);
    }
  std::vector<double> recomputing(n, 0.0);
  for (auto &[v, readers] : recomputedReaders) {
    delta[n - 1 - readers.second] += analysis.bytes(v);
    delta[n - readers.first] -= analysis.bytes(v);
    recomputing[readers.second] =
        std::max(recomputing[readers.second], recomputePeakBytes(analysis, v) - analysis.bytes(v));
  }
  // What each rule holds beyond `delta` (which has the op's result gradients
  // throughout), at the largest of two kinds of moment: while its k-th op runs
  // (its temporaries, the gradients made and not yet added to a sum, less the
  // result gradients freed before), and as it gives a gradient to a sum (the
  // same, with the new sum).
  std::vector<double> ruleExtra(n, 0.0);
  for (int i = 0; i < n; ++i) {
    const RuleMemory &rule = rules[i];
    ruleExtra[i] = rule.temporaryBytes;
    // Allocated gradients made by op k at the latest: those that start a sum,
    // and those for a sum not given before op k + 1.
    auto pending = [&](int k) {
      double bytes = 0;
      for (const RuleMemory::Given &h : rule.given)
        if (h.madeAt <= k && (starting[i].count(h.operand) ||
                              (accumulating[i].count(h.operand) && h.givenAt > k)))
          bytes += h.freshBytes;
      return bytes;
    };
    for (size_t k = 0; k + 1 < rule.temporariesAt.size(); ++k)
      ruleExtra[i] = std::max(ruleExtra[i], rule.temporariesAt[k] - rule.resultGradientsFreedAt[k] +
                                                pending(static_cast<int>(k)));
    for (const RuleMemory::Given &g : rule.given) {
      auto sum = accumulating[i].find(g.operand);
      if (sum == accumulating[i].end())
        continue;
      const size_t at = static_cast<size_t>(g.givenAt);
      const double temporariesThen = at > 0 ? rule.temporariesAt[at - 1] : 0.0;
      ruleExtra[i] = std::max(ruleExtra[i], temporariesThen - rule.resultGradientsFreedAt[at] +
                                                pending(g.givenAt - 1) + sum->second);
    }
  }
  live = 0;
  for (int j = 0; j < n; ++j) {
    const int i = n - 1 - j;
    m.backwardPeakBytes =
        std::max(m.backwardPeakBytes,
                 (live += delta[j]) +
                     std::max(scratch[i] + parameterGradients[i] + ruleExtra[i], recomputing[i]));
  }
  return m;
}

LayerSavedBytes
pipe::computeLayerSavedBytes(const CostAnalysis &analysis,
                             llvm::ArrayRef<std::vector<Operation *>> layers) {
  llvm::DenseSet<Operation *> inFunction;
  for (const std::vector<Operation *> &layer : layers)
    inFunction.insert(layer.begin(), layer.end());
  auto rootOf = [&](Value v) {
    return storageRoot(analysis, v, [&](Operation *def) { return inFunction.contains(def); });
  };
  LayerSavedBytes result;
  result.bytes.assign(layers.size(), 0.0);
  // The layers keeping each root, in order of first appearance.
  llvm::MapVector<Value, SmallVector<int, 2>> keepers;
  for (auto [i, layer] : llvm::enumerate(layers))
    for (Operation *op : layer) {
      const OpRecord *r = analysis.lookup(op);
      if (!r)
        continue;
      result.bytes[i] += r->saved.extraBytes;
      for (Value v : r->saved.values) {
        if (analysis.isStatic(v))
          continue;
        SmallVector<int, 2> &kept = keepers[rootOf(v)];
        if (kept.empty() || kept.back() != static_cast<int>(i))
          kept.push_back(static_cast<int>(i));
      }
    }
  for (auto &[root, kept] : keepers) {
    if (kept.size() == 1) {
      result.bytes[kept.front()] += analysis.bytes(root);
      continue;
    }
    result.shared.push_back({std::vector<int>(kept.begin(), kept.end()), analysis.bytes(root)});
  }
  return result;
}

LayerCarriedBytes
pipe::computeLayerCarriedBytes(const CostAnalysis &analysis,
                               llvm::ArrayRef<std::vector<Operation *>> layers) {
  llvm::DenseMap<Operation *, int> layerOf;
  for (auto [i, layer] : llvm::enumerate(layers))
    for (Operation *op : layer)
      layerOf[op] = static_cast<int>(i);
  auto rootOf = [&](Value v) {
    return storageRoot(analysis, v, [&](Operation *def) { return layerOf.count(def) > 0; });
  };
  llvm::DenseSet<Value> saved;
  for (const std::vector<Operation *> &layer : layers)
    for (Operation *op : layer)
      if (const OpRecord *r = analysis.lookup(op))
        for (Value v : r->saved.values)
          saved.insert(rootOf(v));
  // Per storage root: its producer's layer and the layers reading it.
  struct Span {
    int producer = -1;
    llvm::SmallDenseSet<int, 4> readers;
  };
  llvm::MapVector<Value, Span> spans;
  for (auto [i, layer] : llvm::enumerate(layers))
    for (Operation *op : layer) {
      if (isParameterOrConstant(op))
        continue;
      for (Value operand : op->getOperands()) {
        if (analysis.isStatic(operand))
          continue;
        Value root = rootOf(operand);
        auto [it, inserted] = spans.try_emplace(root);
        if (inserted) {
          Operation *def = root.getDefiningOp();
          it->second.producer = def && layerOf.count(def) ? layerOf.lookup(def) : -1;
        }
        it->second.readers.insert(static_cast<int>(i));
      }
    }
  LayerCarriedBytes carried;
  carried.forward.assign(layers.size(), 0.0);
  carried.backward.assign(layers.size(), 0.0);
  for (auto &[root, span] : spans) {
    if (span.producer < 0) // a model input: received by the first stage reading it
      continue;
    int last = span.producer;
    for (int reader : span.readers)
      last = std::max(last, reader);
    const double bytes = analysis.bytes(root);
    const bool forward = !saved.contains(root), backward = analysis.requiresGrad(root);
    for (int l = span.producer + 1; l < last; ++l) {
      // A layer reading it meanwhile holds it (forward) or adds to its sum
      // (backward) too: the layer alone sees it only from its own read.
      if (forward && !span.readers.contains(l))
        carried.forward[l] += bytes;
      if (backward)
        carried.backward[l] += bytes;
    }
  }
  return carried;
}

StageMemory pipe::computeFunctionMemory(const CostAnalysis &analysis,
                                        const TrainingPolicy &policy) {
  std::vector<Operation *> ops;
  for (const OpRecord &r : analysis.getRecords())
    ops.push_back(r.op);
  return computeStageMemory(analysis, ops, policy);
}

FailureOr<TrainingPolicy> pipe::parseTrainingPolicy(Operation *diagnosticOp,
                                                    llvm::StringRef optimizer,
                                                    ComputeDtype dtype) {
  auto kind = parseOptimizerKind(optimizer);
  if (!kind)
    return diagnosticOp->emitError("unknown optimizer '") << optimizer
                                                          << "' (sgd, momentum, adam, adamw)";
  return TrainingPolicy{*kind, dtype};
}
