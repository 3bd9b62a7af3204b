//===- CostAnalysis.cpp - per-op time and memory of a function ------------===//
#include "pipe/Analysis/CostAnalysis.h"

#include "pipe/Analysis/CostInterface.h"
#include "pipe/Dialect/NN/IR/NNDialect.h"
#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/IR/NNShapeUtils.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "mlir/IR/TypeUtilities.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace pipe;

//===----------------------------------------------------------------------===//
// Profile
//===----------------------------------------------------------------------===//

llvm::Expected<Profile> Profile::parse(llvm::StringRef text) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return parsed.takeError();
  const llvm::json::Object *root = parsed->getAsObject();
  if (root && root->getObject("ops"))
    root = root->getObject("ops");
  if (!root)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "a profile must be a JSON object keyed by node name");
  Profile profile;
  for (const auto &kv : *root) {
    const llvm::json::Object *entry = kv.second.getAsObject();
    std::optional<double> fwd = entry ? entry->getNumber("forward_ms") : std::nullopt;
    std::optional<double> bwd = entry ? entry->getNumber("backward_ms") : std::nullopt;
    if (!fwd || !bwd || *fwd < 0 || *bwd < 0)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "profile entry '" + llvm::StringRef(kv.first) +
              "' needs non-negative numbers 'forward_ms' and 'backward_ms'");
    profile.times[kv.first] = {*fwd, *bwd};
  }
  return profile;
}

llvm::Expected<Profile> Profile::readFile(llvm::StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return llvm::createStringError(buffer.getError(), "cannot read profile '%s'",
                                   path.str().c_str());
  auto profile = parse((*buffer)->getBuffer());
  if (!profile)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "profile '" + path + "': " +
                                       llvm::toString(profile.takeError()));
  return profile;
}

//===----------------------------------------------------------------------===//
// CostAnalysis
//===----------------------------------------------------------------------===//

static Operation *findFunction(Operation *op) {
  if (isa<FunctionOpInterface>(op))
    return op;
  Operation *found = nullptr;
  op->walk([&](FunctionOpInterface fn) {
    if (!found && !fn.isExternal())
      found = fn;
  });
  return found;
}

CostAnalysis::CostAnalysis(Operation *op) : function(findFunction(op)) {}

std::string CostAnalysis::nodeName(Operation *op, unsigned index) {
  if (auto param = dyn_cast<nn::ParamOp>(op))
    return param.getName().str();
  if (StringRef name = pipeline::nodeNameOf(op->getLoc()); !name.empty())
    return name.str();
  return llvm::formatv("{0}#{1}", op->getName().getStringRef(), index).str();
}

const OpRecord *CostAnalysis::lookup(Operation *op) const {
  auto it = indexOf.find(op);
  return it == indexOf.end() ? nullptr : &records[it->second];
}

double CostAnalysis::bytes(Value v) const {
  return numElements(v) * elementBytes(v, storageBytes(settings.dtype));
}

bool pipe::isParameterOrConstant(Operation *op) {
  return isa<nn::ParamOp, nn::ConstantOp>(op) || op->hasTrait<OpTrait::ConstantLike>();
}

static bool isFloat(Value v) { return isa<FloatType>(getElementTypeOrSelf(v.getType())); }

/// Roofline time of one kernel group: max(compute, memory) + launches.
static double rooflineSeconds(const Target &target, KernelClass kind, ComputeDtype dtype,
                              double flops, double bytes, unsigned kernels) {
  const Efficiency &eff = target.efficiencyOf(kind);
  double peak = target.peakFlops(kind, dtype);
  double compute = flops > 0 && peak > 0 ? flops / (peak * eff.compute) : 0;
  double memory = bytes > 0 ? bytes / (target.memoryBandwidthBytesPerSecond * eff.memory) : 0;
  return std::max(compute, memory) + kernels * target.launchOverheadSeconds;
}

