//===- OpCostModels.cpp - cost and gradient rule of every nn op -----------===//
//
// External models of CostOpInterface for the nn ops, one rule per op class.
// Each rule gives forward/backward FLOPs and DRAM bytes and the values the
// backward keeps; docs/cost-model.md states the same formulas. Notation:
// N(v) elements of v, B(v) its bytes at the compute dtype, dv its gradient.
//
//===----------------------------------------------------------------------===//
#include "pipe/Analysis/CostInterface.h"

#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace pipe;
namespace nn = pipe::nn;

#include "pipe/Analysis/CostInterface.cpp.inc"

//===----------------------------------------------------------------------===//
// Element counts and sizes
//===----------------------------------------------------------------------===//

double pipe::numElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return 0;
  return static_cast<double>(type.getNumElements());
}

double pipe::elementBytes(Value v, unsigned floatBytes) {
  Type element = getElementTypeOrSelf(v.getType());
  if (isa<FloatType>(element))
    return floatBytes;
  if (element.isIndex())
    return 8;
  if (auto integer = dyn_cast<IntegerType>(element))
    return std::max(1u, (integer.getWidth() + 7) / 8);
  return floatBytes;
}

double CostQuery::bytes(Value v) const {
  return v ? numElements(v) * elementBytes(v, floatBytes) : 0;
}

