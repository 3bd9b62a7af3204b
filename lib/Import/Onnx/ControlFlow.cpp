//===- ControlFlow.cpp - If, Loop and Scan, unrolled ----------------------===//
//
// A plan is made for one graph of tensors, so control flow is resolved when
// the model is imported: If takes the branch its constant condition selects,
// Loop and Scan are unrolled, their bodies imported once per iteration (ops
// named `<node>/iteration_<i>/<body node>`). A condition or trip count that
// depends on data is an error naming the node: bind the graph input it
// comes from before planning.
//
//===----------------------------------------------------------------------===//
#include "Composer.h"
#include "CompositeOps.h"

#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;

/// Loops and scans are unrolled up to this many iterations.
constexpr int64_t kMaxIterations = 1024;

/// The value of a constant one-element tensor (bool or integer), or nothing.
std::optional<int64_t> constantScalar(Value v) {
  DenseElementsAttr attr;
  if (!v || !matchPattern(v, m_Constant(&attr)) || attr.getNumElements() != 1 ||
      !isa<IntegerType>(attr.getElementType()))
    return std::nullopt;
  const APInt value = *attr.getValues<APInt>().begin();
  return attr.getElementType().isInteger(1) ? int64_t(value.getBoolValue())
                                            : value.getSExtValue();
}

/// The values of one scan output over the iterations, stacked along a new
/// dim `axis` (already counted in the stacked rank).
Value stack(Composer &c, llvm::ArrayRef<Value> slices, int64_t axis) {
  SmallVector<Value> expanded;
  Value axes = c.n.constantI64({axis});
  for (Value slice : slices)
    expanded.push_back(c.op("nn.unsqueeze", {slice, axes}));
  if (expanded.size() == 1)
    return expanded.front();
  return c.op("nn.concat", expanded, {c.n.builder.getNamedAttr("axis", c.n.builder.getI64IntegerAttr(axis))});
}

/// Checks that every iteration gave scan output `k` the same type, which
/// stacking needs.
LogicalResult sameTypes(NodeImporter &n, llvm::ArrayRef<Value> slices, size_t k) {
  for (auto [i, slice] : llvm::enumerate(slices))
    if (slice.getType() != slices.front().getType())
      return n.error() << n.node.op_type() << " scan output #" << k << " is "
                       << slices.front().getType() << " in iteration 0 but "
                       << slice.getType() << " in iteration " << i
                       << "; the iterations must agree to be stacked";
  return success();
}

FailureOr<SmallVector<Value>> importIf(NodeImporter &n) {
  if (failed(n.expectInputs(1, 1)) ||
      failed(n.expectAttributes({{"then_branch", Kind::Graph, true},
                                 {"else_branch", Kind::Graph, true}})))
    return failure();
  std::optional<int64_t> cond = constantScalar(n.input(0));
  if (!cond)
    return n.error() << "If's condition must be a constant one-element tensor: the branch "
                        "is chosen when the plan is made (bind the graph input it comes "
                        "from before planning)";
  const char *branch = *cond ? "then_branch" : "else_branch";
  auto results = n.subgraphs.importSubgraph(n, *n.getGraph(branch), {}, branch);
  if (failed(results))
    return failure();
  if (results->size() < n.numOutputs())
    return n.error() << "If's " << branch << " has " << results->size() << " outputs and the "
                     << "node " << n.numOutputs();
  return results;
}

