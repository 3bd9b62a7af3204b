// RUN: pipe-opt %s -split-input-file -verify-diagnostics \
// RUN:   -pass-pipeline='builtin.module(func.func(nn-shape-inference))' | FileCheck %s

// Unranked results are refined in program order; shape arithmetic folds on
// the way, so the Reshape target is known when the Reshape is visited.
// CHECK-LABEL: func @transformer_reshape
// CHECK-SAME: -> tensor<2x8x8x16xf32>
// CHECK: %[[W:.*]] = nn.param "w" {{.*}} : tensor<32x128xf32>
// CHECK: %[[M:.*]] = nn.matmul %arg0, %[[W]] : (tensor<2x8x32xf32>, tensor<32x128xf32>) -> tensor<2x8x128xf32>
// CHECK: %[[C:.*]] = nn.constant dense<[2, 8, 8, 16]> : tensor<4xi64>
// CHECK: %[[R:.*]] = nn.reshape %[[M]], %[[C]] {{.*}}-> tensor<2x8x8x16xf32>
// CHECK: %[[T:.*]] = nn.transpose %[[R]] {{.*}}-> tensor<2x8x8x16xf32>
// CHECK-NOT: nn.shape
// CHECK-NOT: nn.concat
func.func @transformer_reshape(%x: tensor<2x8x32xf32>) -> tensor<*xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<32x128xf32>
  %m = nn.matmul %x, %w : (tensor<2x8x32xf32>, tensor<32x128xf32>) -> tensor<*xf32>
  %s = nn.shape %m : (tensor<*xf32>) -> tensor<?xi64>
  %i = nn.constant dense<[0, 1]> : tensor<2xi64>
  %bt = nn.gather %s, %i : (tensor<?xi64>, tensor<2xi64>) -> tensor<*xi64>
  %heads = nn.constant dense<[8, 16]> : tensor<2xi64>
  %c = nn.concat %bt, %heads {axis = 0 : i64} : (tensor<*xi64>, tensor<2xi64>) -> tensor<*xi64>
  %r = nn.reshape %m, %c : (tensor<*xf32>, tensor<*xi64>) -> tensor<*xf32>
  %t = nn.transpose %r {perm = array<i64: 0, 2, 1, 3>} : (tensor<*xf32>) -> tensor<*xf32>
  return %t : tensor<*xf32>
}

// -----

// CHECK-LABEL: func @cnn_block
// CHECK-SAME: -> tensor<4x10xf32>
// CHECK: nn.conv {{.*}} -> tensor<4x16x112x112xf32>
// CHECK: nn.batch_norm {{.*}} -> (tensor<4x16x112x112xf32>, tensor<16xf32>, tensor<16xf32>)
// CHECK: nn.max_pool {{.*}} -> tensor<4x16x56x56xf32>
// CHECK: nn.global_average_pool {{.*}} -> tensor<4x16x1x1xf32>
// CHECK: nn.flatten {{.*}} -> tensor<4x16xf32>
// CHECK: nn.gemm {{.*}} -> tensor<4x10xf32>
func.func @cnn_block(%x: tensor<4x3x224x224xf32>) -> tensor<*xf32> {
  %w = nn.param "conv.weight" {source = #nn.param_source<inline>} : tensor<16x3x7x7xf32>
  %c = nn.conv %x, %w {pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<4x3x224x224xf32>, tensor<16x3x7x7xf32>) -> tensor<*xf32>
  %g = nn.param "bn.weight" {source = #nn.param_source<inline>} : tensor<16xf32>
  %b:3 = nn.batch_norm %c, %g, %g, %g, %g {training_mode = 1 : i64} : (tensor<*xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %r = nn.relu %b#0 : (tensor<*xf32>) -> tensor<*xf32>
  %p = nn.max_pool %r {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<*xf32>) -> tensor<*xf32>
  %a = nn.global_average_pool %p : (tensor<*xf32>) -> tensor<*xf32>
  %f = nn.flatten %a : (tensor<*xf32>) -> tensor<*xf32>
  %fc = nn.param "fc.weight" {source = #nn.param_source<inline>} : tensor<10x16xf32>
  %y = nn.gemm %f, %fc {transB = 1 : i64} : (tensor<*xf32>, tensor<10x16xf32>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// -----

// The ceil_mode window keeps a last, partial window (Inception's pools).
// CHECK-LABEL: func @ceil_mode
// CHECK: nn.max_pool {{.*}} -> tensor<1x8x74x74xf32>
// CHECK: nn.average_pool {{.*}} -> tensor<1x8x73x73xf32>
func.func @ceil_mode(%x: tensor<1x8x148x148xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = nn.max_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64} : (tensor<1x8x148x148xf32>) -> tensor<*xf32>
  %1 = nn.average_pool %x {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x8x148x148xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// -----

// A shape operand that is not a compile-time constant leaves the shape
// unknown: an error naming the op and the operand.
func.func @data_dependent(%x: tensor<6xf32>, %s: tensor<2xi64>) -> tensor<*xf32> {
  // expected-error @+1 {{could not infer a static shape for result #0 of 'nn.reshape': operand #1 is an integer tensor that is not a compile-time constant}}
  %r = nn.reshape %x, %s : (tensor<6xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %r : tensor<*xf32>
}

// -----

// Slice with extreme steps does not overflow: a step past the end takes one
// element, both ways.
// CHECK-LABEL: func @slice_extremes
// CHECK: nn.slice {{.*}} -> tensor<2x1xf32>
// CHECK: nn.slice {{.*}} -> tensor<2x1xf32>
func.func @slice_extremes(%x: tensor<2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %zero = nn.constant dense<[0]> : tensor<1xi64>
  %end = nn.constant dense<[3]> : tensor<1xi64>
  %axis = nn.constant dense<[1]> : tensor<1xi64>
  %big = nn.constant dense<[9223372036854775807]> : tensor<1xi64>
  %neg = nn.constant dense<[-9223372036854775808]> : tensor<1xi64>
  %last = nn.constant dense<[-1]> : tensor<1xi64>
  %0 = nn.slice %x, %zero, %end, %axis, %big : (tensor<2x3xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %1 = nn.slice %x, %last, %neg, %axis, %neg : (tensor<2x3xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}