namespace {

double N(Value v) { return numElements(v); }

bool isFloatTensor(Value v) {
  return isa<FloatType>(getElementTypeOrSelf(v.getType()));
}

/// Sum of the bytes of all operands and results: one read of every input and
/// one write of every output.
double streamBytes(Operation *op, const CostQuery &q) {
  double total = 0;
  for (Value v : op->getOperands())
    total += q.bytes(v);
  for (Value v : op->getResults())
    total += q.bytes(v);
  return total;
}

/// Adds one backward kernel's numbers; `weight` marks a weight gradient.
void addBackward(OpCost &c, double flops, double bytes, bool weight,
                 unsigned kernels = 1) {
  c.backwardFlops += flops;
  c.backwardBytes += bytes;
  c.backwardKernels += kernels;
  if (weight) {
    c.backwardWeightFlops += flops;
    c.backwardWeightBytes += bytes;
  }
}

/// An operand's gradient is a weight gradient when the operand comes from
/// parameters only (the analysis marks it static in the query).
bool isWeight(const CostQuery &q, unsigned operand) {
  return operand < q.operandIsStatic.size() && q.operandIsStatic.test(operand);
}

//===----------------------------------------------------------------------===//
// Rules. Each has kind(op), differentiable(op), cost(op, q), saved(op, q).
//===----------------------------------------------------------------------===//

/// Views, constants and parameters: no kernel, nothing saved.
struct FreeRule {
  static KernelClass kind(Operation *) { return KernelClass::Free; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *, const CostQuery &) { return {}; }
  static SavedForBackward saved(Operation *, const CostQuery &) { return {}; }
};

/// Unary element-wise ops: f FLOPs per element forward, f + 1 backward (the
/// derivative and the product with dy); the derivative reads the input or the
/// output, which is what the op keeps.
struct UnarySpec {
  double flops;
  enum Keep { None, Input, Output } keep;
  bool differentiable;
};

UnarySpec unarySpec(Operation *op) {
  using K = UnarySpec::Keep;
  return llvm::TypeSwitch<Operation *, UnarySpec>(op)
      .Case<nn::ReluOp>([](auto) { return UnarySpec{1, K::Output, true}; })
      .Case<nn::ErfOp>([](auto) { return UnarySpec{1, K::Input, true}; })
      .Case<nn::TanhOp>([](auto) { return UnarySpec{1, K::Output, true}; })
      // 1 / (1 + exp(-x)): exp, add, divide.
      .Case<nn::SigmoidOp>([](auto) { return UnarySpec{3, K::Output, true}; })
      .Case<nn::SqrtOp>([](auto) { return UnarySpec{1, K::Output, true}; })
      .Case<nn::ExpOp>([](auto) { return UnarySpec{1, K::Output, true}; })
      .Case<nn::LogOp>([](auto) { return UnarySpec{1, K::Input, true}; })
      .Case<nn::NegOp>([](auto) { return UnarySpec{1, K::None, true}; })
      .Case<nn::AbsOp>([](auto) { return UnarySpec{1, K::Input, true}; })
      .Case<nn::ReciprocalOp>([](auto) { return UnarySpec{1, K::Output, true}; })
      .Case<nn::NotOp, nn::FloorOp, nn::CeilOp>(
          [](auto) { return UnarySpec{1, K::None, false}; })
      // log(exp(x) + 1): exp, add, log.
      .Case<nn::SoftplusOp>([](auto) { return UnarySpec{3, K::Input, true}; })
      // A libm call: counted as the other transcendental functions.
      .Case<nn::SinOp, nn::CosOp, nn::TanOp, nn::AsinOp, nn::AcosOp, nn::AtanOp, nn::SinhOp,
            nn::CoshOp, nn::AsinhOp, nn::AcoshOp, nn::AtanhOp>(
          [](auto) { return UnarySpec{1, K::Input, true}; })
      // Piecewise constant: no gradient flows through them.
      .Case<nn::RoundOp, nn::SignOp>([](auto) { return UnarySpec{1, K::None, false}; })
      // erf form 0.5 x (1 + erf(x / sqrt 2)): 5; tanh form
      // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): 9.
      .Case<nn::GeluOp>([](nn::GeluOp gelu) {
        return UnarySpec{gelu.getApproximate() == "tanh" ? 9.0 : 5.0, K::Input, true};
      })
      .Case<nn::LeakyReluOp>([](auto) { return UnarySpec{2, K::Input, true}; })
      .Case<nn::HardSigmoidOp>([](auto) { return UnarySpec{3, K::Input, true}; })
      .Case<nn::HardSwishOp>([](auto) { return UnarySpec{4, K::Input, true}; })
      .Case<nn::ClipOp>([](auto) { return UnarySpec{2, K::Input, true}; })
      // A conversion: no arithmetic; its backward converts dy back.
      .Case<nn::CastOp>([](nn::CastOp cast) {
        return UnarySpec{0, K::None, isFloatTensor(cast.getOutput())};
      })
      .Default([](Operation *) { return UnarySpec{1, K::None, true}; });
}

struct UnaryRule {
  static KernelClass kind(Operation *) { return KernelClass::Elementwise; }
  static bool differentiable(Operation *op) { return unarySpec(op).differentiable; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    UnarySpec spec = unarySpec(op);
    Value in = op->getOperand(0), out = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Elementwise;
    c.forwardFlops = spec.flops * N(out);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    if (spec.differentiable && q.needsGrad(0)) {
      double keptBytes = spec.keep == UnarySpec::Input    ? q.bytes(in)
                         : spec.keep == UnarySpec::Output ? q.bytes(out)
                                                          : 0;
      // dx = f'(saved) * dy: read dy and the saved value, write dx.
      addBackward(c, (spec.flops + 1) * N(out), q.bytes(out) + keptBytes + q.bytes(in),
                  isWeight(q, 0));
    }
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    UnarySpec spec = unarySpec(op);
    SavedForBackward s;
    if (!spec.differentiable || !q.needsGrad(0))
      return s;
    if (spec.keep == UnarySpec::Input)
      s.values.push_back(op->getOperand(0));
    else if (spec.keep == UnarySpec::Output)
      s.values.push_back(op->getResult(0));
    return s;
  }
};

/// Broadcasting binary ops and Where. Forward: one FLOP per output element.
/// Backward, per operand that needs a gradient: `gradFlops` FLOPs per output
/// element, plus a sum over the broadcast dims when the operand is smaller
/// than the output. Add with a same-shape operand passes dy through (no kernel).
struct BinarySpec {
  double gradFlops[2];
  bool keepLhs[2], keepRhs[2]; // kept for the lhs / rhs gradient
  bool differentiable;
};

BinarySpec binarySpec(Operation *op) {
  return llvm::TypeSwitch<Operation *, BinarySpec>(op)
      .Case<nn::AddOp>([](auto) { return BinarySpec{{0, 0}, {0, 0}, {0, 0}, true}; })
      // d rhs = -dy.
      .Case<nn::SubOp>([](auto) { return BinarySpec{{0, 1}, {0, 0}, {0, 0}, true}; })
      // d lhs = dy * rhs, d rhs = dy * lhs.
      .Case<nn::MulOp>([](auto) { return BinarySpec{{1, 1}, {0, 1}, {1, 0}, true}; })
      // d lhs = dy / rhs; d rhs = -dy * lhs / rhs^2.
      .Case<nn::DivOp>([](auto) { return BinarySpec{{1, 3}, {0, 1}, {1, 1}, true}; })
      // d lhs = dy * rhs * lhs^(rhs-1); d rhs = dy * lhs^rhs * log(lhs).
      .Case<nn::PowOp>([](auto) { return BinarySpec{{3, 3}, {1, 1}, {1, 1}, true}; })
      // dy goes to the operand that won: compare both.
      .Case<nn::MaxOp, nn::MinOp>(
          [](auto) { return BinarySpec{{1, 1}, {1, 1}, {1, 1}, true}; })
      .Default([](Operation *) { return BinarySpec{{0, 0}, {0, 0}, {0, 0}, false}; });
}

struct BinaryRule {
  static KernelClass kind(Operation *) { return KernelClass::Elementwise; }
  static bool differentiable(Operation *op) { return binarySpec(op).differentiable; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    BinarySpec spec = binarySpec(op);
    Value out = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Elementwise;
    c.forwardFlops = N(out);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    if (!spec.differentiable)
      return c;
    for (unsigned i = 0; i < 2; ++i) {
      if (!q.needsGrad(i))
        continue;
      Value operand = op->getOperand(i);
      bool broadcast = N(operand) != N(out);
      double flops = spec.gradFlops[i] * N(out) + (broadcast ? N(out) : 0);
      if (flops == 0)
        continue; // dy passes through unchanged
      double bytes = q.bytes(out) + q.bytes(operand);
      if (spec.keepLhs[i])
        bytes += q.bytes(op->getOperand(0));
      if (spec.keepRhs[i])
        bytes += q.bytes(op->getOperand(1));
      addBackward(c, flops, bytes, isWeight(q, i));
    }
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    BinarySpec spec = binarySpec(op);
    SavedForBackward s;
    bool lhs = false, rhs = false;
    for (unsigned i = 0; i < 2; ++i) {
      if (!spec.differentiable || !q.needsGrad(i))
        continue;
      lhs |= spec.keepLhs[i];
      rhs |= spec.keepRhs[i];
    }
    if (lhs)
      s.values.push_back(op->getOperand(0));
    if (rhs && (!lhs || op->getOperand(1) != op->getOperand(0)))
      s.values.push_back(op->getOperand(1));
    return s;
  }
};

/// where(c, x, y): dx = where(c, dy, 0), dy_ = where(c, 0, dy); keeps c.
struct WhereRule {
  static KernelClass kind(Operation *) { return KernelClass::Elementwise; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    Value out = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Elementwise;
    c.forwardFlops = N(out);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    for (unsigned i = 1; i < 3; ++i) {
      if (!q.needsGrad(i))
        continue;
      Value operand = op->getOperand(i);
      double flops = N(out) + (N(operand) != N(out) ? N(out) : 0);
      addBackward(c, flops, q.bytes(out) + q.bytes(op->getOperand(0)) + q.bytes(operand),
                  isWeight(q, i));
    }
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    SavedForBackward s;
    if (q.needsGrad(1) || q.needsGrad(2))
      s.values.push_back(op->getOperand(0));
    return s;
  }
};

/// A product of two operands with M = MACs: forward 2M FLOPs; each operand's
/// gradient is another product of 2M FLOPs that reads dy and the other operand.
void addProductBackward(OpCost &c, const CostQuery &q, double macs, Value out, Value lhs,
                        unsigned lhsIndex, Value rhs, unsigned rhsIndex) {
  if (q.needsGrad(lhsIndex))
    addBackward(c, 2 * macs, q.bytes(out) + q.bytes(rhs) + q.bytes(lhs),
                isWeight(q, lhsIndex));
  if (q.needsGrad(rhsIndex))
    addBackward(c, 2 * macs, q.bytes(out) + q.bytes(lhs) + q.bytes(rhs),
                isWeight(q, rhsIndex));
}

SavedForBackward productSaved(const CostQuery &q, Value lhs, unsigned lhsIndex, Value rhs,
                              unsigned rhsIndex) {
  SavedForBackward s;
  if (q.needsGrad(rhsIndex))
    s.values.push_back(lhs);
  if (q.needsGrad(lhsIndex) && rhs != lhs)
    s.values.push_back(rhs);
  return s;
}

/// The product of a matmul/gemm: the output's last two dims are m x n, the
/// leading ones are the batch; k is the lhs's contracted dim. A batch of
/// rows times one shared matrix (a rhs of rank <= 2, as in every dense
/// layer of a sequence model) is one GEMM over all the rows: the kernel
/// libraries fold the batch into m.
GemmShape matmulShape(Value out, RankedTensorType lhsType, Value rhs) {
  GemmShape g;
  auto outType = nn::getRankedType(out);
  if (!outType || !outType.hasStaticShape() || !lhsType.hasStaticShape())
    return g;
  ArrayRef<int64_t> dims = outType.getShape();
  g.n = dims.empty() ? 1 : static_cast<double>(dims.back());
  g.m = dims.size() < 2 ? 1 : static_cast<double>(dims[dims.size() - 2]);
  g.batch = g.m * g.n > 0 ? N(out) / (g.m * g.n) : 0;
  g.k = static_cast<double>(lhsType.getShape().back());
  auto rhsType = nn::getRankedType(rhs);
  if (rhsType && rhsType.getRank() <= 2 && g.batch > 1) {
    g.m *= g.batch;
    g.batch = 1;
  }
  return g;
}

/// A convolution as its implicit GEMM: out [N, M, spatial...], weight [M,
/// C/g, kernel...].
GemmShape convShape(Value out, Value input, RankedTensorType wType) {
  GemmShape g;
  auto outType = nn::getRankedType(out);
  auto inType = nn::getRankedType(input);
  if (!outType || outType.getRank() < 2 || !inType || inType.getRank() < 2 ||
      !outType.hasStaticShape() || !inType.hasStaticShape() || !wType.hasStaticShape() ||
      wType.getRank() < 2 || wType.getDimSize(1) <= 0)
    return g;
  double groups = std::max<double>(1, static_cast<double>(inType.getDimSize(1)) /
                                          static_cast<double>(wType.getDimSize(1)));
  g.batch = groups;
  g.n = static_cast<double>(wType.getDimSize(0)) / groups;
  double weights = 1;
  for (int64_t d : wType.getShape())
    weights *= static_cast<double>(d);
  g.k = weights / static_cast<double>(wType.getDimSize(0));
  double channels = static_cast<double>(outType.getDimSize(1));
  g.m = channels > 0 ? N(out) / channels : 0;
  return g;
}

/// The algorithm family a convolution library picks: 1x1 kernels are a GEMM
/// over the pixels; 2-D 3x3 kernels with stride and dilation 1 and one group
/// are Winograd's domain; the rest run as implicit GEMMs.
KernelFamily convFamily(RankedTensorType wType, std::optional<ArrayRef<int64_t>> strides,
                        std::optional<ArrayRef<int64_t>> dilations, double groups) {
  ArrayRef<int64_t> kernel = wType.getShape().drop_front(2);
  auto allEqual = [](ArrayRef<int64_t> values, int64_t v) {
    return llvm::all_of(values, [&](int64_t x) { return x == v; });
  };
  if (allEqual(kernel, 1))
    return KernelFamily::ConvPointwise;
  bool unitStride = !strides || allEqual(*strides, 1);
  bool unitDilation = !dilations || allEqual(*dilations, 1);
  if (kernel.size() == 2 && allEqual(kernel, 3) && unitStride && unitDilation && groups == 1)
    return KernelFamily::ConvWinograd;
  return KernelFamily::ConvGeneral;
}

/// numpy matmul: M = N(out) * K with K the lhs's last dim (1-D operands
/// included). Batched attention products are the same formula.
struct MatMulRule {
  static KernelClass kind(Operation *) { return KernelClass::Gemm; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto mm = cast<nn::MatMulOp>(op);
    OpCost c;
    c.kind = KernelClass::Gemm;
    auto lhsType = nn::getRankedType(mm.getLhs());
    if (!lhsType || lhsType.getRank() == 0)
      return c;
    double macs = N(mm.getOutput()) * static_cast<double>(lhsType.getShape().back());
    c.forwardFlops = 2 * macs;
    c.shape = matmulShape(mm.getOutput(), lhsType, mm.getRhs());
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    addProductBackward(c, q, macs, mm.getOutput(), mm.getLhs(), 0, mm.getRhs(), 1);
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto mm = cast<nn::MatMulOp>(op);
    return productSaved(q, mm.getLhs(), 0, mm.getRhs(), 1);
  }
};

/// alpha op(A) op(B) + beta C: M = m n k, plus one FLOP per output element for
/// C; dC is a sum of dy over the broadcast rows, done in the weight-gradient
/// kernel's epilogue.
struct GemmRule {
  static KernelClass kind(Operation *) { return KernelClass::Gemm; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto gemm = cast<nn::GemmOp>(op);
    OpCost c;
    c.kind = KernelClass::Gemm;
    auto aType = nn::getRankedType(gemm.getA());
    if (!aType || aType.getRank() != 2)
      return c;
    double k = static_cast<double>(aType.getDimSize(gemm.getTransA() ? 0 : 1));
    Value out = gemm.getOutput();
    double macs = N(out) * k;
    c.forwardFlops = 2 * macs + (gemm.getC() ? N(out) : 0);
    c.shape = matmulShape(out, aType, gemm.getB());
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    addProductBackward(c, q, macs, out, gemm.getA(), 0, gemm.getB(), 1);
    if (gemm.getC() && q.needsGrad(2)) {
      bool separate = !q.needsGrad(1);
      addBackward(c, N(out), separate ? q.bytes(out) + q.bytes(gemm.getC()) : 0,
                  isWeight(q, 2), separate ? 1 : 0);
    }
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto gemm = cast<nn::GemmOp>(op);
    return productSaved(q, gemm.getA(), 0, gemm.getB(), 1);
  }
};

/// Convolution: M = N(out) * (C / group) * prod(kernel) = N(out) * N(W) / M_out;
/// the bias adds one FLOP per output element and its gradient (a sum of dy)
/// runs in the weight-gradient kernel.
struct ConvRule {
  static KernelClass kind(Operation *) { return KernelClass::Conv; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto conv = cast<nn::ConvOp>(op);
    OpCost c;
    c.kind = KernelClass::Conv;
    auto wType = nn::getRankedType(conv.getWeight());
    if (!wType || wType.getRank() < 1 || wType.getDimSize(0) <= 0)
      return c;
    Value out = conv.getOutput();
    double macsPerOutput = N(conv.getWeight()) / static_cast<double>(wType.getDimSize(0));
    double macs = N(out) * macsPerOutput;
    c.forwardFlops = 2 * macs + (conv.getBias() ? N(out) : 0);
    c.shape = convShape(out, conv.getInput(), wType);
    if (auto strides = conv.getStrides())
      for (int64_t s : *strides)
        c.shape.stride *= static_cast<double>(std::max<int64_t>(1, s));
    c.family = convFamily(wType, conv.getStrides(), conv.getDilations(), c.shape.batch);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    addProductBackward(c, q, macs, out, conv.getInput(), 0, conv.getWeight(), 1);
    if (conv.getBias() && q.needsGrad(2)) {
      bool separate = !q.needsGrad(1);
      addBackward(c, N(out), separate ? q.bytes(out) + q.bytes(conv.getBias()) : 0,
                  isWeight(q, 2), separate ? 1 : 0);
    }
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto conv = cast<nn::ConvOp>(op);
    return productSaved(q, conv.getInput(), 0, conv.getWeight(), 1);
  }
};

/// conv_grad_input as a forward op (ONNX ConvTranspose): the MACs of the
/// convolution it transposes, each operand's gradient one product as large
/// (a convolution of dy for x, a weight gradient for w), as ConvRule.
struct ConvTransposeRule {
  static KernelClass kind(Operation *) { return KernelClass::Conv; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto conv = cast<nn::ConvGradInputOp>(op);
    OpCost c;
    c.kind = KernelClass::Conv;
    auto wType = nn::getRankedType(conv.getWeight());
    if (!wType || wType.getRank() < 1 || wType.getDimSize(0) <= 0)
      return c;
    double macs = N(conv.getGrad()) * N(conv.getWeight()) / static_cast<double>(wType.getDimSize(0));
    c.forwardFlops = 2 * macs;
    // The convolution it transposes, as an implicit GEMM over its input.
    c.shape = convShape(conv.getGrad(), conv.getOutput(), wType);
    c.family = KernelFamily::ConvGeneral;
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    addProductBackward(c, q, macs, conv.getOutput(), conv.getGrad(), 0, conv.getWeight(), 1);
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto conv = cast<nn::ConvGradInputOp>(op);
    return productSaved(q, conv.getGrad(), 0, conv.getWeight(), 1);
  }
};

double product(ArrayRef<int64_t> dims) {
  double p = 1;
  for (int64_t d : dims)
    p *= static_cast<double>(d);
  return p;
}

/// Max pooling keeps the argmax (one i64 per output element): forward
/// prod(kernel) comparisons per output, backward one scatter-add per output
/// into a zeroed dx.
struct MaxPoolRule {
  static KernelClass kind(Operation *) { return KernelClass::Pooling; }
  static bool differentiable(Operation *) { return true; }
  static double window(Operation *op) {
    if (auto pool = dyn_cast<nn::MaxPoolOp>(op))
      return product(pool.getKernelShape());
    auto type = nn::getRankedType(op->getOperand(0)); // global: every spatial element
    return type && type.getRank() > 2 ? product(type.getShape().drop_front(2)) : 1;
  }
  static double indexBytes(Operation *op) { return 8 * N(op->getResult(0)); }
  static OpCost cost(Operation *op, const CostQuery &q) {
    Value in = op->getOperand(0), out = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Pooling;
    c.forwardFlops = N(out) * window(op);
    c.forwardBytes = q.bytes(in) + q.bytes(out) + indexBytes(op);
    c.forwardKernels = 1;
    if (q.needsGrad(0))
      addBackward(c, N(out), q.bytes(out) + indexBytes(op) + q.bytes(in), isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    SavedForBackward s;
    if (op->getNumResults() > 1)
      s.values.push_back(op->getResult(1));
    else
      s.extraBytes = indexBytes(op);
    return s;
  }
};

/// Average pooling: prod(kernel) adds and one divide per output; the backward
/// spreads dy / window over the window. Global average: N(in) adds + N(out)
/// divides, backward N(in). Nothing kept (only shapes).
struct AveragePoolRule {
  static KernelClass kind(Operation *) { return KernelClass::Pooling; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    Value in = op->getOperand(0), out = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Pooling;
    double spread = N(in);
    if (auto pool = dyn_cast<nn::AveragePoolOp>(op))
      spread = N(out) * product(pool.getKernelShape());
    c.forwardFlops = spread + N(out);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    if (q.needsGrad(0))
      addBackward(c, spread, q.bytes(out) + q.bytes(in), isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *, const CostQuery &) { return {}; }
};

/// Batch norm. Training: 6 FLOPs per element forward (sum and sum of squares
/// 3, normalise and affine 3) in two passes over x; backward 9 per element
/// (recompute x-hat 2, the sums of dy and dy x-hat 3, dx 4), also two passes.
/// Keeps x and the per-channel mean and inverse std (fp32). Inference
/// statistics: y = x * a + b (2 per element), dx = dy * a (1), d scale / d bias
/// = sums of dy x-hat and dy (4 per element) and keeps x for them.
struct BatchNormRule {
  static KernelClass kind(Operation *) { return KernelClass::Normalization; }
  static bool differentiable(Operation *) { return true; }
  static bool training(nn::BatchNormOp bn) {
    return bn.getTrainingMode() != 0 || !bn.getRunningStats().empty();
  }
  static double channels(nn::BatchNormOp bn) {
    auto type = nn::getRankedType(bn.getInput());
    return type && type.getRank() >= 2 ? static_cast<double>(type.getDimSize(1)) : 1;
  }
  /// Batch statistics: one forward kernel that also reads x for the
  /// statistics; the backward recomputes through them (or only the parameter
  /// gradients when x needs none). BatchNormTrainRule costs the same kernels.
  static OpCost trainingCost(Operation *op, const CostQuery &q, Value x, Value y) {
    double n = N(x);
    OpCost c;
    c.kind = KernelClass::Normalization;
    c.forwardKernels = 1;
    c.forwardFlops = 6 * n;
    c.forwardBytes = streamBytes(op, q) + q.bytes(x);
    if (q.needsGrad(0))
      addBackward(c, 9 * n, 2 * q.bytes(y) + 2 * q.bytes(x) + q.bytes(x), false);
    else if (q.needsGrad(1) || q.needsGrad(2))
      addBackward(c, 3 * n, q.bytes(y) + q.bytes(x), true);
    return c;
  }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto bn = cast<nn::BatchNormOp>(op);
    Value x = bn.getInput(), y = bn.getOutput();
    double n = N(x);
    bool params = q.needsGrad(1) || q.needsGrad(2);
    OpCost c;
    c.kind = KernelClass::Normalization;
    c.forwardKernels = 1;
    if (training(bn))
      return trainingCost(op, q, x, y);
    c.forwardFlops = 2 * n;
    c.forwardBytes = streamBytes(op, q);
    if (q.needsGrad(0))
      addBackward(c, n, q.bytes(y) + q.bytes(x), false);
    if (params)
      addBackward(c, 4 * n, q.bytes(y) + q.bytes(x), true);
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto bn = cast<nn::BatchNormOp>(op);
    SavedForBackward s;
    bool params = q.needsGrad(1) || q.needsGrad(2);
    if (training(bn)) {
      s.values.push_back(bn.getInput());
      s.extraBytes = 2 * 4 * channels(bn);
    } else if (params) {
      s.values.push_back(bn.getInput());
    }
    return s;
  }
};

/// Layer norm over rows of D = prod(dims from axis): same per-element counts
/// as training batch norm, in one pass (a row fits on chip). Keeps x and the
/// per-row mean and inverse std (fp32).
struct LayerNormRule {
  static KernelClass kind(Operation *) { return KernelClass::Normalization; }
  static bool differentiable(Operation *) { return true; }
  static double rows(nn::LayerNormOp ln) {
    auto type = nn::getRankedType(ln.getInput());
    if (!type)
      return 0;
    auto axis = nn::normalizeAxis(ln.getAxis(), type.getRank());
    return axis ? product(type.getShape().take_front(*axis)) : 0;
  }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto ln = cast<nn::LayerNormOp>(op);
    Value x = ln.getInput(), y = ln.getOutput();
    double n = N(x);
    OpCost c;
    c.kind = KernelClass::Normalization;
    c.forwardFlops = 6 * n;
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    bool params = q.needsGrad(1) || (ln.getBias() && q.needsGrad(2));
    if (q.needsGrad(0))
      addBackward(c, 9 * n, q.bytes(y) + q.bytes(x) + q.bytes(x), false);
    if (params) // partial sums of dy x-hat and dy per row block
      addBackward(c, 3 * n, q.bytes(y) + q.bytes(x), true);
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    auto ln = cast<nn::LayerNormOp>(op);
    SavedForBackward s;
    s.values.push_back(ln.getInput());
    // The statistics are results once pipe-differentiate asks for them.
    if (ln.getStatistics().size() == 2)
      s.values.append(ln.getStatistics().begin(), ln.getStatistics().end());
    else
      s.extraBytes = 2 * 4 * rows(ln);
    return s;
  }
};

/// Softmax / log-softmax along one axis: 5 FLOPs per element (max, subtract,
/// exp, sum, divide or log); backward 4 per element from y and dy
/// (dx = y (dy - sum(dy y)), or dx = dy - exp(y) sum(dy)). Keeps y.
struct SoftmaxRule {
  static KernelClass kind(Operation *) { return KernelClass::Normalization; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    Value x = op->getOperand(0), y = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Normalization;
    c.forwardFlops = 5 * N(x);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    if (q.needsGrad(0))
      addBackward(c, 4 * N(x), 2 * q.bytes(y) + q.bytes(x), isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    SavedForBackward s;
    s.values.push_back(op->getResult(0));
    return s;
  }
};

/// Dropout in training: draw, compare and scale (2 FLOPs per element), write a
/// one-byte mask; the backward multiplies dy by the mask. Inactive dropout
/// (inference, or ratio 0) is the identity and costs nothing.
struct DropoutRule {
  static bool active(nn::DropoutOp d) {
    auto training = nn::getConstantInts(d.getTrainingMode());
    if (training && !training->empty() && (*training)[0] == 0)
      return false;
    if (auto ratio = dyn_cast_or_null<ElementsAttr>(
            [&]() -> Attribute {
              if (auto cst = d.getRatio().getDefiningOp<nn::ConstantOp>())
                return cst.getValue();
              return {};
            }()))
      if (auto values = ratio.tryGetValues<APFloat>(); values && !ratio.empty() &&
                                                      (*values->begin()).isZero())
        return false;
    return true;
  }
  static KernelClass kind(Operation *op) {
    return active(cast<nn::DropoutOp>(op)) ? KernelClass::Elementwise : KernelClass::Free;
  }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto d = cast<nn::DropoutOp>(op);
    if (!active(d))
      return {};
    Value x = d.getInput(), y = d.getOutput();
    OpCost c;
    c.kind = KernelClass::Elementwise;
    c.forwardFlops = 2 * N(x);
    c.forwardBytes = q.bytes(x) + q.bytes(y) + N(x);
    c.forwardKernels = 1;
    if (q.needsGrad(0))
      addBackward(c, N(x), q.bytes(y) + N(x) + q.bytes(x), isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    auto d = cast<nn::DropoutOp>(op);
    SavedForBackward s;
    if (!active(d) || !q.needsGrad(0))
      return s;
    if (d.getMask())
      s.values.push_back(d.getMask());
    else
      s.extraBytes = N(d.getInput());
    return s;
  }
};

/// Reductions: one FLOP per input element (mean: plus a divide per output).
/// Sum and mean broadcast dy back (mean scales it: one FLOP per element) and
/// keep nothing; max/min route dy to the arg-extremum (compare x with y, keep
/// both); prod uses dx = dy * y / x (2 per element, keeps both).
struct ReduceRule {
  static KernelClass kind(Operation *) { return KernelClass::Reduction; }
  static bool differentiable(Operation *) { return true; }
  static bool keepsOperands(Operation *op) {
    return isa<nn::ReduceMaxOp, nn::ReduceMinOp, nn::ReduceProdOp>(op);
  }
  static OpCost cost(Operation *op, const CostQuery &q) {
    Value x = op->getOperand(0), y = op->getResult(0);
    OpCost c;
    c.kind = KernelClass::Reduction;
    c.forwardFlops = N(x) + (isa<nn::ReduceMeanOp>(op) ? N(y) : 0);
    c.forwardBytes = q.bytes(x) + q.bytes(y);
    c.forwardKernels = 1;
    if (!q.needsGrad(0))
      return c;
    double flops = isa<nn::ReduceSumOp>(op)    ? 0
                   : isa<nn::ReduceProdOp>(op) ? 2 * N(x)
                                               : N(x);
    double bytes = q.bytes(y) + q.bytes(x) + (keepsOperands(op) ? q.bytes(x) + q.bytes(y) : 0);
    addBackward(c, flops, bytes, isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    SavedForBackward s;
    if (keepsOperands(op)) {
      s.values.push_back(op->getOperand(0));
      s.values.push_back(op->getResult(0));
    }
    return s;
  }
};

/// Data movement: no FLOPs; forward reads what it copies and writes the
/// result, backward is the adjoint copy (transpose back, split/concat, zero and
/// scatter for slice/pad/gather, sum over the copies for expand/tile, a gather
/// for the scatter-add gather_grad, which MaxUnpool imports as).
struct MoveRule {
  static KernelClass kind(Operation *) { return KernelClass::DataMovement; }
  static bool differentiable(Operation *op) {
    return !isa<nn::ConstantOfShapeOp, nn::RangeOp>(op);
  }
  static OpCost cost(Operation *op, const CostQuery &q) {
    OpCost c;
    c.kind = KernelClass::DataMovement;
    c.forwardKernels = 1;
    Value x = op->getOperand(0);
    llvm::TypeSwitch<Operation *>(op)
        .Case<nn::ConcatOp>([&](nn::ConcatOp concat) {
          c.forwardBytes = streamBytes(op, q);
          double grads = 0;
          for (auto [i, v] : llvm::enumerate(concat.getInputs()))
            if (q.needsGrad(i))
              grads += q.bytes(v);
          if (grads > 0)
            addBackward(c, 0, q.bytes(concat.getOutput()) + grads, false);
        })
        .Case<nn::SplitOp>([&](nn::SplitOp split) {
          c.forwardBytes = 2 * q.bytes(split.getInput());
          if (q.needsGrad(0))
            addBackward(c, 0, 2 * q.bytes(split.getInput()), isWeight(q, 0));
        })
        .Case<nn::SliceOp>([&](auto) {
          Value y = op->getResult(0);
          c.forwardBytes = 2 * q.bytes(y);
          if (q.needsGrad(0))
            addBackward(c, 0, q.bytes(y) + q.bytes(x), isWeight(q, 0));
        })
        .Case<nn::GatherOp>([&](nn::GatherOp gather) {
          Value y = gather.getOutput();
          c.forwardBytes = 2 * q.bytes(y) + q.bytes(gather.getIndices());
          if (q.needsGrad(0)) // zero dx, scatter-add dy rows into it
            addBackward(c, N(y), q.bytes(y) + q.bytes(gather.getIndices()) + q.bytes(x),
                        isWeight(q, 0));
        })
        .Case<nn::GatherGradOp>([&](nn::GatherGradOp scatter) {
          // Zero y, add the rows of x into it; backward gathers dy's rows.
          Value y = scatter.getOutput();
          c.forwardFlops = N(x);
          c.forwardBytes = q.bytes(y) + 2 * q.bytes(x) + q.bytes(scatter.getIndices());
          if (q.needsGrad(0))
            addBackward(c, 0, 2 * q.bytes(x) + q.bytes(scatter.getIndices()), isWeight(q, 0));
        })
        .Case<nn::ExpandOp, nn::TileOp>([&](auto) {
          Value y = op->getResult(0);
          c.forwardBytes = q.bytes(x) + q.bytes(y);
          if (q.needsGrad(0))
            addBackward(c, N(y), q.bytes(y) + q.bytes(x), isWeight(q, 0));
        })
        .Case<nn::ConstantOfShapeOp, nn::RangeOp>(
            [&](auto) { c.forwardBytes = q.bytes(op->getResult(0)); })
        .Default([&](Operation *) { // transpose, pad, trilu
          Value y = op->getResult(0);
          c.forwardBytes = q.bytes(x) + q.bytes(y);
          if (q.needsGrad(0))
            addBackward(c, 0, q.bytes(y) + q.bytes(x), isWeight(q, 0));
        });
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &q) {
    SavedForBackward s;
    if (auto gather = dyn_cast<nn::GatherOp>(op); gather && q.needsGrad(0))
      s.values.push_back(gather.getIndices());
    if (auto scatter = dyn_cast<nn::GatherGradOp>(op); scatter && q.needsGrad(0))
      s.values.push_back(scatter.getIndices());
    return s;
  }
};

/// The training form pipe-differentiate gives a training batch norm: the
/// same kernels as BatchNormRule's training case; the per-channel statistics
/// it keeps are results.
struct BatchNormTrainRule {
  static KernelClass kind(Operation *) { return KernelClass::Normalization; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto bn = cast<nn::BatchNormTrainOp>(op);
    return BatchNormRule::trainingCost(op, q, bn.getInput(), bn.getOutput());
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    auto bn = cast<nn::BatchNormTrainOp>(op);
    SavedForBackward s;
    s.values.push_back(bn.getInput());
    s.values.push_back(bn.getSavedMean());
    s.values.push_back(bn.getSavedInvstd());
    return s;
  }
};

/// Softmax cross entropy: log-softmax (5 per element) plus the pick and the
/// mean; backward exp(log_prob) - onehot, scaled (3 per element). Keeps the
/// log-probabilities and the labels.
struct CrossEntropyRule {
  static KernelClass kind(Operation *) { return KernelClass::Normalization; }
  static bool differentiable(Operation *) { return true; }
  static OpCost cost(Operation *op, const CostQuery &q) {
    auto loss = cast<nn::SoftmaxCrossEntropyLossOp>(op);
    Value logits = loss.getLogits();
    OpCost c;
    c.kind = KernelClass::Normalization;
    c.forwardFlops = 6 * N(logits);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    if (q.needsGrad(0))
      addBackward(c, 3 * N(logits),
                  2 * q.bytes(logits) + q.bytes(loss.getLabels()), isWeight(q, 0));
    return c;
  }
  static SavedForBackward saved(Operation *op, const CostQuery &) {
    auto loss = cast<nn::SoftmaxCrossEntropyLossOp>(op);
    SavedForBackward s;
    s.values.push_back(loss.getLogProb());
    s.values.push_back(loss.getLabels());
    return s;
  }
};

/// The gradient ops of backward programs: their own (forward) cost, the
/// counterpart of what the forward op's rule charges as its backward; they
/// are not differentiated again.
struct GradientOpRule {
  static KernelClass kind(Operation *op) {
    return llvm::TypeSwitch<Operation *, KernelClass>(op)
        .Case<nn::UnaryGradOp>([](auto) { return KernelClass::Elementwise; })
        .Case<nn::ConvGradWeightOp>([](auto) { return KernelClass::Conv; })
        .Case<nn::MaxPoolGradOp, nn::AveragePoolGradOp>(
            [](auto) { return KernelClass::Pooling; })
        .Case<nn::SliceGradOp>([](auto) { return KernelClass::DataMovement; })
        .Default([](Operation *) { return KernelClass::Normalization; });
  }
  static bool differentiable(Operation *) { return false; }
  static double flops(Operation *op) {
    return llvm::TypeSwitch<Operation *, double>(op)
        .Case<nn::UnaryGradOp>([](auto g) { return 2 * N(g.getOutput()); })
        .Case<nn::ConvGradWeightOp>([](auto g) {
          return 2 * N(g.getGrad()) * N(g.getOutput()) /
                 std::max<int64_t>(1, g.getWeightShape()[0]);
        })
        .Case<nn::AveragePoolGradOp>([](auto g) {
          return N(g.getGrad()) * product(g.getKernelShape());
        })
        .Case<nn::BatchNormGradOp, nn::LayerNormGradOp>(
            [](auto g) { return 9 * N(g.getInput()); })
        .Case<nn::SoftmaxGradOp, nn::LogSoftmaxGradOp>(
            [](auto g) { return 4 * N(g.getGrad()); })
        .Case<nn::SoftmaxCrossEntropyLossGradOp>([](auto g) { return 3 * N(g.getLogProb()); })
        .Default([](Operation *op) { return N(op->getOperand(0)); });
  }
  static OpCost cost(Operation *op, const CostQuery &q) {
    OpCost c;
    c.kind = kind(op);
    c.forwardFlops = flops(op);
    c.forwardBytes = streamBytes(op, q);
    c.forwardKernels = 1;
    return c;
  }
  static SavedForBackward saved(Operation *, const CostQuery &) { return {}; }
};

/// The interface implementation shared by every op: the rule, plus the
/// convention that an op with no operand needing a gradient has no backward.
template <typename OpT, typename Rule>
struct CostModel : CostOpInterface::ExternalModel<CostModel<OpT, Rule>, OpT> {
  KernelClass getKernelClass(Operation *op) const { return Rule::kind(op); }
  bool isDifferentiable(Operation *op) const { return Rule::differentiable(op); }
  OpCost computeCost(Operation *op, const CostQuery &q) const {
    OpCost c = Rule::cost(op, q);
    if (!Rule::differentiable(op) || !q.anyNeedsGrad(op->getNumOperands())) {
      c.backwardFlops = c.backwardBytes = c.backwardWeightFlops = c.backwardWeightBytes = 0;
      c.backwardKernels = 0;
    }
    return c;
  }
  SavedForBackward getSavedForBackward(Operation *op, const CostQuery &q) const {
    if (!Rule::differentiable(op) || !q.anyNeedsGrad(op->getNumOperands()))
      return {};
    return Rule::saved(op, q);
  }
};

template <typename Rule, typename... Ops>
void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<CostModel<Ops, Rule>>(*ctx), ...);
}

} // namespace

