//===- Recurrent.cpp - ONNX LSTM, GRU and RNN as nn.lstm, nn.gru, nn.rnn --===//
//
// One op per node, with ONNX's attributes; constant sequence_lens become an
// attribute (all equal to the sequence: none). The cells are written by
// nn-expand-composites, after the partitioner has placed the layer and
// costed it as those cells. The op's verifier (rnn_c1-c5) checks the rest
// as soon as it is made, its errors at the node.
//
//===----------------------------------------------------------------------===//
#include "CompositeOps.h"
#include "Composer.h"

#include "pipe/Dialect/NN/IR/NNRecurrent.h"

#include "mlir/IR/Verifier.h"

using namespace mlir;
using namespace pipe::onnx_import;
using llvm::SmallVector;

namespace {
using Kind = AttrKind;
using pipe::nn::RecurrentCell;

Values importRecurrent(NodeImporter &n, RecurrentCell cell) {
  std::vector<AttrSpec> specs{{"activation_alpha", Kind::Floats},
                              {"activation_beta", Kind::Floats},
                              {"activations", Kind::Strings},
                              {"clip", Kind::Float},
                              {"direction", Kind::String},
                              {"hidden_size", Kind::Int, true},
                              {"layout", Kind::Int}};
  if (cell == RecurrentCell::Lstm)
    specs.push_back({"input_forget", Kind::Int});
  if (cell == RecurrentCell::Gru)
    specs.push_back({"linear_before_reset", Kind::Int});
  const unsigned maxInputs = cell == RecurrentCell::Lstm ? 8 : 6;
  if (failed(expectFloatNode(n, 3, maxInputs, specs)))
    return failure();
  OpBuilder &b = n.builder;
  const std::string directionName = n.getString("direction", "forward");
  auto x = rankedInput(n, 0);
  if (!x || !x.hasStaticShape() || x.getRank() != 3)
    return n.error() << n.node.op_type() << " needs a static rank-3 input, got "
                     << n.input(0).getType();
  SmallVector<NamedAttribute> attrs{
      b.getNamedAttr("hidden_size", b.getI64IntegerAttr(n.getInt("hidden_size", 0))),
      b.getNamedAttr("direction", b.getStringAttr(directionName)),
      b.getNamedAttr("layout", b.getI64IntegerAttr(n.getInt("layout", 0)))};
  if (const onnx::AttributeProto *names = n.attribute("activations")) {
    SmallVector<StringRef> list;
    for (const std::string &name : names->strings())
      list.push_back(name);
    attrs.push_back(b.getNamedAttr("activations", b.getStrArrayAttr(list)));
  }
  SmallVector<float> alphas, betas;
  if (const onnx::AttributeProto *given = n.attribute("activation_alpha"))
    alphas.assign(given->floats().begin(), given->floats().end());
  if (const onnx::AttributeProto *given = n.attribute("activation_beta"))
    betas.assign(given->floats().begin(), given->floats().end());
  if (!alphas.empty())
    attrs.push_back(b.getNamedAttr("activation_alpha", b.getDenseF32ArrayAttr(alphas)));
  if (!betas.empty())
    attrs.push_back(b.getNamedAttr("activation_beta", b.getDenseF32ArrayAttr(betas)));
  if (n.attribute("clip"))
    attrs.push_back(b.getNamedAttr("clip", b.getF32FloatAttr(n.getFloat("clip", 0))));
  if (cell == RecurrentCell::Lstm && n.getInt("input_forget", 0))
    attrs.push_back(b.getNamedAttr("input_forget", b.getI64IntegerAttr(1)));
  if (cell == RecurrentCell::Gru && n.getInt("linear_before_reset", 0))
    attrs.push_back(b.getNamedAttr("linear_before_reset", b.getI64IntegerAttr(1)));
  // Constant sequence lengths; all equal to the sequence is no mask at all.
  if (n.input(4)) {
    auto given = constantInts(n, 4, "sequence_lens");
    if (failed(given))
      return failure();
    const int64_t steps = x.getDimSize(n.getInt("layout", 0) ? 1 : 0);
    if (llvm::any_of(*given, [&](int64_t length) { return length != steps; }))
      attrs.push_back(b.getNamedAttr("sequence_lens", b.getDenseI64ArrayAttr(*given)));
  }

  // X, W, R, B, initial_h (and initial_c, P), the absent ones left out.
  SmallVector<unsigned> inputs{0, 1, 2, 3, 5};
  if (cell == RecurrentCell::Lstm)
    inputs.append({6, 7});
  SmallVector<Value> operands;
  SmallVector<int32_t> segments;
  for (unsigned i : inputs) {
    segments.push_back(n.input(i) ? 1 : 0);
    if (n.input(i))
      operands.push_back(n.input(i));
  }
  attrs.push_back(b.getNamedAttr("operandSegmentSizes", b.getDenseI32ArrayAttr(segments)));
  llvm::StringRef name = cell == RecurrentCell::Lstm  ? "nn.lstm"
                         : cell == RecurrentCell::Gru ? "nn.gru"
                                                      : "nn.rnn";
  auto results = n.create(name, operands, attrs, cell == RecurrentCell::Lstm ? 3 : 2);
  if (failed(results))
    return failure();
  if (Operation *op = (*results)[0].getDefiningOp(); op && failed(mlir::verify(op)))
    return failure();
  results->resize(std::max(1u, n.numOutputs()));
  return results;
}
} // namespace

void pipe::onnx_import::addRecurrent(const AddOp &add) {
  add("LSTM", {1, 7, 14, 22}, 7,
      [](NodeImporter &n) { return importRecurrent(n, RecurrentCell::Lstm); });
  add("GRU", {1, 3, 7, 14, 22}, 7,
      [](NodeImporter &n) { return importRecurrent(n, RecurrentCell::Gru); });
  add("RNN", {1, 7, 14, 22}, 7,
      [](NodeImporter &n) { return importRecurrent(n, RecurrentCell::Rnn); });
}
