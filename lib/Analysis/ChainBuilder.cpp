//===- ChainBuilder.cpp - the analysed function as a partitioning problem -===//
#include "pipe/Analysis/ChainBuilder.h"

#include "pipe/Dialect/NN/IR/NNOps.h"
#include "pipe/Dialect/NN/Transforms/Passes.h"
#include "pipe/Dialect/Pipe/IR/PipeDialect.h"

#include "partitioner/Problem.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"
#include <algorithm>
#include <sstream>

using namespace mlir;
using namespace pipe;

std::vector<LayerGroup> pipe::groupLayers(const CostAnalysis &analysis) {
  ArrayRef<OpRecord> records = analysis.getRecords();
  llvm::DenseMap<Operation *, int> groupOf;
  std::vector<LayerGroup> groups;
  std::vector<const OpRecord *> deferred;

  auto latestOperandGroup = [&](Operation *op) {
    int latest = -1;
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto it = groupOf.find(def); it != groupOf.end())
          latest = std::max(latest, it->second);
    return latest;
  };

  for (const OpRecord &r : records) {
    Operation *op = r.op;
    if (isParameterOrConstant(op)) {
      deferred.push_back(&r);
      continue;
    }
    bool ownKernel = !r.fusedInto && !r.isStatic && r.cost.kind != KernelClass::Free &&
                     r.cost.forwardKernels > 0;
    if (ownKernel) {
      groupOf[op] = static_cast<int>(groups.size());
      groups.push_back({op, {}});
      continue;
    }
    int group = latestOperandGroup(op);
    if (r.fusedInto)
      group = std::max(group, groupOf.lookup(r.fusedInto));
    if (group < 0) {
      deferred.push_back(&r); // on parameters, constants and graph inputs only
      continue;
    }
    groupOf[op] = group;
  }
  if (groups.empty() && !records.empty()) {
    groups.push_back({records.front().op, {}});
  }
  // Deferred ops join their earliest user's layer (users come later in program
  // order, so walk backwards); unused ones join the last layer.
  for (auto it = deferred.rbegin(); it != deferred.rend(); ++it) {
    Operation *op = (*it)->op;
    int group = -1;
    for (Operation *user : op->getUsers())
      if (auto found = groupOf.find(user); found != groupOf.end())
        group = group < 0 ? found->second : std::min(group, found->second);
    groupOf[op] = group < 0 ? static_cast<int>(groups.size()) - 1 : group;
  }
  for (const OpRecord &r : records)
    groups[groupOf.lookup(r.op)].ops.push_back(r.op);
  return groups;
}

FailureOr<AnalysedFunction> pipe::AnalysedFunction::of(func::FuncOp original) {
  AnalysedFunction result;
  result.func = original;
  bool anyComposite = false;
  original.walk([&](Operation *op) { anyComposite |= nn::isComposite(op); });
  if (!anyComposite)
    return result;
  result.scratch = ModuleOp::create(original.getLoc());
  OpBuilder builder(original.getContext());
  builder.setInsertionPointToEnd(result.scratch->getBody());
  auto copy = cast<func::FuncOp>(builder.clone(*original));
  result.func = copy;
  for (auto [op, cloned] : llvm::zip_equal(original.getBody().front(), copy.getBody().front()))
    result.originOf[&cloned] = &op;
  if (failed(nn::expandComposites(copy, [&](Operation *composite, Operation *made) {
        result.originOf[made] = result.originOf.lookup(composite);
      })))
    return failure();
  return result;
}