/// The calibration of `target` when it covers `dtype` (else the roofline).
static const Calibration *activeCalibration(const Target &target, ComputeDtype dtype) {
  return target.calibration && target.calibration->dtype == dtype ? &*target.calibration
                                                                  : nullptr;
}

/// The (reduction, rows, columns, stride) of the kernel of `pass` of a
/// GEMM-like op (Target.h, KernelModel).
static std::array<double, 4> kernelDims(const GemmShape &shape, KernelPass pass) {
  switch (pass) {
  case KernelPass::BackwardData:
    return {shape.n, shape.m, shape.k, shape.stride};
  case KernelPass::BackwardWeight:
    return {shape.m, shape.n, shape.k, shape.stride};
  default:
    return {shape.k, shape.m, shape.n, shape.stride};
  }
}

/// Time of one kernel group under a fitted model (Target.h, KernelModel).
static double calibratedSeconds(const Target &target, const KernelModel &model,
                                KernelFamily family, ComputeDtype dtype,
                                const std::array<double, 4> &dims, double flops, double bytes,
                                unsigned kernels) {
  double seconds = kernels * model.overheadSeconds;
  if (isComputeFamily(family)) {
    if (flops <= 0)
      return seconds;
    // ln of each dimension, clamped to the range the fit saw.
    auto ln = [&](unsigned i) {
      return std::log(std::clamp(std::max(1.0, dims[i]), model.shapeMin[i], model.shapeMax[i]));
    };
    const auto &c = model.logEfficiency;
    double lr = ln(0), la = ln(1), lb = ln(2);
    double exponent = c[0] + c[1] * lr + c[2] * la + c[3] * lb + c[4] * ln(3) +
                      (c[5] * lr * lr + c[6] * la * la + c[7] * lb * lb) / 10;
    exponent = std::clamp(exponent, std::log(1e-3), std::log(10.0));
    KernelClass kind = family == KernelFamily::Gemm ? KernelClass::Gemm : KernelClass::Conv;
    return seconds + flops / (target.peakFlops(kind, dtype) * std::exp(exponent));
  }
  double efficiency = std::clamp(
      model.memoryEfficiency * std::pow(std::max(bytes, 1.0) / 1e6, model.memorySlope), 1e-3,
      10.0);
  seconds += bytes / (target.memoryBandwidthBytesPerSecond * efficiency);
  if (model.flopEfficiency > 0 && flops > 0)
    seconds += flops / (target.vectorPeakFlops * model.flopEfficiency);
  return seconds;
}

llvm::DenseSet<Value> pipe::computeGradientFlow(Block &block,
                                               llvm::function_ref<bool(Value)> isSeed,
                                               llvm::function_ref<bool(Value)> isSink) {
  auto differentiable = [](Operation &op) {
    auto cost = dyn_cast<CostOpInterface>(&op);
    return !cost || cost.isDifferentiable();
  };
  // Forward: what depends on a seed through differentiable ops.
  llvm::DenseSet<Value> fromSeed;
  for (Operation &op : block) {
    bool anyGrad = llvm::any_of(op.getOperands(), [&](Value v) { return fromSeed.contains(v); });
    for (Value r : op.getResults())
      if (isFloat(r) && (isSeed(r) || (anyGrad && differentiable(op))))
        fromSeed.insert(r);
  }
  // Backward: what a sink depends on through differentiable ops.
  llvm::DenseSet<Value> toSink;
  for (Operation &op : llvm::reverse(block)) {
    bool reaches = llvm::any_of(op.getResults(), [&](Value r) { return toSink.contains(r); });
    for (Value v : op.getOperands())
      if (fromSeed.contains(v) && (isSink(v) || (reaches && differentiable(op))))
        toSink.insert(v);
  }
  for (Value v : fromSeed)
    if (isSink(v))
      toSink.insert(v);
  llvm::DenseSet<Value> flow;
  for (Value v : fromSeed)
    if (toSink.contains(v))
      flow.insert(v);
  return flow;
}