/// Loop: `M` (optional trip count), `cond` (optional), then the carried
/// values; the body maps (iteration, cond, carried...) to (cond, carried...,
/// scan outputs...). The node's outputs are the final carried values and
/// the scan outputs stacked along a new first dim.
FailureOr<SmallVector<Value>> importLoop(NodeImporter &n) {
  // The trip count and the condition may both be omitted ("").
  if (failed(n.expectInputs(0, 2 + 1024)) ||
      failed(n.expectAttributes({{"body", Kind::Graph, true}})))
    return failure();
  if (n.numInputs() < 2)
    return n.error() << "Loop has " << n.numInputs()
                     << " inputs; it needs the trip count and the condition (each may be "
                        "\"\") before its carried values";
  const onnx::GraphProto &body = *n.getGraph("body");
  std::optional<int64_t> tripCount;
  if (n.input(0)) {
    tripCount = constantScalar(n.input(0));
    if (!tripCount)
      return n.error() << "Loop's trip count must be a constant: the loop is unrolled when "
                          "the plan is made (bind the graph input it comes from before "
                          "planning)";
    if (*tripCount > kMaxIterations)
      return n.error() << "Loop's trip count is " << *tripCount << "; loops are unrolled, up to "
                       << kMaxIterations << " iterations";
  }
  bool cond = true;
  if (n.input(1)) {
    std::optional<int64_t> value = constantScalar(n.input(1));
    if (!value)
      return n.error() << "Loop's condition must be a constant: the loop is unrolled when the "
                          "plan is made (bind the graph input it comes from before planning)";
    cond = *value != 0;
  }
  const size_t carriedCount = n.numInputs() - 2;
  if (body.input_size() != static_cast<int>(2 + carriedCount) ||
      body.output_size() < static_cast<int>(1 + carriedCount))
    return n.error() << "Loop's body has " << body.input_size() << " inputs and "
                     << body.output_size() << " outputs; with " << carriedCount
                     << " carried values it needs " << 2 + carriedCount << " inputs and at least "
                     << 1 + carriedCount << " outputs";
  const size_t scanCount = body.output_size() - 1 - carriedCount;
  SmallVector<Value> carried;
  for (size_t k = 0; k < carriedCount; ++k) {
    if (!n.input(2 + k))
      return n.error() << "Loop's carried value #" << k << " is not given";
    carried.push_back(n.input(2 + k));
  }
  std::vector<SmallVector<Value>> scans(scanCount);
  int64_t iteration = 0;
  for (; cond && (!tripCount || iteration < *tripCount); ++iteration) {
    if (iteration == kMaxIterations)
      return n.error() << "Loop is still running after " << kMaxIterations
                       << " iterations; loops are unrolled, up to that many";
    SmallVector<Value> bodyInputs = {n.constantI64({iteration}, true), n.constantBool(cond)};
    bodyInputs.append(carried);
    auto outputs = n.subgraphs.importSubgraph(n, body, bodyInputs,
                                              "iteration_" + std::to_string(iteration));
    if (failed(outputs))
      return failure();
    std::optional<int64_t> next = constantScalar((*outputs)[0]);
    if (!next)
      return n.error() << "Loop's body computes its condition from data in iteration "
                       << iteration << "; the trip count must be known when the plan is made";
    cond = *next != 0;
    for (size_t k = 0; k < carriedCount; ++k)
      carried[k] = (*outputs)[1 + k];
    for (size_t k = 0; k < scanCount; ++k)
      scans[k].push_back((*outputs)[1 + carriedCount + k]);
  }
  if (iteration == 0 && scanCount > 0)
    return n.error() << "Loop runs no iteration, so its scan outputs would be empty";
  SmallVector<Value> results = carried;
  Composer c(n);
  for (auto [k, slices] : llvm::enumerate(scans)) {
    if (failed(sameTypes(n, slices, k)))
      return failure();
    results.push_back(stack(c, slices, 0));
  }
  if (llvm::any_of(results, [](Value v) { return !v; }))
    return failure();
  return results;
}

/// The axes or directions attribute `name` of Scan (one per input or
/// output), `count` zeros when absent; axes are normalized against `ranks`.
FailureOr<SmallVector<int64_t>> perTensor(NodeImporter &n, llvm::StringRef name, size_t count,
                                          llvm::ArrayRef<int64_t> ranks, bool axes) {
  SmallVector<int64_t> values = n.getInts(name).value_or(SmallVector<int64_t>(count, 0));
  if (values.size() != count)
    return n.error() << "Scan's " << name << " has " << values.size() << " entries, "
                     << count << " expected";
  for (auto [k, value] : llvm::enumerate(values)) {
    if (!axes) {
      if (value != 0 && value != 1)
        return n.error() << "Scan's " << name << " must be 0 (forward) or 1 (reverse), got "
                         << value;
      continue;
    }
    auto axis = normalizedAxis(n, value, ranks[k]);
    if (failed(axis))
      return failure();
    value = *axis;
  }
  return values;
}

