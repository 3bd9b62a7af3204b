// RUN: pipe-opt %s -pipe-attach-loss=loss=output | FileCheck %s

// loss=output: the model computes its own loss (a float scalar output 0, as
// an ONNX SoftmaxCrossEntropyLoss gives); pipe.loss takes it as it is, with
// no label, and it is still returned.
// CHECK-LABEL: func @own_loss
// CHECK-NOT: pipe.label
// CHECK: %[[LOSS:.*]], %{{.*}} = nn.softmax_cross_entropy_loss %arg0, %arg1
// CHECK-NEXT: pipe.loss %[[LOSS]] : tensor<f32>
// CHECK-NEXT: return %[[LOSS]] : tensor<f32>
func.func @own_loss(%x: tensor<4x10xf32>, %t: tensor<4xi64>) -> tensor<f32> {
  %loss, %lp = nn.softmax_cross_entropy_loss %x, %t : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return %loss : tensor<f32>
}
