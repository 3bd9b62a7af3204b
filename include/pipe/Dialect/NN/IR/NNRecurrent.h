//===- NNRecurrent.h - nn.lstm, nn.gru and nn.rnn alike ---------*- C++ -*-===//
//
// The three recurrent ops read as one description: their operands, the
// attributes that shape the cells, and the activations with their alpha and
// beta resolved as ONNX defines them. The verifier, the shape rule and
// nn-expand-composites read the ops through it.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_DIALECT_NN_IR_NNRECURRENT_H
#define PIPE_DIALECT_NN_IR_NNRECURRENT_H

#include "pipe/Dialect/NN/IR/NNOps.h"

#include <optional>
#include <string>

namespace pipe::nn {

enum class RecurrentCell { Lstm, Gru, Rnn };

/// One activation of a cell, with its alpha and beta.
struct RecurrentActivation {
  std::string name;
  double alpha = 0, beta = 0;
};

struct RecurrentLayer {
  RecurrentCell cell = RecurrentCell::Rnn;
  /// Absent optional operands are null.
  mlir::Value x, w, r, b, initialH, initialC, peepholes;
  int64_t hiddenSize = 0, layout = 0;
  llvm::StringRef direction;
  mlir::ArrayAttr activations;                 ///< null: the cell's defaults
  llvm::ArrayRef<float> alphas, betas;         ///< consumed in order
  std::optional<double> clip;
  std::optional<llvm::ArrayRef<int64_t>> sequenceLengths;
  int64_t inputForget = 0, linearBeforeReset = 0;

  /// Gates per cell: LSTM 4 (i, o, f, c), GRU 3 (z, r, h), RNN 1.
  int64_t gates() const;
  /// Activations per direction: LSTM 3 (f, g, h), GRU 2, RNN 1.
  int64_t activationsPerDirection() const;
  int64_t directions() const { return direction == "bidirectional" ? 2 : 1; }
  /// The ONNX op name (LSTM, GRU, RNN), for messages.
  llvm::StringRef onnxName() const;
  /// The activations of all directions, defaults filled in and alpha and beta
  /// consumed in order by the activations that take them; an error message
  /// when a name is not supported or the count is not activationsPerDirection
  /// times the directions.
  mlir::FailureOr<llvm::SmallVector<RecurrentActivation>>
  resolveActivations(std::string &error) const;
};

/// The description of an nn.lstm, nn.gru or nn.rnn; nullopt for any other op.
std::optional<RecurrentLayer> getRecurrentLayer(mlir::Operation *op);

} // namespace pipe::nn

#endif // PIPE_DIALECT_NN_IR_NNRECURRENT_H
