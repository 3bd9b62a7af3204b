// RUN: pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/toy-gpu.json' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/toy-gpu.json profile=%S/Inputs/toy-profile.json' -o /dev/null | FileCheck %s --check-prefix=PROFILE
// RUN: pipe-opt %s --test-print-pipe-cost='target=H100-PCIe' -o /dev/null | FileCheck %s --check-prefix=NAME
// RUN: not pipe-opt %s --test-print-pipe-cost='target=tpu-v4' -o /dev/null 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not pipe-opt %s --test-print-pipe-cost='target=v100 dtype=bf16' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOBF16
// RUN: not pipe-opt %s --test-print-pipe-cost='target=%S/Inputs/bad-gpu.json' -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADFILE

// A user target file: 1 TFLOP/s fp32, 1000 GB/s, no launch overhead, GEMMs at
// 100% of peak (other classes keep the default factors: element-wise reaches
// 80% of the bandwidth).
// mm: 100x100x100 MACs = 2e6 FLOPs -> 2 us; bytes 3 * 40000 = 0.12 us: 2.000 us
// both ways (x is a graph input: only dW).
// relu on 1e6 elements: 1e6 FLOPs at the fp32 rate = 1 us; 8e6 bytes at
// 800 GB/s = 10 us: memory-bound, 10.000 us. Backward: dy, y, dx = 12e6 bytes
// -> 15 us (2e6 FLOPs = 2 us).
// CHECK-LABEL: cost @toy target=toy
// CHECK: op 'mm' nn.matmul {{.*}} fwd_us=2.000 bwd_us=2.000
// CHECK: op 'relu' nn.relu {{.*}} fwd_us=10.000 bwd_us=15.000
// A measured profile replaces the times of the nodes it names.
// PROFILE: op 'mm' nn.matmul {{.*}} fwd_us=500.000 bwd_us=1250.000 profiled
// PROFILE: op 'relu' nn.relu {{.*}} fwd_us=10.000 bwd_us=15.000 family=elementwise{{$}}
// Built-in names ignore case and dashes.
// NAME: cost @toy target=h100-pcie
// UNKNOWN: error: unknown target 'tpu-v4' (known targets: v100-32gb, a100-40gb, a100-80gb, h100-sxm, h100-pcie, h200, l4, l40s, rtx4090, v100-pytorch; or a JSON target file)
// NOBF16: error: cost model: target 'v100-32gb' has no bf16 rate for gemm kernels
// BADFILE: error: target file '{{.*}}bad-gpu.json': unknown field 'clock_mhz'
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
