// RUN: pipe-opt %s --pass-pipeline='builtin.module(pipe-split-stages,pipe-differentiate{optimizer=sgd lr=0.1})' | FileCheck %s

// Stages the plan marks in recompute_stages keep only what they receive and
// their sources (labels); the backward computes the rest again from them.
// Stage 0 does not recompute and keeps the input its matmul's gradient reads.
// CHECK: pipe.stage @stage0
// CHECK-NOT: recompute
// CHECK: pipe.return saved(%arg0 : tensor<2x8xf32>)
// Stage 1 keeps the value it receives; its backward runs relu and tanh again.
// CHECK: pipe.stage @stage1 attributes {{{.*}}recompute}
// CHECK: %[[R1:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0
// CHECK: pipe.return saved(%[[R1]] : tensor<2x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[K1:[^:]+]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[DT:.*]] = pipe.recv {kind = #pipe.transfer_kind<gradient>
// CHECK-NEXT: %[[H:.*]] = nn.relu %[[K1]]
// CHECK-NEXT: %[[T:.*]] = nn.tanh %[[H]]
// CHECK-NEXT: %[[DH:.*]] = nn.unary_grad %[[T]], %[[DT]] {function = #nn.unary_function<tanh>}
// CHECK-NEXT: nn.unary_grad %[[H]], %[[DH]] {function = #nn.unary_function<relu>}
// Stage 2 keeps its two received values and the labels; the add, the matmul
// and the loss run again before their gradients.
// CHECK: pipe.stage @stage2 attributes {{{.*}}recompute}
// CHECK: %[[A:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0
// CHECK: %[[B:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 1
// CHECK: %[[L:.*]] = pipe.label 0
// CHECK: saved(%[[B]], %[[A]], %[[L]] : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2xi64>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[KB:[^:]+]]: tensor<2x8xf32>, %[[KA:[^:]+]]: tensor<2x8xf32>, %[[KL:[^:]+]]: tensor<2xi64>):
// CHECK: %[[S:.*]] = nn.add %[[KB]], %[[KA]]
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[Y:.*]] = nn.matmul %[[S]], %[[W]]
// CHECK-NEXT: %{{.*}}, %[[LOGP:.*]] = nn.softmax_cross_entropy_loss %[[Y]], %[[KL]]
// CHECK-NEXT: nn.softmax_cross_entropy_loss_grad %{{.*}}, %[[LOGP]], %[[KL]]
module attributes {pipe.plan = #pipe.plan<stages = 3, microbatches = 4, recompute_stages = [1, 2]>} {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %x0 = nn.matmul %x, %w {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %h = nn.relu %x0 {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %t = nn.tanh %h {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %s = nn.add %t, %x0 {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = nn.matmul %s, %w {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %labels = pipe.label 0 {range = 8 : i64, pipe.stage = 2 : i64} : tensor<2xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    pipe.loss %loss {pipe.stage = 2 : i64} : tensor<f32>
    return %y : tensor<2x8xf32>
  }
}
