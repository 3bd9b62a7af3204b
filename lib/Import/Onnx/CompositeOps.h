//===- CompositeOps.h - ONNX ops imported as several nn ops ----*- C++ -*-===//
#ifndef PIPE_LIB_IMPORT_ONNX_COMPOSITEOPS_H
#define PIPE_LIB_IMPORT_ONNX_COMPOSITEOPS_H

#include "NodeImporter.h"

namespace pipe::onnx_import {

/// Registers an op type in the handler table: its versions in the ONNX
/// changelog, the oldest one handled, and the handler.
using AddOp = std::function<void(const char *name, llvm::ArrayRef<int> versions,
                                 int minVersion, NodeHandler handler)>;

/// Adds the ops that import as several nn ops (CompositeOps.cpp): Elu, Selu,
/// Celu, ThresholdedRelu, Softsign, Mish, PRelu, Mean, Size, CastLike, the
/// reductions ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum and
/// ReduceLogSumExp, the losses NegativeLogLikelihoodLoss and
/// SoftmaxCrossEntropyLoss, ArgMax, ArgMin, Hardmax, OneHot, GatherElements,
/// DepthToSpace, SpaceToDepth and InstanceNormalization.
void addCompositeOps(const AddOp &add);

/// Adds the index, scatter and test ops (IndexOps.cpp): TopK, GatherND,
/// ScatterElements, Scatter, ScatterND, Compress, ReverseSequence, CumSum,
/// EyeLike, NonZero, LRN, MeanVarianceNormalization, Shrink, IsNaN, IsInf,
/// Xor and BitShift.
void addIndexOps(const AddOp &add);

/// Adds Einsum (Einsum.cpp): any equation, as transposes, reductions and
/// batched matmuls.
void addEinsum(const AddOp &add);

/// Adds Resize and Upsample (Resize.cpp): each resized dim is a matmul with a
/// constant interpolation matrix.
void addResize(const AddOp &add);

/// Adds LSTM, GRU and RNN (Recurrent.cpp), unrolled into their cells.
void addRecurrent(const AddOp &add);

/// Adds DFT, STFT and MelWeightMatrix (Spectral.cpp): the transforms as a
/// matmul with a constant DFT matrix, the filters as a constant.
void addSpectral(const AddOp &add);

/// Adds GridSample, RoiAlign and MaxUnpool (Sampling.cpp): gathers at computed
/// positions, weighted, and a scatter into zeros.
void addSampling(const AddOp &add);

/// Adds Det (Determinant.cpp): Gaussian elimination with partial pivoting.
void addDeterminant(const AddOp &add);

/// Adds If, Loop and Scan (ControlFlow.cpp): the branch a constant condition
/// selects, and loops and scans with static trip counts, unrolled.
void addControlFlow(const AddOp &add);

/// LayerNormalization with its Mean and InvStdDev outputs, as reductions:
/// nn.layer_norm's gradient is its output's only, and these are values the
/// graph may use. The outputs keep the normalized dims as 1s.
mlir::FailureOr<llvm::SmallVector<mlir::Value>> importLayerNormWithStatistics(NodeImporter &n);

/// Axes given as an attribute before `attributeUntil` (opset 13 for ReduceSum,
/// 18 for most reductions) become a constant operand, as in the newer form;
/// since then they are input `inputIndex` (null when absent).
mlir::Value axesOperand(NodeImporter &n, unsigned inputIndex, int attributeUntil);

} // namespace pipe::onnx_import

#endif // PIPE_LIB_IMPORT_ONNX_COMPOSITEOPS_H
