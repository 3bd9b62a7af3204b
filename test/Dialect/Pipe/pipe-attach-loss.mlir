// RUN: pipe-opt %s -split-input-file -pipe-attach-loss | FileCheck %s
// RUN: pipe-opt %s -split-input-file -pipe-attach-loss=loss=mse | FileCheck %s --check-prefix=MSE
// loss=none attaches nothing: the output is the input printed back.
// RUN: pipe-opt %s -split-input-file > %t.plain
// RUN: pipe-opt %s -split-input-file -pipe-attach-loss=loss=none > %t.none
// RUN: diff %t.plain %t.none
// RUN: FileCheck %s --check-prefix=NONE < %t.none

// NONE-NOT: pipe.label
// NONE-NOT: pipe.loss

// Cross-entropy on [N, C] logits: i64 class labels of shape [N] in [0, C),
// the loss op on the output itself, its loss to pipe.loss; the output is
// still returned.
// CHECK-LABEL: func @classes
// CHECK: %[[Y:.*]] = nn.matmul
// CHECK-NEXT: %[[LABELS:.*]] = pipe.label 0 {range = 10 : i64} : tensor<4xi64>
// CHECK-NEXT: %[[LOSS:.*]], %{{.*}} = nn.softmax_cross_entropy_loss %[[Y]], %[[LABELS]] : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: pipe.loss %[[LOSS]] : tensor<f32>
// CHECK-NEXT: return %[[Y]] : tensor<4x10xf32>
// Mean squared error: float labels of the output's shape (range 0), the
// mean of the squared difference over every element.
// MSE-LABEL: func @classes
// MSE: %[[Y:.*]] = nn.matmul
// MSE-NEXT: %[[LABELS:.*]] = pipe.label 0 {range = 0 : i64} : tensor<4x10xf32>
// MSE-NEXT: %[[DIFF:.*]] = nn.sub %[[Y]], %[[LABELS]] : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<4x10xf32>
// MSE-NEXT: %[[SQUARE:.*]] = nn.mul %[[DIFF]], %[[DIFF]]
// MSE-NEXT: %[[MEAN:.*]] = nn.reduce_mean %[[SQUARE]] {keepdims = 0 : i64} : (tensor<4x10xf32>) -> tensor<f32>
// MSE-NEXT: pipe.loss %[[MEAN]] : tensor<f32>
// MSE-NEXT: return %[[Y]]
func.func @classes(%x: tensor<4x16xf32>) -> tensor<4x10xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<16x10xf32>
  %y = nn.matmul %x, %w : (tensor<4x16xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
  return %y : tensor<4x10xf32>
}

// -----

// Cross-entropy on [B, T, V] (a language model): the last dim is the
// classes; logits are viewed as [B*T, V] and the [B, T] labels as [B*T].
// CHECK-LABEL: func @tokens
// CHECK: %[[Y:.*]] = nn.matmul
// CHECK-NEXT: %[[LABELS:.*]] = pipe.label 0 {range = 32 : i64} : tensor<2x8xi64>
// CHECK-NEXT: %[[ROWS:.*]] = nn.constant dense<[16, 32]> : tensor<2xi64>
// CHECK-NEXT: %[[LOGITS:.*]] = nn.reshape %[[Y]], %[[ROWS]] : (tensor<2x8x32xf32>, tensor<2xi64>) -> tensor<16x32xf32>
// CHECK-NEXT: %[[FLAT:.*]] = nn.constant dense<16> : tensor<1xi64>
// CHECK-NEXT: %[[FLAT_LABELS:.*]] = nn.reshape %[[LABELS]], %[[FLAT]] : (tensor<2x8xi64>, tensor<1xi64>) -> tensor<16xi64>
// CHECK-NEXT: %[[LOSS:.*]], %{{.*}} = nn.softmax_cross_entropy_loss %[[LOGITS]], %[[FLAT_LABELS]] : (tensor<16x32xf32>, tensor<16xi64>) -> (tensor<f32>, tensor<16x32xf32>)
// CHECK-NEXT: pipe.loss %[[LOSS]] : tensor<f32>
// CHECK-NEXT: return %[[Y]] : tensor<2x8x32xf32>
// MSE-LABEL: func @tokens
// MSE: pipe.label 0 {range = 0 : i64} : tensor<2x8x32xf32>
// MSE: nn.reduce_mean {{.*}} : (tensor<2x8x32xf32>) -> tensor<f32>
func.func @tokens(%x: tensor<2x8x16xf32>) -> tensor<2x8x32xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<16x32xf32>
  %y = nn.matmul %x, %w : (tensor<2x8x16xf32>, tensor<16x32xf32>) -> tensor<2x8x32xf32>
  return %y : tensor<2x8x32xf32>
}

// -----

// Only model output 0 gets the loss; the others are returned unchanged.
// CHECK-LABEL: func @two_outputs
// CHECK: %[[FEATURES:.*]] = nn.relu
// CHECK: %[[Y:.*]] = nn.matmul
// CHECK: nn.softmax_cross_entropy_loss %[[Y]]
// CHECK-NOT: nn.softmax_cross_entropy_loss
// CHECK: return %[[Y]], %[[FEATURES]]
func.func @two_outputs(%x: tensor<4x16xf32>) -> (tensor<4x10xf32>, tensor<4x16xf32>) {
  %h = nn.relu %x : (tensor<4x16xf32>) -> tensor<4x16xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<16x10xf32>
  %y = nn.matmul %h, %w : (tensor<4x16xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
  return %y, %h : tensor<4x10xf32>, tensor<4x16xf32>
}