std::vector<LayerGroup> pipe::groupModelLayers(const CostAnalysis &analysis,
                                               const AnalysedFunction &analysed) {
  std::vector<LayerGroup> groups = groupLayers(analysis);
  if (analysed.originOf.empty())
    return groups;
  // A composite is the layer of its formula's first kernel: the formula's
  // other kernels, the ops fused into them or free on their results, and any
  // formula op that joined another layer move there. A formula reads only the
  // composite's operands and itself, and its results are read after it, so
  // def-use edges stay forward.
  llvm::DenseMap<Operation *, size_t> layerOfComposite;
  for (auto [index, group] : llvm::enumerate(groups))
    if (Operation *origin = analysed.origin(group.anchor); nn::isComposite(origin))
      layerOfComposite.try_emplace(origin, index);
  std::vector<LayerGroup> moved(groups.size());
  for (auto [index, group] : llvm::enumerate(groups)) {
    moved[index].anchor = group.anchor;
    auto anchorLayer = layerOfComposite.find(analysed.origin(group.anchor));
    for (Operation *op : group.ops) {
      size_t layer = index;
      if (auto own = layerOfComposite.find(analysed.origin(op)); own != layerOfComposite.end())
        layer = own->second;
      else if (anchorLayer != layerOfComposite.end())
        layer = anchorLayer->second;
      moved[layer].ops.push_back(op);
    }
  }
  std::vector<LayerGroup> merged;
  for (LayerGroup &group : moved) {
    if (group.ops.empty())
      continue;
    llvm::sort(group.ops, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
    merged.push_back(std::move(group));
  }
  return merged;
}

std::vector<std::vector<Operation *>>
pipe::originalOpsOfLayers(ArrayRef<LayerGroup> groups, const AnalysedFunction &analysed) {
  std::vector<std::vector<Operation *>> opsOfLayer;
  for (const LayerGroup &group : groups) {
    std::vector<Operation *> ops;
    llvm::DenseSet<Operation *> seen;
    for (Operation *op : group.ops)
      if (Operation *origin = analysed.origin(op); seen.insert(origin).second)
        ops.push_back(origin);
    opsOfLayer.push_back(std::move(ops));
  }
  return opsOfLayer;
}

FailureOr<partitioner::Problem> pipe::buildChainProblem(const CostAnalysis &analysis,
                                                        ArrayRef<LayerGroup> groups,
                                                        const TrainingPolicy &policy) {
  const CostSettings &settings = analysis.getSettings();
  if (groups.empty()) {
    if (Operation *fn = analysis.getFunction())
      return fn->emitError("cannot build a chain: the function has no ops");
    return failure();
  }
  llvm::DenseMap<Operation *, int> groupOf;
  for (auto [i, group] : llvm::enumerate(groups))
    for (Operation *op : group.ops)
      groupOf[op] = static_cast<int>(i);

  partitioner::Problem problem;
  if (auto name = analysis.getFunction()->getAttrOfType<StringAttr>("sym_name"))
    problem.name = name.str();
  double stateMultiplier =
      policy.bytesPerParameter() / policy.weightBytesPerParameter();
  // An ONNX node lowered to several ops (or the compiler-added loss, several
  // ops named pipe.loss) may span layers; it is listed by the layer it names,
  // else by the first.
  llvm::StringSet<> listedNodes, layerNames;
  for (const LayerGroup &group : groups)
    layerNames.insert(analysis.lookup(group.anchor)->name);
  std::vector<std::vector<Operation *>> layerOps;
  for (const LayerGroup &group : groups)
    layerOps.push_back(group.ops);
  const LayerSavedBytes saved = computeLayerSavedBytes(analysis, layerOps);
  const LayerCarriedBytes carried = computeLayerCarriedBytes(analysis, layerOps);
  for (const LayerGroup &group : groups) {
    partitioner::Layer layer;
    layer.name = analysis.lookup(group.anchor)->name;
    double backwardWeight = 0;
    for (Operation *op : group.ops) {
      const OpRecord *r = analysis.lookup(op);
      bool named = !isa<nn::ParamOp>(op) && !pipeline::nodeNameOf(op->getLoc()).empty();
      if (named && (r->name == layer.name || !layerNames.contains(r->name)) &&
          listedNodes.insert(r->name).second)
        layer.nodeIds.push_back(r->name);
      layer.forwardMs += r->forwardSeconds * 1e3;
      layer.backwardMs += r->backwardSeconds * 1e3;
      backwardWeight += r->backwardWeightSeconds * 1e3;
    }
    // Node ids are unique across layers; a layer whose nodes another layer
    // lists (several layers of compiler-added ops) gets an id of its own.
    if (layer.nodeIds.empty())
      layer.nodeIds.push_back(listedNodes.insert(layer.name).second
                                  ? layer.name
                                  : layer.name + "#" + std::to_string(problem.layers.size()));
    layer.backwardWeightMs = std::min(backwardWeight, layer.backwardMs);
    StageMemory memory = computeStageMemory(analysis, group.ops, policy);
    const ParameterMemory &params = memory.parameters;
    layer.parameterBytes = params.weightBytes + params.bufferBytes / stateMultiplier;
    layer.savedBytes = saved.bytes[problem.layers.size()];
    // The layer run alone: what its forward or backward holds besides the saved
    // activations (its inputs and outputs, values freed within, kernel scratch),
    // and what it holds for the layers around it.
    const size_t index = problem.layers.size();
    layer.workspaceBytes = std::max(memory.forwardPeakBytes + carried.forward[index],
                                    memory.backwardPeakBytes + carried.backward[index]);
    // The model inputs it reads and the labels it makes (ops without operands
    // that are not parameters or constants): what a recomputing stage keeps.
    llvm::DenseSet<Value> inputs;
    for (Operation *op : group.ops) {
      for (Value operand : op->getOperands())
        if (isa<BlockArgument>(operand) && inputs.insert(operand).second)
          layer.inputBytes += analysis.bytes(operand);
      if (op->getNumOperands() == 0 && !isParameterOrConstant(op))
        for (Value result : op->getResults())
          layer.inputBytes += analysis.bytes(result);
    }
    problem.layers.push_back(std::move(layer));
  }

  for (const LayerSavedBytes::Shared &shared : saved.shared)
    problem.sharedSaved.push_back({shared.layers, shared.bytes});

  // Tied weights: a trainable parameter read by several layers sits in the first
  // one's group, and pipe-split-stages gives a reference to every stage reading it,
  // the first one owning it. It leaves that layer's parameters for
  // Problem::sharedParameters, which charges each GPU reading it.
  for (auto [i, group] : llvm::enumerate(groups)) {
    for (Operation *op : group.ops) {
      if (!isa<nn::ParamOp>(op))
        continue;
      std::vector<int> readers;
      for (Operation *user : op->getUsers())
        if (auto it = groupOf.find(user); it != groupOf.end())
          readers.push_back(it->second);
      std::sort(readers.begin(), readers.end());
      readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
      const ParameterMemory tied = computeParameterMemory({op}, policy);
      if (readers.size() < 2 || tied.trainableParameters == 0)
        continue;
      partitioner::Layer &owner = problem.layers[i];
      owner.parameterBytes = std::max(0.0, owner.parameterBytes - tied.weightBytes);
      problem.sharedParameters.push_back({readers, tied.weightBytes});
    }
  }

  // Exact cut sets: every value read outside its layer, as pipe-split-stages
  // sends it; parameters and constants are copied into each stage instead.
  for (auto [i, group] : llvm::enumerate(groups)) {
    for (Operation *op : group.ops) {
      if (isParameterOrConstant(op))
        continue;
      for (Value v : op->getResults()) {
        partitioner::Tensor tensor;
        tensor.producer = static_cast<int>(i);
        tensor.bytes = analysis.bytes(v);
        for (Operation *user : v.getUsers())
          if (auto it = groupOf.find(user); it != groupOf.end() && it->second != tensor.producer)
            tensor.consumers.push_back(it->second);
        if (tensor.consumers.empty())
          continue;
        std::sort(tensor.consumers.begin(), tensor.consumers.end());
        tensor.consumers.erase(std::unique(tensor.consumers.begin(), tensor.consumers.end()),
                               tensor.consumers.end());
        problem.layers[i].outputBytes += tensor.bytes;
        problem.tensors.push_back(std::move(tensor));
      }
    }
  }

  const Target &target = settings.target;
  if (target.memoryBytes > 0)
    problem.platform.memoryBytesPerGpu = target.memoryBytes;
  problem.platform.gpusPerNode = target.gpusPerNode;
  if (target.intraNode.bandwidthBytesPerSecond > 0)
    problem.platform.intraNode = {target.intraNode.bandwidthBytesPerSecond,
                                  target.intraNode.latencySeconds * 1e3};
  if (target.interNode.bandwidthBytesPerSecond > 0)
    problem.platform.interNode = {target.interNode.bandwidthBytesPerSecond,
                                  target.interNode.latencySeconds * 1e3};
  problem.training.stateMultiplier = stateMultiplier;
  return problem;
}

void pipe::writeProblemJson(const partitioner::Problem &problem, llvm::raw_ostream &os) {
  std::ostringstream out;
  partitioner::writeProblemJson(problem, out);
  os << out.str();
}
