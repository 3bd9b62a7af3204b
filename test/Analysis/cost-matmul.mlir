// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 dtype=fp32' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 dtype=bf16' -o /dev/null | FileCheck %s --check-prefix=BF16
// RUN: pipe-opt %s --test-print-pipe-cost='target=v100 dtype=fp16' -o /dev/null | FileCheck %s --check-prefix=V100

// MatMul: MACs = N(y) * K (K = the lhs's last dim), forward 2 * MACs; each
// operand that needs a gradient costs another 2 * MACs and keeps the other
// operand. Gemm: MACs = m * n * k, + N(y) for C.

// Linear layer x @ transpose(w): the transpose of a parameter is free (the
// GEMM reads the weight transposed). N(y) = 4*8*32 = 1024, K = 16,
// MACs = 16384: fwd 32768 FLOPs; bytes x 2048 + w^T 2048 + y 4096 = 8192.
// bwd: x is a graph input, only dW = 32768 (weight); bytes dy 4096 + x 2048 +
// dW 2048 = 8192; keeps x (2048).
// CHECK-LABEL: cost @linear
// CHECK: op 'wt' nn.transpose class=free static
// CHECK-NEXT: op 'fc' nn.matmul class=gemm fwd_flops=32768 fwd_bytes=8192 bwd_flops=32768 bwd_weight_flops=32768 bwd_bytes=8192 kernels=1/1 saved=2048
func.func @linear(%x: tensor<4x8x16xf32>) -> tensor<4x8x32xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<32x16xf32>
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : (tensor<32x16xf32>) -> tensor<16x32xf32> loc("wt")
  %y = nn.matmul %x, %wt : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32> loc("fc")
  return %y : tensor<4x8x32xf32>
}

// Batched attention scores q @ k over (batch 2, heads 4): q 2x4x8x16,
// k 2x4x16x8 -> 2x4x8x8. N(y) = 512, K = 16, MACs = 8192: fwd 16384;
// bytes q 4096 + k 4096 + y 2048 = 10240. Both operands need gradients
// (scaled by trainable scalars): bwd 2 * 16384 = 32768, no weight part,
// 2 kernels; bytes 2 * (dy 2048 + other 4096 + d 4096) = 20480; keeps q and k.
// The scalings: N = 1024, fwd 1024 FLOPs, bytes 4096 + 4 + 4096 = 8196; the
// scalar's gradient is dy * x summed over the broadcast: 1024 + 1024 FLOPs,
// bytes dy 4096 + s 4 + x 4096 = 8196; keeps x.
// CHECK-LABEL: cost @attention
// CHECK: op 'scale_q' nn.mul class=elementwise fwd_flops=1024 fwd_bytes=8196 bwd_flops=2048 bwd_weight_flops=2048 bwd_bytes=8196 kernels=1/1 saved=4096
// CHECK: op 'scores' nn.matmul class=gemm fwd_flops=16384 fwd_bytes=10240 bwd_flops=32768 bwd_weight_flops=0 bwd_bytes=20480 kernels=1/2 saved=8192
// CHECK: total fwd_flops=18432 fwd_gemm_flops=16384 bwd_flops=36864
// CHECK-SAME: saved=16384
func.func @attention(%qin: tensor<2x4x8x16xf32>, %kin: tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> {
  %sq = nn.param "sq" {source = #nn.param_source<inline>} : tensor<f32>
  %sk = nn.param "sk" {source = #nn.param_source<inline>} : tensor<f32>
  %q = nn.mul %qin, %sq : (tensor<2x4x8x16xf32>, tensor<f32>) -> tensor<2x4x8x16xf32> loc("scale_q")
  %k = nn.mul %kin, %sk : (tensor<2x4x16x8xf32>, tensor<f32>) -> tensor<2x4x16x8xf32> loc("scale_k")
  %s = nn.matmul %q, %k : (tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) -> tensor<2x4x8x8xf32> loc("scores")
  return %s : tensor<2x4x8x8xf32>
}

// Gemm x (8x16) * w^T (transB, w 32x16) + b (32): MACs = 8*32*16 = 4096,
// fwd 8192 + 256 = 8448; bytes x 512 + w 2048 + b 128 + y 1024 = 3712.
// bwd: dW 8192 + db 256 (in the dW kernel) = 8448, all weight; bytes dy 1024 +
// x 512 + dW 2048 = 3584; keeps x (512).
// CHECK-LABEL: cost @gemm
// CHECK: op 'gemm' nn.gemm class=gemm fwd_flops=8448 fwd_bytes=3712 bwd_flops=8448 bwd_weight_flops=8448 bwd_bytes=3584 kernels=1/1 saved=512
func.func @gemm(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<32x16xf32>
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<32xf32>
  %y = nn.gemm %x, %w, %b {transB = 1 : i64} : (tensor<8x16xf32>, tensor<32x16xf32>, tensor<32xf32>) -> tensor<8x32xf32> loc("gemm")
  return %y : tensor<8x32xf32>
}

// Roofline time of a large GEMM (4096^3 MACs = 137438953472 FLOPs):
// compute-bound. H100 SXM fp32 (CUDA cores) 67 TFLOP/s * 0.7 gemm efficiency:
// 2930.468 us + 4 us launch = 2934.468 us; memory would be 3 * 64 MiB at
// 3.35 TB/s * 0.8 = 75.1 us. bf16: 989.5 TFLOP/s dense * 0.7 -> 198.425 + 4.
// V100 fp16 tensor cores 125 TFLOP/s * 0.7 -> 1570.731 + 4 = 1574.731 us.
// CHECK-LABEL: cost @big
// CHECK: op 'big' nn.matmul {{.*}} fwd_us=2934.468 bwd_us=2934.468
// BF16-LABEL: cost @big
// BF16: op 'big' nn.matmul {{.*}} fwd_us=202.425 bwd_us=202.425
// V100-LABEL: cost @big
// V100: op 'big' nn.matmul {{.*}} fwd_us=1574.731 bwd_us=1574.731
func.func @big(%x: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4096x4096xf32>
  %y = nn.matmul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32> loc("big")
  return %y : tensor<4096x4096xf32>
}
