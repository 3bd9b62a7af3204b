// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-attach-loss
// RUN: not pipe-opt %s -split-input-file -pipe-attach-loss=loss=mse -o /dev/null 2>&1 | FileCheck %s --check-prefix=MSE
// RUN: not pipe-opt %s -split-input-file -pipe-attach-loss=loss=output -o /dev/null 2>&1 | FileCheck %s --check-prefix=OUTPUT
// An unknown loss names the known ones.
// RUN: not pipe-opt %s -pipe-attach-loss=loss=hinge -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: error: unknown loss 'hinge' (cross-entropy, mse, output or none)

// An integer model output: no loss applies; the error is at the op that
// produces it.
func.func @integer_output(%x: tensor<4x10xf32>) -> tensor<4x10xi64> {
  // expected-error @+2 {{--loss=cross-entropy needs a float model output [..., classes] with static shape; output 0 is 'tensor<4x10xi64>'}}
  // MSE: pipe-attach-loss-errors.mlir:[[# @LINE + 1]]:8: error: --loss=mse needs a float model output with static shape; output 0 is 'tensor<4x10xi64>'
  %y = nn.cast %x {to = i64} : (tensor<4x10xf32>) -> tensor<4x10xi64>
  return %y : tensor<4x10xi64>
}

// -----

// Cross-entropy needs a class dim (mse does not).
// An output that is a block argument: the error is at the return.
// --loss=output needs a scalar.
func.func @no_class_dim(%x: tensor<10xf32>) -> tensor<10xf32> {
  // expected-error @+2 {{--loss=cross-entropy needs a float model output [..., classes] with static shape; output 0 is 'tensor<10xf32>'}}
  // OUTPUT: pipe-attach-loss-errors.mlir:[[# @LINE + 1]]:3: error: --loss=output needs model output 0 to be a float scalar (a loss computed in the graph); output 0 is 'tensor<10xf32>'
  return %x : tensor<10xf32>
}

// -----

// A scalar output is a loss the model computes itself: the error says how to
// train on it.
func.func @scalar_output(%x: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{--loss=cross-entropy needs a float model output [..., classes] with static shape; output 0 is 'tensor<f32>'; a loss the model computes itself trains with --loss=output}}
  %l = nn.reduce_mean %x {keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @dynamic_output(%x: tensor<?x10xf32>) -> tensor<?x10xf32> {
  // expected-error @+2 {{--loss=cross-entropy needs a float model output [..., classes] with static shape; output 0 is 'tensor<?x10xf32>'}}
  // MSE: pipe-attach-loss-errors.mlir:[[# @LINE + 1]]:8: error: --loss=mse needs a float model output with static shape; output 0 is 'tensor<?x10xf32>'
  %y = nn.relu %x : (tensor<?x10xf32>) -> tensor<?x10xf32>
  return %y : tensor<?x10xf32>
}

// -----

// expected-error @+2 {{the model has no output to attach the loss to}}
// MSE: pipe-attach-loss-errors.mlir:[[# @LINE + 1]]:1: error: the model has no output to attach the loss to
func.func @no_output(%x: tensor<4x10xf32>) {
  return
}
