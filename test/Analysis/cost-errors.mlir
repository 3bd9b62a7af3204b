// RUN: not pipe-opt %s --test-print-pipe-cost -o /dev/null 2>&1 | FileCheck %s
// RUN: not pipe-opt %s --test-print-pipe-cost='dtype=fp64' -o /dev/null 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not pipe-opt %s --test-print-pipe-cost='profile=%S/Inputs/bad-profile.json' -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROFILE
// RUN: not pipe-opt %s --test-print-pipe-memory='optimizer=lamb' -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTIMIZER

// The cost model needs static shapes: the error names the op (by its ONNX
// node name when imported) and says how to get them.
// CHECK: error: loc("relu"): cost model: value of type 'tensor<?x4xf32>' has no static shape (import with --micro-batch-size)
// DTYPE: error: unknown dtype 'fp64' (fp32, tf32, fp16, bf16, fp8)
// PROFILE: error: profile '{{.*}}bad-profile.json': profile entry 'mm' needs non-negative numbers 'forward_ms' and 'backward_ms'
// OPTIMIZER: error: unknown optimizer 'lamb' (sgd, momentum, adam, adamw)
func.func @dynamic(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = nn.relu %x : (tensor<?x4xf32>) -> tensor<?x4xf32> loc("relu")
  return %y : tensor<?x4xf32>
}
