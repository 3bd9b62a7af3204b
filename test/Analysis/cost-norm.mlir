// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 fuse=0' -o /dev/null | FileCheck %s

// Normalisations, softmax and dropout, fp32. Each input is first scaled by a
// trainable scalar so that it needs a gradient.

// Training batch norm, x 2x4x3x3 (N = 72, C = 4): fwd 6 N = 432 FLOPs in two
// passes over x: bytes x 288 + scale/bias/mean/var 4*16 + y 288 + running
// mean/var 2*16 + x again 288 = 960. bwd 9 N = 648; bytes 2 dy + 2 x + dx =
// 1440. Keeps x (288) and the per-channel mean and inverse std in fp32
// (2 * 4 * 4 = 32): 320.
// CHECK-LABEL: cost @bn_train
// CHECK: op 'bn' nn.batch_norm class=normalization fwd_flops=432 fwd_bytes=960 bwd_flops=648 bwd_weight_flops=0 bwd_bytes=1440 kernels=1/1 saved=320
func.func @bn_train(%x: tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %scale = nn.param "bn.weight" {source = #nn.param_source<inline>} : tensor<4xf32>
  %bias = nn.param "bn.bias" {source = #nn.param_source<inline>} : tensor<4xf32>
  %mean = nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %var = nn.param "bn.running_var" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %xs = nn.mul %x, %s : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32> loc("pre")
  %y, %rm, %rv = nn.batch_norm %xs, %scale, %bias, %mean, %var {training_mode = 1 : i64} : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>) loc("bn")
  return %y : tensor<2x4x3x3xf32>
}

// Batch norm with running statistics (inference form, still trained): fwd
// y = x a + b, 2 N = 144; bytes 288 + 64 + 288 = 640. bwd: dx = dy a (72 FLOPs,
// dy + dx = 576 bytes) and d scale / d bias = sums of dy x-hat and dy (4 N =
// 288, weight part, 576 bytes): 360 FLOPs, 1152 bytes, 2 kernels; keeps x.
// CHECK-LABEL: cost @bn_eval
// CHECK: op 'bn' nn.batch_norm class=normalization fwd_flops=144 fwd_bytes=640 bwd_flops=360 bwd_weight_flops=288 bwd_bytes=1152 kernels=1/2 saved=288
func.func @bn_eval(%x: tensor<2x4x3x3xf32>) -> tensor<2x4x3x3xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %scale = nn.param "bn.weight" {source = #nn.param_source<inline>} : tensor<4xf32>
  %bias = nn.param "bn.bias" {source = #nn.param_source<inline>} : tensor<4xf32>
  %mean = nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %var = nn.param "bn.running_var" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %xs = nn.mul %x, %s : (tensor<2x4x3x3xf32>, tensor<f32>) -> tensor<2x4x3x3xf32> loc("pre")
  %y = nn.batch_norm %xs, %scale, %bias, %mean, %var : (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4x3x3xf32> loc("bn")
  return %y : tensor<2x4x3x3xf32>
}

// Layer norm over the last dim, x 2x3x8 (N = 48, 6 rows), one pass: fwd 6 N =
// 288; bytes x 192 + scale 32 + bias 32 + y 192 = 448. bwd: dx 9 N = 432
// (dy + x + dx = 576 bytes) and the parameter sums 3 N = 144 (weight, dy + x =
// 384 bytes): 576 FLOPs, 960 bytes, 2 kernels. Keeps x (192) and the per-row
// mean and inverse std (2 * 6 * 4 = 48): 240.
// Softmax / log-softmax: fwd 5 N = 240, bytes x + y = 384; bwd 4 N = 192 from y
// and dy, bytes dy + y + dx = 576; keeps y (192).
// CHECK-LABEL: cost @layer_norm_softmax
// CHECK: op 'ln' nn.layer_norm class=normalization fwd_flops=288 fwd_bytes=448 bwd_flops=576 bwd_weight_flops=144 bwd_bytes=960 kernels=1/2 saved=240
// CHECK: op 'softmax' nn.softmax class=normalization fwd_flops=240 fwd_bytes=384 bwd_flops=192 bwd_weight_flops=0 bwd_bytes=576 kernels=1/1 saved=192
// CHECK: op 'log_softmax' nn.log_softmax class=normalization fwd_flops=240 fwd_bytes=384 bwd_flops=192 bwd_weight_flops=0 bwd_bytes=576 kernels=1/1 saved=192
func.func @layer_norm_softmax(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %scale = nn.param "ln.weight" {source = #nn.param_source<inline>} : tensor<8xf32>
  %bias = nn.param "ln.bias" {source = #nn.param_source<inline>} : tensor<8xf32>
  %xs = nn.mul %x, %s : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32> loc("pre")
  %y = nn.layer_norm %xs, %scale, %bias : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32> loc("ln")
  %p = nn.softmax %y : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32> loc("softmax")
  %l = nn.log_softmax %y : (tensor<2x3x8xf32>) -> tensor<2x3x8xf32> loc("log_softmax")
  return %p, %l : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// Dropout in training, x 2x3x8 (N = 48): fwd 2 N = 96 FLOPs, bytes x 192 +
// y 192 + one-byte mask 48 = 432; bwd dy * mask: 48 FLOPs, 432 bytes; keeps
// the mask (48 bytes). With training_mode false it is the identity: free.
// CHECK-LABEL: cost @dropout
// CHECK: op 'drop' nn.dropout class=elementwise fwd_flops=96 fwd_bytes=432 bwd_flops=48 bwd_weight_flops=0 bwd_bytes=432 kernels=1/1 saved=48
// CHECK: op 'drop_off' nn.dropout class=free{{$}}
func.func @dropout(%x: tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %ratio = nn.constant dense<1.000000e-01> : tensor<f32>
  %on = nn.constant dense<true> : tensor<i1>
  %off = nn.constant dense<false> : tensor<i1>
  %xs = nn.mul %x, %s : (tensor<2x3x8xf32>, tensor<f32>) -> tensor<2x3x8xf32> loc("pre")
  %y, %mask = nn.dropout %xs, %ratio, %on : (tensor<2x3x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x3x8xf32>, tensor<2x3x8xi1>) loc("drop")
  %z = nn.dropout %xs, %ratio, %off : (tensor<2x3x8xf32>, tensor<f32>, tensor<i1>) -> tensor<2x3x8xf32> loc("drop_off")
  return %y, %z : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