llvm::DenseSet<Value> pipe::computeFunctionGradientFlow(Block &body) {
  // The loss when the model carries one (pipe-attach-loss), else every output.
  llvm::DenseSet<Value> sinks;
  for (auto loss : body.getOps<pipeline::LossOp>())
    sinks.insert(loss.getValue());
  if (sinks.empty() && !body.empty())
    sinks.insert(body.back().getOperands().begin(), body.back().getOperands().end());
  return computeGradientFlow(
      body,
      [](Value v) {
        auto param = v.getDefiningOp<nn::ParamOp>();
        return param && param.getTrainable();
      },
      [&](Value v) { return sinks.contains(v); });
}

LogicalResult CostAnalysis::compute(const CostSettings &newSettings) {
  settings = newSettings;
  records.clear();
  indexOf.clear();
  gradValues.clear();
  staticValues.clear();
  totals = CostTotals();
  if (!function || function->getNumRegions() == 0 || function->getRegion(0).empty())
    return success();
  unsigned floatBytes = storageBytes(settings.dtype);
  bool timing = !settings.target.name.empty();
  Block &body = function->getRegion(0).front();

  // Gradient flow and static (parameter-only) values, in program order.
  gradValues = computeFunctionGradientFlow(body);
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    bool allStatic = isParameterOrConstant(&op) ||
                     (op.getNumOperands() > 0 &&
                      llvm::all_of(op.getOperands(),
                                   [&](Value v) { return staticValues.contains(v); }));
    if (allStatic)
      for (Value r : op.getResults())
        staticValues.insert(r);
  }

  // Per-op costs and saved values.
  unsigned index = 0;
  for (Operation &op : body) {
    if (op.hasTrait<OpTrait::IsTerminator>())
      continue;
    OpRecord record;
    record.op = &op;
    record.name = nodeName(&op, index++);
    auto cost = dyn_cast<CostOpInterface>(&op);
    if (nn::isComposite(&op))
      return op.emitError("cost model: '")
             << op.getName() << "' is costed as its unrolled cells: expand it first "
             << "(nn-expand-composites; pipe-partition does it on a copy)";
    if (isa<nn::NNDialect>(op.getDialect()))
      for (Value v : llvm::concat<Value>(op.getOperands(), op.getResults()))
        if (!nn::hasStaticShape(v))
          return op.emitError("cost model: value of type ")
                 << v.getType() << " has no static shape (import with --micro-batch-size)";
    record.isStatic = !isParameterOrConstant(&op) && op.getNumOperands() > 0 &&
                      llvm::all_of(op.getOperands(),
                                   [&](Value v) { return staticValues.contains(v); });
    if (cost && !record.isStatic) {
      CostQuery query;
      query.floatBytes = floatBytes;
      query.operandNeedsGrad.resize(op.getNumOperands());
      query.operandIsStatic.resize(op.getNumOperands());
      // An op none of whose results gets a gradient has no backward, even
      // when an operand needs one through another user (the max an argmax
      // compares with): pipe-differentiate runs no rule for it.
      const bool resultGetsGrad =
          op.getNumResults() == 0 ||
          llvm::any_of(op.getResults(), [&](Value r) { return gradValues.contains(r); });
      for (auto [i, v] : llvm::enumerate(op.getOperands())) {
        if (resultGetsGrad && gradValues.contains(v))
          query.operandNeedsGrad.set(i);
        if (staticValues.contains(v))
          query.operandIsStatic.set(i);
      }
      record.cost = cost.computeCost(query);
      record.saved = cost.getSavedForBackward(query);
      record.needsBackward = record.cost.backwardKernels > 0 || record.cost.backwardFlops > 0 ||
                             record.cost.backwardBytes > 0;
    }
    indexOf[&op] = records.size();
    records.push_back(std::move(record));
  }

  // Saved bytes: parameters stay resident anyway; a value kept by several ops
  // is stored once, charged to the first op that keeps it.
  llvm::DenseSet<Value> kept;
  for (OpRecord &r : records) {
    r.savedBytes = r.chargedSavedBytes = r.saved.extraBytes;
    for (Value v : r.saved.values) {
      if (staticValues.contains(v))
        continue;
      r.savedBytes += bytes(v);
      if (kept.insert(v).second)
        r.chargedSavedBytes += bytes(v);
    }
  }

  // Element-wise fusion into the producer's kernel.
  const Calibration *calibration = activeCalibration(settings.target, settings.dtype);
  if (settings.fuseElementwise && (!calibration || calibration->fusesElementwise)) {
    for (OpRecord &r : records) {
      if (r.cost.kind != KernelClass::Elementwise || r.cost.forwardKernels == 0 ||
          r.op->getNumResults() == 0)
        continue;
      double outElements = numElements(r.op->getResult(0));
      OpRecord *producer = nullptr;
      Value fusedValue;
      for (Value v : r.op->getOperands()) {
        Operation *def = v.getDefiningOp();
        if (!def || !v.hasOneUse() || numElements(v) != outElements)
          continue;
        const OpRecord *p = lookup(def);
        if (!p || p->cost.kind == KernelClass::Free ||
            p->cost.kind == KernelClass::DataMovement ||
            (p->cost.forwardKernels == 0 && !p->fusedInto))
          continue;
        if (!producer || indexOf[def] > indexOf[producer->op]) {
          producer = &records[indexOf[def]];
          fusedValue = v;
        }
      }
      if (!producer)
        continue;
      r.fusedInto = producer->fusedInto ? producer->fusedInto : producer->op;
      // The intermediate is neither written by the producer nor read here,
      // unless the backward keeps it (then it is written once anyway).
      bool keptForBackward = kept.contains(fusedValue);
      double saving = (keptForBackward ? 1 : 2) * bytes(fusedValue);
      r.cost.forwardBytes = std::max(0.0, r.cost.forwardBytes - saving);
      r.cost.forwardKernels = 0;
      if (r.cost.backwardKernels > 0) {
        r.cost.backwardBytes = std::max(0.0, r.cost.backwardBytes - 2 * bytes(fusedValue));
        r.cost.backwardWeightBytes = std::min(r.cost.backwardWeightBytes, r.cost.backwardBytes);
        r.cost.backwardKernels = 0;
      }
    }
  }

  // Times.
  if (timing) {
    for (OpRecord &r : records) {
      KernelClass kind = r.cost.kind;
      if ((kind == KernelClass::Gemm || kind == KernelClass::Conv) &&
          settings.target.peakFlops(kind, settings.dtype) <= 0)
        return function->emitError("cost model: target '")
               << settings.target.name << "' has no " << toString(settings.dtype)
               << " rate for " << toString(kind) << " kernels";
      const OpCost &c = r.cost;
      r.forwardSeconds = rooflineSeconds(settings.target, kind, settings.dtype,
                                         c.forwardFlops, c.forwardBytes, c.forwardKernels);
      r.backwardSeconds = rooflineSeconds(settings.target, kind, settings.dtype,
                                          c.backwardFlops, c.backwardBytes, c.backwardKernels);
      r.backwardWeightSeconds =
          c.backwardWeightFlops > 0 || c.backwardWeightBytes > 0
              ? std::min(r.backwardSeconds,
                         rooflineSeconds(settings.target, kind, settings.dtype,
                                         c.backwardWeightFlops, c.backwardWeightBytes,
                                         c.backwardKernels > 0 ? 1 : 0))
              : 0;
      KernelFamily family = c.effectiveFamily();
      if (calibration && family != KernelFamily::None) {
        auto timed = [&](KernelPass pass, double flops, double bytes, unsigned kernels) {
          return calibratedSeconds(settings.target, calibration->model(family, pass), family,
                                   settings.dtype, kernelDims(c.shape, pass), flops, bytes,
                                   kernels);
        };
        const KernelModel &bwd = calibration->model(family, KernelPass::Backward);
        bool split = calibration->model(family, KernelPass::BackwardData).fitted &&
                     calibration->model(family, KernelPass::BackwardWeight).fitted;
        if (calibration->model(family, KernelPass::Forward).fitted)
          r.forwardSeconds =
              timed(KernelPass::Forward, c.forwardFlops, c.forwardBytes, c.forwardKernels);
        if (split && c.backwardFlops > 0) {
          // The weight gradient is one kernel (a bias gradient rides in it).
          unsigned weightKernels = c.backwardWeightFlops > 0 && c.backwardKernels > 0 ? 1 : 0;
          r.backwardWeightSeconds = timed(KernelPass::BackwardWeight, c.backwardWeightFlops,
                                          c.backwardWeightBytes, weightKernels);
          r.backwardSeconds = r.backwardWeightSeconds +
                              timed(KernelPass::BackwardData,
                                    c.backwardFlops - c.backwardWeightFlops,
                                    c.backwardBytes - c.backwardWeightBytes,
                                    c.backwardKernels - weightKernels);
        } else if (bwd.fitted && (c.backwardFlops > 0 || c.backwardBytes > 0)) {
          r.backwardSeconds = timed(KernelPass::Backward, c.backwardFlops, c.backwardBytes,
                                    c.backwardKernels);
          // The weight gradients' share of the work (FLOPs or bytes).
          bool compute = isComputeFamily(family);
          double all = compute ? c.backwardFlops : c.backwardBytes;
          double weight = compute ? c.backwardWeightFlops : c.backwardWeightBytes;
          r.backwardWeightSeconds = all > 0 ? r.backwardSeconds * std::min(1.0, weight / all) : 0;
        }
      }
      if (settings.profile) {
        auto it = settings.profile->times.find(r.name);
        if (it != settings.profile->times.end()) {
          double share = r.backwardSeconds > 0 ? r.backwardWeightSeconds / r.backwardSeconds : 0;
          r.forwardSeconds = it->second.forwardMs * 1e-3;
          r.backwardSeconds = it->second.backwardMs * 1e-3;
          r.backwardWeightSeconds = share * r.backwardSeconds;
          r.fromProfile = true;
        }
      }
    }
  }

  for (const OpRecord &r : records) {
    totals.forwardFlops += r.cost.forwardFlops;
    totals.backwardFlops += r.cost.backwardFlops;
    if (r.cost.kind == KernelClass::Gemm || r.cost.kind == KernelClass::Conv)
      totals.forwardGemmFlops += r.cost.forwardFlops;
    totals.forwardBytes += r.cost.forwardBytes;
    totals.backwardBytes += r.cost.backwardBytes;
    totals.forwardSeconds += r.forwardSeconds;
    totals.backwardSeconds += r.backwardSeconds;
    totals.savedBytes += r.chargedSavedBytes;
    if (auto param = dyn_cast<nn::ParamOp>(r.op)) {
      if (param.getTrainable() && isFloat(param.getOutput()))
        totals.trainableParameters += numElements(param.getOutput());
      else
        totals.bufferElements += numElements(param.getOutput());
    }
  }
  return success();
}

FailureOr<CostSettings> pipe::parseCostSettings(Operation *diagnosticOp, llvm::StringRef target,
                                                llvm::StringRef dtype,
                                                llvm::StringRef profilePath,
                                                std::optional<Profile> &profileStorage) {
  CostSettings settings;
  if (!target.empty()) {
    auto t = lookupTarget(target);
    if (!t)
      return diagnosticOp->emitError(llvm::toString(t.takeError()));
    settings.target = *t;
  }
  auto d = parseComputeDtype(dtype);
  if (!d)
    return diagnosticOp->emitError("unknown dtype '") << dtype << "' (fp32, tf32, fp16, bf16, fp8)";
  settings.dtype = *d;
  if (!profilePath.empty()) {
    auto p = Profile::readFile(profilePath);
    if (!p)
      return diagnosticOp->emitError(llvm::toString(p.takeError()));
    profileStorage = std::move(*p);
    settings.profile = &*profileStorage;
  }
  return settings;
}