/// One scan: each iteration takes slice t of every scan input along its axis
/// (from the end when reversed) with the states; returns the final states and
/// the stacked scan outputs.
FailureOr<SmallVector<Value>> scan(NodeImporter &n, const onnx::GraphProto &body,
                                   SmallVector<Value> states, llvm::ArrayRef<Value> inputs,
                                   llvm::ArrayRef<int64_t> inputAxes,
                                   llvm::ArrayRef<int64_t> inputDirections,
                                   std::optional<llvm::ArrayRef<int64_t>> outputAxes,
                                   llvm::ArrayRef<int64_t> outputDirections, size_t outputCount) {
  Composer c(n);
  int64_t length = -1;
  for (auto [k, input] : llvm::enumerate(inputs)) {
    auto type = cast<RankedTensorType>(input.getType());
    int64_t dim = type.getDimSize(inputAxes[k]);
    if (ShapedType::isDynamic(dim))
      return n.error() << "Scan input #" << k << " has a dynamic length along its axis "
                       << inputAxes[k] << "; the scan is unrolled when the plan is made";
    if (length >= 0 && dim != length)
      return n.error() << "Scan inputs have lengths " << length << " and " << dim
                       << " along their axes";
    length = dim;
  }
  if (length <= 0)
    return n.error() << "Scan runs no iteration (its inputs are empty along their axes)";
  if (length > kMaxIterations)
    return n.error() << "Scan runs " << length << " iterations; scans are unrolled, up to "
                     << kMaxIterations;
  std::vector<SmallVector<Value>> outputs(outputCount);
  for (int64_t t = 0; t < length; ++t) {
    SmallVector<Value> bodyInputs = states;
    for (auto [k, input] : llvm::enumerate(inputs)) {
      int64_t at = inputDirections[k] ? length - 1 - t : t;
      Value index = n.constantI64({at}, true);
      bodyInputs.push_back(c.op("nn.gather", {input, index},
                                {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(
                                                                    inputAxes[k]))}));
    }
    if (llvm::any_of(bodyInputs, [](Value v) { return !v; }))
      return failure();
    auto results =
        n.subgraphs.importSubgraph(n, body, bodyInputs, "iteration_" + std::to_string(t));
    if (failed(results))
      return failure();
    if (results->size() != states.size() + outputCount)
      return n.error() << "Scan's body has " << results->size() << " outputs, "
                       << states.size() + outputCount << " expected";
    for (size_t k = 0; k < states.size(); ++k)
      states[k] = (*results)[k];
    for (size_t k = 0; k < outputCount; ++k)
      outputs[k].push_back((*results)[states.size() + k]);
  }
  SmallVector<Value> results = states;
  for (auto [k, slices] : llvm::enumerate(outputs)) {
    if (failed(sameTypes(n, slices, k)))
      return failure();
    if (outputDirections[k])
      std::reverse(slices.begin(), slices.end());
    int64_t rank = cast<RankedTensorType>(slices.front().getType()).getRank() + 1;
    int64_t axis = 0;
    if (outputAxes) {
      auto normalized = normalizedAxis(n, (*outputAxes)[k], rank);
      if (failed(normalized))
        return failure();
      axis = *normalized;
    }
    results.push_back(stack(c, slices, axis));
  }
  if (llvm::any_of(results, [](Value v) { return !v; }))
    return failure();
  return results;
}

