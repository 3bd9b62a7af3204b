// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-partition='stages=2 microbatches=4 target=h100 algo=balanced' | FileCheck %s

// Four equal matmul layers on two GPUs: the balanced split is 2 | 2, every op
// gets its stage, and the plan is recorded on the module.
// The plan is a typed #pipe.plan; fields at their defaults (the 1f1b schedule,
// the iteration objective) are not printed.
// CHECK: module attributes {pipe.plan = #pipe.plan<algorithm = "balanced", stages = 2, gpus = 2, microbatches = 4,
// CHECK-SAME: target = "h100-sxm"
// CHECK-SAME: gpu_of_stage = [0, 1]
// CHECK-SAME: stage_metrics = [#pipe.stage_metrics<time_ms = {{.*}}, memory_bytes = {{[0-9]+}}, memory_limit_bytes = 85899345920>, #pipe.stage_metrics<
// CHECK-SAME: actions = {{\[}}[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<forward, mb = 1, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>,
// CHECK: nn.matmul {{.*}} {pipe.stage = 0 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 0 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 1 : i64}
// CHECK-NEXT: nn.matmul {{.*}} {pipe.stage = 1 : i64}
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %w0 = nn.param "w0" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w0")
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w1")
  %w2 = nn.param "w2" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w2")
  %w3 = nn.param "w3" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w3")
  %0 = nn.matmul %x, %w0 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc0")
  %1 = nn.matmul %0, %w1 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc1")
  %2 = nn.matmul %1, %w2 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc2")
  %3 = nn.matmul %2, %w3 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc3")
  return %3 : tensor<256x1024xf32>
}
