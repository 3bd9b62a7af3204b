// RUN: pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/calibrated-gpu.json' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/calibrated-gpu.json dtype=tf32' -o /dev/null | FileCheck %s --check-prefix=OTHERDTYPE
// RUN: pipe-opt %s --test-print-pipe-cost='target=v100-pytorch' -o /dev/null | FileCheck %s --check-prefix=BUILTIN
// RUN: not pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/bad-calibration.json' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADLENGTH
// RUN: not pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/bad-calibration-family.json' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADFAMILY

// Fitted kernel models (docs/cost-model.md, "Calibration") replace the
// roofline for the families they cover, at the dtype they were fitted for.
// mm (2e6 FLOPs at 1 TFLOP/s): forward 1 us overhead + 2e6 / 1e12 = 3 us;
// backward (dW only) efficiency exp(ln m) with m = 100 clamped to the fitted
// range [1, 4]: 2e6 / 4e12 = 0.5 us.
// relu (1e6 elements, not fused: the calibration says the measured kernels
// were not): 2 us + 8e6 bytes / (1000 GB/s x 0.5) = 16 us + 1e6 FLOPs /
// (1 TFLOP/s x 1) = 1 us: 19 us. Its backward has no fitted model: the
// roofline's 15 us.
// CHECK-LABEL: cost @toy target=toy-calibrated
// CHECK: op 'mm' nn.matmul {{.*}} fwd_us=3.000 bwd_us=0.500 family=gemm gemm=1x100x100x100x1
// CHECK: op 'relu' nn.relu {{.*}} fwd_us=19.000 bwd_us=15.000 family=elementwise{{$}}
// At another dtype the roofline applies: mm at 2 TFLOP/s (tf32) = 1 us, relu
// 8e6 bytes at 800 GB/s = 10 us.
// OTHERDTYPE: op 'mm' nn.matmul {{.*}} fwd_us=1.000 bwd_us=1.000
// OTHERDTYPE: op 'relu' nn.relu {{.*}} fwd_us=10.000 bwd_us=15.000
// The built-in calibrated V100 (data/calibration/v100-pytorch.json) parses and
// times the convolution by its family.
// BUILTIN: cost @conv target=v100-pytorch
// BUILTIN: op 'c3' nn.conv {{.*}} family=conv_3x3s1 gemm=1x1024x16x72x1
// BUILTIN: op 'c1' nn.conv {{.*}} family=conv_1x1 gemm=1x256x16x16x4
// A dense layer over a batch of rows (a rhs of rank 2) is one GEMM over all
// of them; a batched product of two batched operands keeps its batch.
// BUILTIN: cost @sequence target=v100-pytorch
// BUILTIN: op 'dense' nn.matmul {{.*}} family=gemm gemm=1x384x64x32x1
// BUILTIN: op 'scores' nn.matmul {{.*}} family=gemm gemm=6x64x64x64x1
// BADLENGTH: error: target file '{{.*}}bad-calibration.json': calibration: 'gemm.forward.log_efficiency' must be an array of 8 numbers
// BADFAMILY: error: target file '{{.*}}bad-calibration-family.json': calibration: unknown kernel family 'winograd' (known: gemm, conv_1x1, conv_3x3s1, conv_other, elementwise, normalization, reduction, pooling, data_movement)
func.func @toy(%x: tensor<100x100xf32>, %big: tensor<1000x1000xf32>) -> (tensor<100x100xf32>, tensor<1000x1000xf32>) {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<100x100xf32>
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %y = nn.matmul %x, %w : (tensor<100x100xf32>, tensor<100x100xf32>) -> tensor<100x100xf32> loc("mm")
  %b = nn.mul %big, %s : (tensor<1000x1000xf32>, tensor<f32>) -> tensor<1000x1000xf32> loc("pre")
  %r = nn.relu %b : (tensor<1000x1000xf32>) -> tensor<1000x1000xf32> loc("relu")
  %u = nn.neg %b : (tensor<1000x1000xf32>) -> tensor<1000x1000xf32> loc("other_use")
  %z = nn.add %r, %u : (tensor<1000x1000xf32>, tensor<1000x1000xf32>) -> tensor<1000x1000xf32> loc("sum")
  return %y, %z : tensor<100x100xf32>, tensor<1000x1000xf32>
}

func.func @conv(%x: tensor<4x8x16x16xf32>) -> tensor<4x16x8x8xf32> {
  %w3 = nn.param "w3" {source = #nn.param_source<inline>} : tensor<16x8x3x3xf32>
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<16x16x1x1xf32>
  %y = nn.conv %x, %w3 {pads = array<i64: 1, 1, 1, 1>} : (tensor<4x8x16x16xf32>, tensor<16x8x3x3xf32>) -> tensor<4x16x16x16xf32> loc("c3")
  %z = nn.conv %y, %w1 {strides = array<i64: 2, 2>} : (tensor<4x16x16x16xf32>, tensor<16x16x1x1xf32>) -> tensor<4x16x8x8xf32> loc("c1")
  return %z : tensor<4x16x8x8xf32>
}

func.func @sequence(%x: tensor<6x64x32xf32>, %k: tensor<6x64x64xf32>) -> (tensor<6x64x64xf32>, tensor<6x64x64xf32>) {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<32x64xf32>
  %y = nn.matmul %x, %w : (tensor<6x64x32xf32>, tensor<32x64xf32>) -> tensor<6x64x64xf32> loc("dense")
  %s = nn.matmul %y, %k : (tensor<6x64x64xf32>, tensor<6x64x64xf32>) -> tensor<6x64x64xf32> loc("scores")
  return %y, %s : tensor<6x64x64xf32>, tensor<6x64x64xf32>
}