/// Scan (opset 9 on): N states, then `num_scan_inputs` scan inputs; opset 8
/// also has a batch dim 0 on every input and output, and sequence lengths
/// first (absent, or the full length), and scans each batch row on its own.
FailureOr<SmallVector<Value>> importScan(NodeImporter &n) {
  const bool batched = n.version < 9;
  std::vector<AttrSpec> specs = {{"body", Kind::Graph, true},
                                 {"num_scan_inputs", Kind::Int, true}};
  if (batched) {
    specs.push_back({"directions", Kind::Ints});
  } else {
    specs.insert(specs.end(), {{"scan_input_axes", Kind::Ints},
                               {"scan_input_directions", Kind::Ints},
                               {"scan_output_axes", Kind::Ints},
                               {"scan_output_directions", Kind::Ints}});
  }
  // Opset 8's sequence lengths, input 0, may be omitted ("").
  if (failed(n.expectInputs(batched ? 0 : 1, 4096)) || failed(n.expectAttributes(specs)))
    return failure();
  if (n.numInputs() < (batched ? 2u : 1u))
    return n.error() << "Scan needs at least one scan input";
  const onnx::GraphProto &body = *n.getGraph("body");
  const unsigned first = batched ? 1 : 0;
  const int64_t scanInputs = n.getInt("num_scan_inputs", 0);
  if (scanInputs < 1 || scanInputs > n.numInputs() - first)
    return n.error() << "Scan's num_scan_inputs is " << scanInputs << " with "
                     << n.numInputs() - first << " state and scan inputs";
  const size_t stateCount = n.numInputs() - first - scanInputs;
  if (body.output_size() < static_cast<int>(stateCount))
    return n.error() << "Scan's body has " << body.output_size() << " outputs, fewer than its "
                     << stateCount << " states";
  const size_t outputCount = body.output_size() - stateCount;
  SmallVector<Value> states, inputs;
  SmallVector<int64_t> ranks;
  for (unsigned i = first; i < n.numInputs(); ++i) {
    RankedTensorType type = rankedInput(n, i);
    if (!type)
      return n.error() << "Scan input #" << i << " must be a ranked tensor";
    (i < first + stateCount ? states : inputs).push_back(n.input(i));
    if (i >= first + stateCount)
      ranks.push_back(type.getRank() - (batched ? 1 : 0));
  }
  if (!batched) {
    auto inputAxes = perTensor(n, "scan_input_axes", inputs.size(), ranks, true);
    auto inputDirections = perTensor(n, "scan_input_directions", inputs.size(), {}, false);
    auto outputDirections = perTensor(n, "scan_output_directions", outputCount, {}, false);
    if (failed(inputAxes) || failed(inputDirections) || failed(outputDirections))
      return failure();
    std::optional<SmallVector<int64_t>> outputAxes = n.getInts("scan_output_axes");
    if (outputAxes && outputAxes->size() != outputCount)
      return n.error() << "Scan's scan_output_axes has " << outputAxes->size() << " entries, "
                       << outputCount << " expected";
    std::optional<llvm::ArrayRef<int64_t>> axes;
    if (outputAxes)
      axes = *outputAxes;
    return scan(n, body, states, inputs, *inputAxes, *inputDirections, axes, *outputDirections,
                outputCount);
  }
  // Opset 8: every row of the batch is a scan of its own.
  auto directions = perTensor(n, "directions", inputs.size(), {}, false);
  if (failed(directions))
    return failure();
  SmallVector<int64_t> batchDims;
  for (Value v : llvm::concat<Value>(states, inputs))
    batchDims.push_back(cast<RankedTensorType>(v.getType()).getDimSize(0));
  const int64_t batch = batchDims.front();
  if (ShapedType::isDynamic(batch) || llvm::any_of(batchDims, [&](int64_t d) { return d != batch; }))
    return n.error() << "Scan (opset 8) needs one static batch size on every input";
  const int64_t length = cast<RankedTensorType>(inputs.front().getType()).getDimSize(1);
  if (Value lengths = n.input(0)) {
    DenseElementsAttr attr;
    if (!matchPattern(lengths, m_Constant(&attr)) ||
        llvm::any_of(attr.getValues<APInt>(),
                     [&](const APInt &v) { return v.getSExtValue() != length; }))
      return n.error() << "Scan's sequence_lens must be absent or a constant equal to the "
                          "full length "
                       << length << ": padded sequences are not supported";
  }
  Composer c(n);
  auto row = [&](Value v, int64_t b) {
    Value index = n.constantI64({b}, true);
    return c.op("nn.gather", {v, index},
                {n.builder.getNamedAttr("axis", n.builder.getI64IntegerAttr(0))});
  };
  std::vector<SmallVector<Value>> perRow(stateCount + outputCount);
  SmallVector<int64_t> inputAxes(inputs.size(), 0), outputDirections(outputCount, 0);
  for (int64_t b = 0; b < batch; ++b) {
    SmallVector<Value> rowStates, rowInputs;
    for (Value s : states)
      rowStates.push_back(row(s, b));
    for (Value x : inputs)
      rowInputs.push_back(row(x, b));
    if (llvm::any_of(llvm::concat<Value>(rowStates, rowInputs), [](Value v) { return !v; }))
      return failure();
    auto results = scan(n, body, rowStates, rowInputs, inputAxes, *directions, std::nullopt,
                        outputDirections, outputCount);
    if (failed(results))
      return failure();
    for (auto [k, value] : llvm::enumerate(*results))
      perRow[k].push_back(value);
  }
  SmallVector<Value> results;
  for (const SmallVector<Value> &rows : perRow)
    results.push_back(stack(c, rows, 0));
  if (llvm::any_of(results, [](Value v) { return !v; }))
    return failure();
  return results;
}
} // namespace

void pipe::onnx_import::addControlFlow(const AddOp &add) {
  add("If", {1, 11, 13, 16, 19, 21, 23}, 1, importIf);
  add("Loop", {1, 11, 13, 16, 19, 21, 23}, 1, importLoop);
  add("Scan", {8, 9, 11, 16, 19, 21, 23}, 8, importScan);
}
