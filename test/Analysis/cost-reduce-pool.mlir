// RUN: pipe-opt %s --test-print-pipe-cost='target=h100' -o /dev/null | FileCheck %s

// Pooling and reductions, fp32, on x 2x3x4x4 (N = 96, 384 bytes) that needs a
// gradient.

// max_pool 2x2 stride 2 -> 2x3x2x2 (N = 24, 96 bytes): fwd 4 comparisons per
// output = 96 FLOPs; bytes x 384 + y 96 + argmax (i64) 192 = 672. bwd: a
// scatter of dy into a zeroed dx, 24 FLOPs, dy 96 + argmax 192 + dx 384 = 672.
// Keeps the argmax only (192 bytes).
// average_pool 2x2: fwd 24 * 4 adds + 24 divides = 120, 480 bytes; bwd spreads
// dy over the windows: 96 FLOPs, 480 bytes; keeps nothing.
// global_average_pool -> 2x3x1x1 (6 outputs): fwd 96 + 6 = 102, 384 + 24 = 408
// bytes; bwd 96, 408 bytes. global_max_pool: fwd 96 comparisons, bytes 384 + 24
// + argmax 48 = 456; bwd 6, 456 bytes; keeps the argmax (48).
// CHECK-LABEL: cost @pool
// CHECK: op 'maxpool' nn.max_pool class=pooling fwd_flops=96 fwd_bytes=672 bwd_flops=24 bwd_weight_flops=0 bwd_bytes=672 kernels=1/1 saved=192
// CHECK: op 'avgpool' nn.average_pool class=pooling fwd_flops=120 fwd_bytes=480 bwd_flops=96 bwd_weight_flops=0 bwd_bytes=480 kernels=1/1 saved=0
// CHECK: op 'gap' nn.global_average_pool class=pooling fwd_flops=102 fwd_bytes=408 bwd_flops=96 bwd_weight_flops=0 bwd_bytes=408 kernels=1/1 saved=0
// CHECK: op 'gmp' nn.global_max_pool class=pooling fwd_flops=96 fwd_bytes=456 bwd_flops=6 bwd_weight_flops=0 bwd_bytes=456 kernels=1/1 saved=48
func.func @pool(%x_in: tensor<2x3x4x4xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x1x1xf32>, tensor<2x3x1x1xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %x = nn.mul %x_in, %s : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32> loc("pre")
  %0 = nn.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32> loc("maxpool")
  %1 = nn.average_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32> loc("avgpool")
  %2 = nn.global_average_pool %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32> loc("gap")
  %3 = nn.global_max_pool %x : (tensor<2x3x4x4xf32>) -> tensor<2x3x1x1xf32> loc("gmp")
  return %0, %1, %2, %3 : tensor<2x3x2x2xf32>, tensor<2x3x2x2xf32>, tensor<2x3x1x1xf32>, tensor<2x3x1x1xf32>
}

// Reductions over the last axis -> 2x3x4x1 (N = 24, 96 bytes): one FLOP per
// input element (mean: + a divide per output); bytes x + y = 480.
// sum: dy broadcast back, 0 FLOPs, 480 bytes, keeps nothing. mean: scaled
// broadcast, 96 FLOPs. max: dx = dy where x == y: 96 FLOPs, reads dy, x, y and
// writes dx (960 bytes), keeps x and y (480). prod: dx = dy * y / x, 192.
// CHECK-LABEL: cost @reduce
// CHECK: op 'sum' nn.reduce_sum class=reduction fwd_flops=96 fwd_bytes=480 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=480 kernels=1/1 saved=0
// CHECK: op 'mean' nn.reduce_mean class=reduction fwd_flops=120 fwd_bytes=480 bwd_flops=96 bwd_weight_flops=0 bwd_bytes=480 kernels=1/1 saved=0
// CHECK: op 'max' nn.reduce_max class=reduction fwd_flops=96 fwd_bytes=480 bwd_flops=96 bwd_weight_flops=0 bwd_bytes=960 kernels=1/1 saved=480
// CHECK: op 'prod' nn.reduce_prod class=reduction fwd_flops=96 fwd_bytes=480 bwd_flops=192 bwd_weight_flops=0 bwd_bytes=960 kernels=1/1 saved=480
func.func @reduce(%x_in: tensor<2x3x4x4xf32>) -> (tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %axes = nn.constant dense<[3]> : tensor<1xi64>
  %x = nn.mul %x_in, %s : (tensor<2x3x4x4xf32>, tensor<f32>) -> tensor<2x3x4x4xf32> loc("pre")
  %0 = nn.reduce_sum %x, %axes : (tensor<2x3x4x4xf32>, tensor<1xi64>) -> tensor<2x3x4x1xf32> loc("sum")
  %1 = nn.reduce_mean %x, %axes : (tensor<2x3x4x4xf32>, tensor<1xi64>) -> tensor<2x3x4x1xf32> loc("mean")
  %2 = nn.reduce_max %x, %axes : (tensor<2x3x4x4xf32>, tensor<1xi64>) -> tensor<2x3x4x1xf32> loc("max")
  %3 = nn.reduce_prod %x, %axes : (tensor<2x3x4x4xf32>, tensor<1xi64>) -> tensor<2x3x4x1xf32> loc("prod")
  return %0, %1, %2, %3 : tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>, tensor<2x3x4x1xf32>
}
