// RUN: pipe-opt %s -pipe-split-stages -split-input-file -verify-diagnostics | FileCheck %s
// RUN: pipe-opt %s -pipe-split-stages -split-input-file -verify-diagnostics | pipe-opt -split-input-file | FileCheck %s

// Three stages; %h crosses 0 -> 1, and the skip connection %x0 goes straight
// from stage 0 to stage 2 (not through stage 1). Gradients mirror each
// activation transfer with the same tag. The tied weight %w is used by
// stages 0 and 2: owned by 0, referenced in both.
// CHECK-LABEL: pipe.pipeline @main
// CHECK-SAME: microbatches = 4 : i64, num_stages = 3 : i64, plan = {{.*}}, schedule = "1f1b"
// CHECK: pipe.stage @stage0
// CHECK-SAME: model_inputs = array<i64: 0>, model_outputs = array<i64>
// CHECK: ^bb0(%[[X:.*]]: tensor<2x8xf32>):
// CHECK: %[[W0:.*]] = pipe.param "w" {{{.*}}owner = 0 : i64{{.*}}users = array<i64: 0, 2>} : tensor<8x8xf32>
// CHECK: %[[X0:.*]] = nn.matmul %[[X]], %[[W0]]
// CHECK-NEXT: pipe.send %[[X0]] {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = 0 : i64}
// CHECK-NEXT: pipe.send %[[X0]] {kind = #pipe.transfer_kind<activation>, peer = 2 : i64, tag = 2 : i64}
// CHECK: pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 2 : i64, tag = 2 : i64}
// CHECK: pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 0 : i64}
// CHECK: pipe.return
// CHECK: pipe.stage @stage1
// CHECK: %[[A:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0 : i64, tag = 0 : i64} : tensor<2x8xf32>
// CHECK: %[[H:.*]] = nn.relu %[[A]]
// CHECK: pipe.send %[[H]] {kind = #pipe.transfer_kind<activation>, peer = 2 : i64, tag = 1 : i64}
// CHECK: pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 2 : i64, tag = 1 : i64}
// CHECK: %[[G:.*]] = pipe.grad %[[A]]
// CHECK: pipe.send %[[G]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 0 : i64}
// CHECK: pipe.stage @stage2
// CHECK-SAME: model_inputs = array<i64>, model_outputs = array<i64: 0>
// Receives come first, ordered by peer and then by the peer's send order.
// CHECK: %[[SKIP:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0 : i64, tag = 2 : i64}
// CHECK: %[[H2:.*]] = pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = 1 : i64}
// CHECK: %[[S:.*]] = nn.add %[[H2]], %[[SKIP]]
// CHECK: %[[W2:.*]] = pipe.param "w" {{{.*}}owner = 0 : i64{{.*}}users = array<i64: 0, 2>}
// CHECK: %[[Y:.*]] = nn.matmul %[[S]], %[[W2]]
// CHECK: %[[G2:.*]] = pipe.grad %[[SKIP]]
// CHECK: pipe.send %[[G2]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 2 : i64}
// CHECK: %[[G1:.*]] = pipe.grad %[[H2]]
// CHECK: pipe.send %[[G1]] {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 1 : i64}
// CHECK: pipe.return %[[Y]] : tensor<2x8xf32>
module attributes {pipe.plan = #pipe.plan<stages = 3, microbatches = 4>} {
  func.func @main(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
    %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
    %x0 = nn.matmul %x, %w {pipe.stage = 0 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    %h = nn.relu %x0 {pipe.stage = 1 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
    %s = nn.add %h, %x0 {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
    %y = nn.matmul %s, %w {pipe.stage = 2 : i64} : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
    return %y : tensor<2x8xf32>
  }
}

// -----

// Constants are cloned into each stage that uses them; a value used twice by
// one stage crosses once.
// CHECK-LABEL: pipe.pipeline @consts
// CHECK: pipe.stage @stage0
// CHECK: nn.constant dense<[2, 4]>
// CHECK: pipe.stage @stage1
// CHECK: pipe.recv {kind = #pipe.transfer_kind<activation>
// CHECK: nn.constant dense<[2, 4]>
// CHECK-NOT: pipe.recv {kind = #pipe.transfer_kind<activation>
// CHECK: pipe.return
func.func @consts(%x: tensor<8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %s = nn.constant dense<[2, 4]> : tensor<2xi64>
  %a = nn.reshape %x, %s {pipe.stage = 0 : i64} : (tensor<8xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %r = nn.relu %x {pipe.stage = 0 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %b = nn.reshape %r, %s {pipe.stage = 1 : i64} : (tensor<8xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %c = nn.add %b, %b {pipe.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %d = nn.relu %r {pipe.stage = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %e = nn.reshape %d, %s {pipe.stage = 1 : i64} : (tensor<8xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %f = nn.add %c, %e {pipe.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %a, %f : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Stage 1 uses %b before %a, but stage 0 produces %a first: the receives
// follow the sends' order, so a transport matching in issue order pairs them.
// The boolean mask crosses forward but sends no gradient back.
// CHECK-LABEL: pipe.pipeline @order
// CHECK: pipe.stage @stage0
// CHECK: nn.relu
// CHECK-NEXT: pipe.send {{.*}} {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = [[TA:[0-9]+]] : i64}
// CHECK: nn.tanh
// CHECK-NEXT: pipe.send {{.*}} {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = [[TB:[0-9]+]] : i64}
// CHECK: nn.equal
// CHECK-NEXT: pipe.send {{.*}} {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = [[TM:[0-9]+]] : i64}
// CHECK-NOT: tag = [[TM]] : i64
// CHECK: pipe.stage @stage1
// CHECK-NEXT: pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0 : i64, tag = [[TA]] : i64}
// CHECK-NEXT: pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0 : i64, tag = [[TB]] : i64}
// CHECK-NEXT: pipe.recv {kind = #pipe.transfer_kind<activation>, peer = 0 : i64, tag = [[TM]] : i64}
// CHECK-NOT: tag = [[TM]] : i64
// CHECK: pipe.return
func.func @order(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = nn.relu %x {pipe.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %b = nn.tanh %x {pipe.stage = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %m = nn.equal %a, %b {pipe.stage = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %c = nn.sigmoid %b {pipe.stage = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %d = nn.add %c, %a {pipe.stage = 1 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %e = nn.where %m, %d, %c {pipe.stage = 1 : i64} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %e : tensor<4xf32>
}

// -----

func.func @unplaced(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'nn.relu' has no pipe.stage attribute; run pipe-partition first}}
  %r = nn.relu %x : (tensor<8xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}
