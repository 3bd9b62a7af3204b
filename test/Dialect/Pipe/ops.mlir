// RUN: pipe-opt %s | pipe-opt | FileCheck %s
// RUN: pipe-opt %s --mlir-print-op-generic | pipe-opt | FileCheck %s

// CHECK-LABEL: pipe.pipeline @model
// CHECK-SAME: attributes {microbatches = 8 : i64, num_stages = 2 : i64, plan = {period_ms = 1.250000e+00 : f64}, schedule = "1f1b"}
pipe.pipeline @model attributes {num_stages = 2, microbatches = 8, schedule = "1f1b", plan = {period_ms = 1.25 : f64}} {
  // CHECK: pipe.stage @stage0 attributes {actions = ["F0", "B0"], device = 0 : i64, index = 0 : i64, model_inputs = array<i64: 0>, model_outputs = array<i64>}
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>, actions = ["F0", "B0"]} {
  ^bb0(%x: tensor<4xf32>):
    // CHECK: pipe.param "embed" {length = 16 : i64, offset = 0 : i64, owner = 0 : i64, source = "file", users = array<i64: 0, 1>} : tensor<4xf32>
    %w = pipe.param "embed" {source = "file", offset = 0, length = 16, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // CHECK: pipe.send %{{.*}} {kind = "activation", peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    pipe.send %y {peer = 1, tag = 0, kind = "activation"} : tensor<4xf32>
    // CHECK: pipe.recv {kind = "gradient", peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = "gradient"} : tensor<4xf32>
    // CHECK: pipe.return
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = "activation"} : tensor<4xf32>
    %w = pipe.param "embed" {source = "file", offset = 0, length = 16, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.add %a, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // CHECK: pipe.grad %{{.*}} : tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = "gradient"} : tensor<4xf32>
    // CHECK: pipe.return %{{.*}} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}
