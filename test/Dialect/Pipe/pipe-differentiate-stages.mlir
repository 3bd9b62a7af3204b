// RUN: pipe-opt %s -split-input-file --pass-pipeline='builtin.module(pipe-split-stages,pipe-differentiate{optimizer=sgd lr=0.1})' | FileCheck %s
// RUN: pipe-opt %s -split-input-file --pass-pipeline='builtin.module(pipe-split-stages,pipe-differentiate,test-check-saved-values)' -o /dev/null | FileCheck %s --check-prefix=SAVED

// Differentiation across stages, on functions placed by hand (the loss
// written as pipe-attach-loss writes it) and split by pipe-split-stages.

// Three stages, four micro-batches (pipe-split-stages.mlir's example with a
// loss): %x0 goes to stage 1 and, as a skip connection, straight to stage 2;
// the weight %w is tied between stages 0 and 2.
// The loss is scaled by 1/4 in the forward; the backward seeds it with 1
// through the same product. Stage 2 sends dS to both producers, stage 1 sends
// the relu's gradient back, and stage 0 sums the two gradients of %x0 with
// nn.add. Each user stage of the tied weight accumulates its own gradient.
// CHECK-LABEL: pipe.pipeline @main
// CHECK-SAME: training = #pipe.training<loss = cross_entropy, optimizer = sgd, lr = 0.1, momentum = 0.9, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>
// CHECK: pipe.stage @stage0
// CHECK: ^bb0(%[[X:[^:]+]]: tensor<2x8xf32>):
// CHECK: pipe.return saved(%[[X]] : tensor<2x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SX:[^:]+]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[FROM2:.*]] = pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 2 : i64, tag = 2 : i64} : tensor<2x8xf32>
// CHECK-NEXT: %[[FROM1:.*]] = pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 0 : i64} : tensor<2x8xf32>
// CHECK-NEXT: %[[DX0:.*]] = nn.add %[[FROM2]], %[[FROM1]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[DW0:.*]] = nn.gemm %[[SX]], %[[DX0]] {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[W0:.*]] = pipe.param "w" {{{.*}}owner = 0 : i64{{.*}}users = array<i64: 0, 2>}
// CHECK-NEXT: pipe.accumulate_grad %[[DW0]] into %[[W0]] : tensor<8x8xf32>
// CHECK-NEXT: pipe.return
// CHECK: pipe.stage @stage1
// CHECK: %[[H:.*]] = nn.relu
// CHECK: pipe.return saved(%[[H]] : tensor<2x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SH:[^:]+]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[DH:.*]] = pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 2 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[DA:.*]] = nn.unary_grad %[[SH]], %[[DH]] {function = #nn.unary_function<relu>}
// CHECK-NEXT: pipe.send %[[DA]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: pipe.return
// CHECK: pipe.stage @stage2
// Labels are cloned into the stage that uses them, like constants.
// CHECK: %[[S:.*]] = nn.add
// CHECK: %[[Y:.*]] = nn.matmul %[[S]]
// CHECK: %[[LABELS:.*]] = pipe.label 0 {range = 8 : i64} : tensor<2xi64>
// CHECK: %[[LOSS:.*]], %[[LOGP:.*]] = nn.softmax_cross_entropy_loss %[[Y]], %[[LABELS]]
// CHECK-NEXT: %[[QUARTER:.*]] = nn.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[SCALED:.*]] = nn.mul %[[LOSS]], %[[QUARTER]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: pipe.loss %[[SCALED]] : tensor<f32>
// CHECK-NEXT: pipe.return %[[Y]] : tensor<2x8xf32> saved(%[[LOGP]], %[[LABELS]], %[[S]] : tensor<2x8xf32>, tensor<2xi64>, tensor<2x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SLOGP:[^:]+]]: tensor<2x8xf32>, %[[SLABELS:[^:]+]]: tensor<2xi64>, %[[SS:[^:]+]]: tensor<2x8xf32>):
// CHECK-NEXT: %[[ONE:.*]] = nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[Q:.*]] = nn.constant dense<2.500000e-01> : tensor<f32>
// CHECK-NEXT: %[[SEED:.*]] = nn.mul %[[ONE]], %[[Q]]
// CHECK-NEXT: %[[DY:.*]] = nn.softmax_cross_entropy_loss_grad %[[SEED]], %[[SLOGP]], %[[SLABELS]] : (tensor<f32>, tensor<2x8xf32>, tensor<2xi64>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[DW2:.*]] = nn.gemm %[[SS]], %[[DY]] {transA = 1 : i64}
// CHECK-NEXT: %[[W2:.*]] = pipe.param "w" {{{.*}}owner = 0 : i64{{.*}}users = array<i64: 0, 2>}
// CHECK-NEXT: %[[DS:.*]] = nn.gemm %[[DY]], %[[W2]] {transB = 1 : i64}
// CHECK-NEXT: pipe.accumulate_grad %[[DW2]] into %[[W2]] : tensor<8x8xf32>
// CHECK-NEXT: pipe.send %[[DS]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 2 : i64}
// CHECK-NEXT: pipe.send %[[DS]] {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 1 : i64}
// CHECK-NEXT: pipe.return
// SAVED: stage 0: keeps 1 values, 64 bytes; memory model 64 bytes: equal
// SAVED-NEXT: stage 1: keeps 1 values, 64 bytes; memory model 64 bytes: equal
// SAVED-NEXT: stage 2: keeps 3 values, 144 bytes; memory model 144 bytes: equal
module attributes {pipe.plan = #pipe.plan<stages = 3, microbatches = 4>} {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %x0 = nn.matmul %x, %w {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %h = nn.relu %x0 {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %s = nn.add %h, %x0 {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = nn.matmul %s, %w {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %labels = pipe.label 0 {range = 8 : i64, pipe.stage = 2 : i64} : tensor<2xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    pipe.loss %loss {pipe.stage = 2 : i64} : tensor<f32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// Language-model logits [B, T, V] viewed as [B*T, V] for the loss: the
// gradient comes back through the reshape to [B, T, V]; the flattened labels
// are kept. Two stages, one micro-batch: the loss scale is 1.
// CHECK-LABEL: pipe.pipeline @tokens
// CHECK: pipe.stage @stage1
// CHECK: %[[LABELS:.*]] = pipe.label 0 {range = 16 : i64} : tensor<2x4xi64>
// CHECK: %[[FLAT:.*]] = nn.reshape %[[LABELS]], %{{.*}} : (tensor<2x4xi64>, tensor<1xi64>) -> tensor<8xi64>
// CHECK: nn.constant dense<1.000000e+00> : tensor<f32>
// CHECK: saved(%{{.*}}, %[[FLAT]], %{{.*}} : tensor<8x16xf32>, tensor<8xi64>, tensor<2x4x8xf32>)
// CHECK: } backward {
// CHECK: %[[DLOGITS:.*]] = nn.softmax_cross_entropy_loss_grad {{.*}} -> tensor<8x16xf32>
// CHECK-NEXT: %[[SHAPE:.*]] = nn.constant dense<[2, 4, 16]> : tensor<3xi64>
// CHECK-NEXT: nn.reshape %[[DLOGITS]], %[[SHAPE]] : (tensor<8x16xf32>, tensor<3xi64>) -> tensor<2x4x16xf32>
// SAVED: stage 0: keeps 0 values, 0 bytes; memory model 0 bytes: equal
// SAVED-NEXT: stage 1: keeps 3 values, 832 bytes; memory model 832 bytes: equal
module attributes {pipe.plan = #pipe.plan<stages = 2, microbatches = 1>} {
  func.func @tokens(%x: tensor<2x4x8xf32>) -> tensor<2x4x16xf32> {
    %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x16xf32>
    %h = nn.add %x, %b {pipe.stage = 0 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %y = nn.matmul %h, %w {pipe.stage = 1 : i64} : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %labels = pipe.label 0 {range = 16 : i64, pipe.stage = 1 : i64} : tensor<2x4xi64>
    %rows = nn.constant dense<[8, 16]> : tensor<2xi64>
    %logits = nn.reshape %y, %rows {pipe.stage = 1 : i64} : (tensor<2x4x16xf32>, tensor<2xi64>) -> tensor<8x16xf32>
    %flat = nn.constant dense<8> : tensor<1xi64>
    %flat_labels = nn.reshape %labels, %flat {pipe.stage = 1 : i64} : (tensor<2x4xi64>, tensor<1xi64>) -> tensor<8xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %logits, %flat_labels {pipe.stage = 1 : i64} : (tensor<8x16xf32>, tensor<8xi64>) -> (tensor<f32>, tensor<8x16xf32>)
    pipe.loss %loss {pipe.stage = 1 : i64} : tensor<f32>
    return %y : tensor<2x4x16xf32>
  }
}

// -----

// An activation whose gradient cannot reach the loss (floor has no
// derivative) sends no gradient back, and its producer has nothing to
// differentiate: an empty backward, no accumulation for %w.
// CHECK-LABEL: pipe.pipeline @no_gradient_back
// CHECK: pipe.stage @stage0
// CHECK-NOT: kind = #pipe.transfer_kind<gradient>
// CHECK: pipe.return{{$}}
// CHECK-NEXT: } backward {
// CHECK-NEXT: pipe.return
// CHECK-NEXT: }
// CHECK: pipe.stage @stage1
// CHECK-NOT: kind = #pipe.transfer_kind<gradient>
// CHECK: pipe.accumulate_grad
// CHECK-NOT: kind = #pipe.transfer_kind<gradient>
// CHECK: pipe.return
// SAVED: stage 0: keeps 0 values, 0 bytes; memory model 0 bytes: equal
// SAVED-NEXT: stage 1: keeps 3 values, 144 bytes; memory model 144 bytes: equal
module attributes {pipe.plan = #pipe.plan<stages = 2, microbatches = 3>} {
  func.func @no_gradient_back(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %h = nn.matmul %x, %w {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %f = nn.floor %h {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %v = nn.param "v" {source = #nn.param_source<inline>} : tensor<8xf32>
    %y = nn.mul %f, %v {pipe.stage = 1 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
    %labels = pipe.label 0 {range = 8 : i64, pipe.stage = 1 : i64} : tensor<2xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels {pipe.stage = 1 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    pipe.loss %loss {pipe.stage = 1 : i64} : tensor<f32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// The gradient of a received activation goes back as soon as it is complete:
// right after the rule of its first reader (%b's relu for %a, tag 1), not at
// the end of the backward, so that the stage does not hold it while the rest
// of its backward runs (%p's relu, which gives %z's gradient, tag 0).
// CHECK-LABEL: pipe.pipeline @early_send
// CHECK: pipe.stage @stage1
// CHECK: } backward {
// CHECK: %[[DS:.*]] = nn.gemm %{{.*}}, %{{.*}} {transB = 1 : i64}
// CHECK-NEXT: pipe.accumulate_grad
// CHECK-NEXT: %[[DA:.*]] = nn.unary_grad %{{.*}}, %[[DS]] {function = #nn.unary_function<relu>}
// CHECK-NEXT: pipe.send %[[DA]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 1 : i64}
// CHECK-NEXT: %[[DZ:.*]] = nn.unary_grad %{{.*}}, %[[DS]] {function = #nn.unary_function<relu>}
// CHECK-NEXT: pipe.send %[[DZ]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 0 : i64}
// CHECK-NEXT: pipe.return
module attributes {pipe.plan = #pipe.plan<stages = 2, microbatches = 2>} {
  func.func @early_send(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %v = nn.param "v" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %u = nn.param "u" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %a = nn.matmul %x, %w {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %z = nn.matmul %x, %v {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %p = nn.relu %z {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %b = nn.relu %a {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %s = nn.add %p, %b {pipe.stage = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = nn.matmul %s, %u {pipe.stage = 1 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %labels = pipe.label 0 {range = 8 : i64, pipe.stage = 1 : i64} : tensor<2xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels {pipe.stage = 1 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>)
    pipe.loss %loss {pipe.stage = 1 : i64} : tensor<f32>
    return %y : tensor<2x8xf32>
  }
}
