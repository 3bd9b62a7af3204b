// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 dtype=fp32' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 dtype=bf16' -o /dev/null | FileCheck %s --check-prefix=BF16

// Convolution: MACs = N(y) * (C / group) * prod(kernel); a multiply-add is 2
// FLOPs; the bias adds N(y). Backward: input gradient and weight gradient are
// 2 * MACs each; a graph input gets no gradient. fp32: 4 bytes per element.

// N(y) = 2*4*8*8 = 512; MACs = 512 * 3 * 3*3 = 13824.
// fwd = 2 * 13824 + 512 = 28160 FLOPs; bytes = x 384*4 + w 108*4 + b 4*4 + y 512*4
//     = 1536 + 432 + 16 + 2048 = 4032.
// bwd: x is a graph input, so only dW (27648) + db (512, in the dW kernel) = 28160,
//     all weight gradient; bytes dy 2048 + x 1536 + dW 432 = 4016; one kernel.
// saved: dW needs x (1536 bytes); w is a parameter (resident, not counted).
// CHECK-LABEL: cost @conv_bias
// CHECK: op 'conv0' nn.conv class=conv fwd_flops=28160 fwd_bytes=4032 bwd_flops=28160 bwd_weight_flops=28160 bwd_bytes=4016 kernels=1/1 saved=1536
// CHECK: total fwd_flops=28160 fwd_gemm_flops=28160 bwd_flops=28160
// CHECK-SAME: saved=1536
// CHECK-SAME: params=112 buffers=0
// BF16-LABEL: cost @conv_bias
// BF16: op 'conv0' nn.conv class=conv fwd_flops=28160 fwd_bytes=2016 bwd_flops=28160 bwd_weight_flops=28160 bwd_bytes=2008 kernels=1/1 saved=768
func.func @conv_bias(%x: tensor<2x3x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4x3x3x3xf32>
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<4xf32>
  %y = nn.conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32> loc("conv0")
  return %y : tensor<2x4x8x8xf32>
}

// Two convolutions. conv1 (1x1, 4->4 channels, 6x6): N(y1) = 144, MACs = 144*4 = 576,
//   fwd 1152; bwd dW only: 1152; bytes dy 576 + x 576 + dW 64 = 1216; saves x (576).
// conv2 (3x3, group 2, stride 2, pad 1, 4->6): out 3x3, N(y2) = 54,
//   MACs = 54 * (4/2) * 9 = 972, fwd 1944; fwd bytes y1 576 + w 432 + y2 216 = 1224.
//   y1 needs a gradient (it depends on w1): bwd dX 1944 + dW 1944 = 3888 (weight
//   1944), two kernels; bytes (dy 216 + w 432 + dx 576) + (dy 216 + y1 576 + dW 432)
//   = 2448; saves y1 (576) for dW and w (a parameter) for dX.
// CHECK-LABEL: cost @conv_chain
// CHECK: op 'conv1' nn.conv class=conv fwd_flops=1152 fwd_bytes=1216 bwd_flops=1152 bwd_weight_flops=1152 bwd_bytes=1216 kernels=1/1 saved=576
// CHECK: op 'conv2' nn.conv class=conv fwd_flops=1944 fwd_bytes=1224 bwd_flops=3888 bwd_weight_flops=1944 bwd_bytes=2448 kernels=1/2 saved=576
// CHECK: total fwd_flops=3096 fwd_gemm_flops=3096 bwd_flops=5040
// CHECK-SAME: saved=1152
func.func @conv_chain(%x: tensor<1x4x6x6xf32>) -> tensor<1x6x3x3xf32> {
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<4x4x1x1xf32>
  %w2 = nn.param "w2" {source = #nn.param_source<inline>} : tensor<6x2x3x3xf32>
  %y1 = nn.conv %x, %w1 : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32> loc("conv1")
  %y2 = nn.conv %y1, %w2 {group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x3x3xf32> loc("conv2")
  return %y2 : tensor<1x6x3x3xf32>
}

// A frozen weight on a graph input: nothing needs a gradient, so no backward
// and nothing saved; the frozen weight is a buffer.
// CHECK-LABEL: cost @conv_frozen
// CHECK: op 'frozen' nn.conv class=conv fwd_flops=1152 fwd_bytes=1216 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=0 kernels=1/0 saved=0
// CHECK: params=0 buffers=16
func.func @conv_frozen(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32> {
  %w = nn.param "wf" {source = #nn.param_source<inline>, trainable = false} : tensor<4x4x1x1xf32>
  %y = nn.conv %x, %w : (tensor<1x4x6x6xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x6x6xf32> loc("frozen")
  return %y : tensor<1x4x6x6xf32>
}
