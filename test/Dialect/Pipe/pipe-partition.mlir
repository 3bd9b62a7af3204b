// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-partition='stages=2 microbatches=4 target=h100 algo=balanced' | FileCheck %s

// Four equal matmul layers on two GPUs: the balanced split is 2 | 2, every op
// gets its stage, and the plan is recorded on the module.
// CHECK: module attributes {pipe.plan = {actions = {{\[}}["F0@s0",
// CHECK-SAME: algorithm = "balanced"
// CHECK-SAME: gpu_of_stage = array<i64: 0, 1>
// CHECK-SAME: microbatches = 4 : i64
// CHECK-SAME: schedule = "1f1b"
// CHECK-SAME: stage_metrics = [{memory_bytes = {{.*}}, memory_limit_bytes = {{.*}}, time_ms = {{.*}}}, {memory_bytes
// CHECK-SAME: stages = 2 : i64
// CHECK-SAME: target = "h100-sxm"
// CHECK: nn.matmul {{.*}} {pipe.stage = 0 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 0 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 1 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 1 : i64}
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %w0 = nn.param "w0" {source = "inline"} : tensor<1024x1024xf32> loc("w0")
  %w1 = nn.param "w1" {source = "inline"} : tensor<1024x1024xf32> loc("w1")
  %w2 = nn.param "w2" {source = "inline"} : tensor<1024x1024xf32> loc("w2")
  %w3 = nn.param "w3" {source = "inline"} : tensor<1024x1024xf32> loc("w3")
  %0 = nn.matmul %x, %w0 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc0")
  %1 = nn.matmul %0, %w1 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc1")
  %2 = nn.matmul %1, %w2 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc2")
  %3 = nn.matmul %2, %w3 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc3")
  return %3 : tensor<256x1024xf32>
}