void pipe::registerCostModelInterfaces(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, nn::NNDialect *) {
    attach<FreeRule, nn::ConstantOp, nn::ParamOp, nn::ShapeOp, nn::ReshapeOp,
           nn::FlattenOp, nn::SqueezeOp, nn::UnsqueezeOp, nn::IdentityOp>(ctx);
    attach<UnaryRule, nn::ReluOp, nn::ErfOp, nn::TanhOp, nn::SigmoidOp, nn::SqrtOp,
           nn::ExpOp, nn::LogOp, nn::NegOp, nn::AbsOp, nn::ReciprocalOp, nn::NotOp,
           nn::FloorOp, nn::CeilOp, nn::SoftplusOp, nn::SinOp, nn::CosOp, nn::TanOp,
           nn::AsinOp, nn::AcosOp, nn::AtanOp, nn::SinhOp, nn::CoshOp, nn::AsinhOp,
           nn::AcoshOp, nn::AtanhOp, nn::RoundOp, nn::SignOp, nn::GeluOp,
           nn::LeakyReluOp,
           nn::HardSigmoidOp, nn::HardSwishOp, nn::ClipOp, nn::CastOp>(ctx);
    attach<BinaryRule, nn::AddOp, nn::SubOp, nn::MulOp, nn::DivOp, nn::PowOp, nn::ModOp,
           nn::EqualOp, nn::LessOp, nn::LessOrEqualOp, nn::GreaterOp,
           nn::GreaterOrEqualOp, nn::AndOp, nn::OrOp, nn::MaxOp, nn::MinOp>(ctx);
    attach<WhereRule, nn::WhereOp>(ctx);
    attach<MatMulRule, nn::MatMulOp>(ctx);
    attach<GemmRule, nn::GemmOp>(ctx);
    attach<ConvRule, nn::ConvOp>(ctx);
    attach<MaxPoolRule, nn::MaxPoolOp, nn::GlobalMaxPoolOp>(ctx);
    attach<AveragePoolRule, nn::AveragePoolOp, nn::GlobalAveragePoolOp>(ctx);
    attach<BatchNormRule, nn::BatchNormOp>(ctx);
    attach<BatchNormTrainRule, nn::BatchNormTrainOp>(ctx);
    attach<CrossEntropyRule, nn::SoftmaxCrossEntropyLossOp>(ctx);
    attach<ConvTransposeRule, nn::ConvGradInputOp>(ctx);
    attach<GradientOpRule, nn::UnaryGradOp, nn::ConvGradWeightOp,
           nn::MaxPoolGradOp, nn::AveragePoolGradOp, nn::BatchNormGradOp, nn::LayerNormGradOp,
           nn::SoftmaxGradOp, nn::LogSoftmaxGradOp, nn::SliceGradOp,
           nn::SoftmaxCrossEntropyLossGradOp>(ctx);
    attach<LayerNormRule, nn::LayerNormOp>(ctx);
    attach<SoftmaxRule, nn::SoftmaxOp, nn::LogSoftmaxOp>(ctx);
    attach<DropoutRule, nn::DropoutOp>(ctx);
    attach<ReduceRule, nn::ReduceMeanOp, nn::ReduceSumOp, nn::ReduceMaxOp,
           nn::ReduceMinOp, nn::ReduceProdOp>(ctx);
    attach<MoveRule, nn::TransposeOp, nn::ConcatOp, nn::SplitOp, nn::SliceOp,
           nn::GatherOp, nn::GatherGradOp, nn::ExpandOp, nn::TileOp, nn::PadOp, nn::TriluOp,
           nn::ConstantOfShapeOp, nn::RangeOp>(ctx);
  });
}
