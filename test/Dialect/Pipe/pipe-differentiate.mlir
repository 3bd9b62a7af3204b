// RUN: pipe-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(pipe-partition{stages=1 microbatches=2 algo=uniform},pipe-split-stages,pipe-differentiate{loss=none})' | FileCheck %s
// Each stage keeps exactly what the memory model charges:
// RUN: pipe-opt %s -split-input-file -verify-diagnostics --pass-pipeline='builtin.module(pipe-partition{stages=1 microbatches=2 algo=uniform},pipe-split-stages,pipe-differentiate{loss=none},test-check-saved-values)' -o /dev/null | FileCheck %s --check-prefix=SAVED
// A model without a loss differentiated for one is an error naming the loss:
// RUN: not pipe-opt %s -split-input-file --pass-pipeline='builtin.module(pipe-partition{stages=1 microbatches=2 algo=uniform},pipe-split-stages,pipe-differentiate)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NO-LOSS
// NO-LOSS: error: 'pipe.pipeline' op carries no loss (run pipe-attach-loss before partitioning) but loss=cross-entropy

// The gradient rule of each op class, one function each, on one stage with
// loss=none: the gradient of each model output is pipe.output_grad, and only
// the parameters (and what depends on them) need gradients, so each function
// starts with a parameter-dependent op. A value of the forward that the
// backward reads is a `saved` operand of the forward's pipe.return and a
// block argument of the backward; a parameter is re-read in the backward.

// Unary element-wise: relu keeps its output, gelu its input; the two
// gradients of %h are summed.
// CHECK-LABEL: pipe.pipeline @unary
// CHECK: %[[H:.*]] = nn.add
// CHECK: %[[R:.*]] = nn.relu %[[H]]
// CHECK: %[[G:.*]] = nn.gelu %[[H]]
// CHECK: pipe.return %[[R]], %[[G]] : tensor<4x8xf32>, tensor<4x8xf32> saved(%[[H]], %[[R]] : tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: } backward {
// CHECK-NEXT: ^bb0(%[[SH:[^:]+]]: tensor<4x8xf32>, %[[SR:[^:]+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DR:.*]] = pipe.output_grad 0 : tensor<4x8xf32>
// CHECK-NEXT: %[[DG:.*]] = pipe.output_grad 1 : tensor<4x8xf32>
// CHECK-NEXT: %[[DH1:.*]] = nn.unary_grad %[[SH]], %[[DG]] {function = #nn.unary_function<gelu>}
// CHECK-NEXT: %[[DH2:.*]] = nn.unary_grad %[[SR]], %[[DR]] {function = #nn.unary_function<relu>}
// CHECK-NEXT: %[[DH:.*]] = nn.add %[[DH1]], %[[DH2]]
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: pipe.accumulate_grad %[[DH]] into %[[W]] : tensor<4x8xf32>
// CHECK-NEXT: pipe.return
// SAVED: stage 0: keeps 2 values, 256 bytes; memory model 256 bytes: equal
func.func @unary(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4x8xf32>
  %h = nn.add %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %g = nn.gelu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %r, %g : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The functions' parameters travel in alpha and beta: leaky_relu's slope,
// clip's constant bounds, hard_sigmoid's alpha and beta; gelu's tanh form is
// its own function; tanh keeps its output.
// CHECK-LABEL: pipe.pipeline @unary_parameters
// CHECK: %[[H:.*]] = nn.add
// CHECK: %[[LEAKY:.*]] = nn.leaky_relu %[[H]]
// CHECK: %[[CLIP:.*]] = nn.clip %[[LEAKY]]
// CHECK: %[[HARD:.*]] = nn.hard_sigmoid %[[CLIP]]
// CHECK: %[[GELU:.*]] = nn.gelu %[[HARD]]
// CHECK: %[[TANH:.*]] = nn.tanh %[[GELU]]
// CHECK: saved(%[[TANH]], %[[HARD]], %[[CLIP]], %[[LEAKY]], %[[H]] :
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[STANH:[^:]+]]: tensor<4x8xf32>, %[[SHARD:[^:]+]]: tensor<4x8xf32>, %[[SCLIP:[^:]+]]: tensor<4x8xf32>, %[[SLEAKY:[^:]+]]: tensor<4x8xf32>, %[[SH:[^:]+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[D1:.*]] = nn.unary_grad %[[STANH]], %[[DY]] {function = #nn.unary_function<tanh>}
// CHECK-NEXT: %[[D2:.*]] = nn.unary_grad %[[SHARD]], %[[D1]] {function = #nn.unary_function<gelu_tanh>}
// CHECK-NEXT: %[[D3:.*]] = nn.unary_grad %[[SCLIP]], %[[D2]] {alpha = 5.000000e-01 : f64, beta = 2.500000e-01 : f64, function = #nn.unary_function<hard_sigmoid>}
// CHECK-NEXT: %[[D4:.*]] = nn.unary_grad %[[SLEAKY]], %[[D3]] {alpha = -1.000000e+00 : f64, beta = 6.000000e+00 : f64, function = #nn.unary_function<clip>}
// CHECK-NEXT: %[[D5:.*]] = nn.unary_grad %[[SH]], %[[D4]] {alpha = 2.500000e-01 : f64, function = #nn.unary_function<leaky_relu>}
// CHECK: pipe.accumulate_grad %[[D5]] into
// SAVED: stage 0: keeps 5 values, 640 bytes; memory model 640 bytes: equal
func.func @unary_parameters(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4x8xf32>
  %h = nn.add %x, %w : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %0 = nn.leaky_relu %h {alpha = 0.25 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %lo = nn.constant dense<-1.0> : tensor<f32>
  %hi = nn.constant dense<6.0> : tensor<f32>
  %1 = nn.clip %0, %lo, %hi : (tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> tensor<4x8xf32>
  %2 = nn.hard_sigmoid %1 {alpha = 0.5 : f32, beta = 0.25 : f32} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %3 = nn.gelu %2 {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = nn.tanh %3 : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// -----

// Broadcasting add, mul, sub and div: a broadcast operand's gradient is
// summed over the dims it was broadcast along (reduce_sum keeping them) and
// reshaped to its shape. Mul keeps the other operand (not a parameter: the
// parameter is re-read); div keeps its lhs for the rhs's gradient
// -dy * lhs / rhs^2.
// CHECK-LABEL: pipe.pipeline @broadcast
// CHECK: %[[A:.*]] = nn.add %{{.*}}, %[[ROW:.*]] : (tensor<2x3x4xf32>, tensor<4xf32>)
// CHECK: %[[M:.*]] = nn.mul %[[A]], %[[COL:.*]] : (tensor<2x3x4xf32>, tensor<3x1xf32>)
// CHECK: %[[S:.*]] = nn.sub %[[M]], %[[ROW]]
// CHECK: nn.div %[[S]], %[[COL]]
// CHECK: saved(%[[S]], %[[A]] : tensor<2x3x4xf32>, tensor<2x3x4xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SS:[^:]+]]: tensor<2x3x4xf32>, %[[SA:[^:]+]]: tensor<2x3x4xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// div: d lhs = dy / col; d col = -(d lhs * s) / col, summed over dims 0 and 2.
// CHECK-NEXT: %[[BCOL:.*]] = pipe.param "col"
// CHECK-NEXT: %[[DS:.*]] = nn.div %[[DY]], %[[BCOL]]
// CHECK-NEXT: %[[T1:.*]] = nn.mul %[[DS]], %[[SS]]
// CHECK-NEXT: %[[T2:.*]] = nn.div %[[T1]], %[[BCOL]]
// CHECK-NEXT: %[[T3:.*]] = nn.neg %[[T2]]
// CHECK-NEXT: %[[AXES_COL:.*]] = nn.constant dense<[0, 2]> : tensor<2xi64>
// CHECK-NEXT: %[[SUM_COL:.*]] = nn.reduce_sum %[[T3]], %[[AXES_COL]] : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<1x3x1xf32>
// CHECK-NEXT: %[[SHAPE_COL:.*]] = nn.constant dense<[3, 1]> : tensor<2xi64>
// CHECK-NEXT: %[[DCOL_DIV:.*]] = nn.reshape %[[SUM_COL]], %[[SHAPE_COL]] : (tensor<1x3x1xf32>, tensor<2xi64>) -> tensor<3x1xf32>
// Each part of a parameter's gradient is accumulated after the rule that made it.
// CHECK-NEXT: pipe.accumulate_grad %[[DCOL_DIV]] into %[[BCOL]] : tensor<3x1xf32>
// sub: d rhs = -(dy summed to [4]).
// CHECK-NEXT: %[[AXES_ROW:.*]] = nn.constant dense<[0, 1]> : tensor<2xi64>
// CHECK-NEXT: %[[SUM_ROW:.*]] = nn.reduce_sum %[[DS]], %[[AXES_ROW]] : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<1x1x4xf32>
// CHECK-NEXT: %[[SHAPE_ROW:.*]] = nn.constant dense<4> : tensor<1xi64>
// CHECK-NEXT: %[[ROW_SUM:.*]] = nn.reshape %[[SUM_ROW]], %[[SHAPE_ROW]] : (tensor<1x1x4xf32>, tensor<1xi64>) -> tensor<4xf32>
// CHECK-NEXT: %[[DROW_SUB:.*]] = nn.neg %[[ROW_SUM]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[BROW:.*]] = pipe.param "row"
// CHECK-NEXT: pipe.accumulate_grad %[[DROW_SUB]] into %[[BROW]] : tensor<4xf32>
// mul: d lhs = dy * col, d col = dy * a (summed).
// CHECK-NEXT: %[[DA:.*]] = nn.mul %[[DS]], %[[BCOL]]
// CHECK-NEXT: %[[DCOL_FULL:.*]] = nn.mul %[[DS]], %[[SA]]
// CHECK: %[[DCOL_MUL:.*]] = nn.reshape {{.*}} -> tensor<3x1xf32>
// CHECK-NEXT: pipe.accumulate_grad %[[DCOL_MUL]] into %[[BCOL]] : tensor<3x1xf32>
// add: d row = da summed to [4].
// CHECK: nn.reduce_sum %[[DA]]
// CHECK: %[[DROW_ADD:.*]] = nn.reshape {{.*}} -> tensor<4xf32>
// CHECK-NEXT: pipe.accumulate_grad %[[DROW_ADD]] into %[[BROW]] : tensor<4xf32>
// SAVED: stage 0: keeps 2 values, 192 bytes; memory model 192 bytes: equal
func.func @broadcast(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %row = nn.param "row" {source = #nn.param_source<inline>} : tensor<4xf32>
  %col = nn.param "col" {source = #nn.param_source<inline>} : tensor<3x1xf32>
  %0 = nn.add %x, %row : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %1 = nn.mul %0, %col : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %2 = nn.sub %1, %row : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %3 = nn.div %2, %col : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  return %3 : tensor<2x3x4xf32>
}

// -----

// MatMul of [2, 5, 8] activations with a 2-D [8, 4] weight: the leading dims
// are flattened and the two gradients are GEMMs, dW = x^T dy and
// dx = dy W^T. Only x is kept.
// CHECK-LABEL: pipe.pipeline @matmul_weight
// CHECK: %[[H:.*]] = nn.add
// CHECK: nn.matmul %[[H]], %{{.*}} : (tensor<2x5x8xf32>, tensor<8x4xf32>) -> tensor<2x5x4xf32>
// CHECK: saved(%[[H]] : tensor<2x5x8xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SH:[^:]+]]: tensor<2x5x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[S1:.*]] = nn.constant dense<[10, 4]>
// CHECK-NEXT: %[[DY2:.*]] = nn.reshape %[[DY]], %[[S1]] : (tensor<2x5x4xf32>, tensor<2xi64>) -> tensor<10x4xf32>
// CHECK-NEXT: %[[S2:.*]] = nn.constant dense<[10, 8]>
// CHECK-NEXT: %[[X2:.*]] = nn.reshape %[[SH]], %[[S2]] : (tensor<2x5x8xf32>, tensor<2xi64>) -> tensor<10x8xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.gemm %[[X2]], %[[DY2]] {transA = 1 : i64} : (tensor<10x8xf32>, tensor<10x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[DX2:.*]] = nn.gemm %[[DY2]], %[[W]] {transB = 1 : i64} : (tensor<10x4xf32>, tensor<8x4xf32>) -> tensor<10x8xf32>
// CHECK-NEXT: %[[S3:.*]] = nn.constant dense<[2, 5, 8]>
// CHECK-NEXT: nn.reshape %[[DX2]], %[[S3]] : (tensor<10x8xf32>, tensor<3xi64>) -> tensor<2x5x8xf32>
// CHECK: pipe.accumulate_grad %[[DW]] into %[[W]] : tensor<8x4xf32>
// SAVED: stage 0: keeps 1 values, 320 bytes; memory model 320 bytes: equal
func.func @matmul_weight(%x: tensor<2x5x8xf32>) -> tensor<2x5x4xf32> {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x4xf32>
  %h = nn.add %x, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = nn.matmul %h, %w : (tensor<2x5x8xf32>, tensor<8x4xf32>) -> tensor<2x5x4xf32>
  return %y : tensor<2x5x4xf32>
}

// -----

// Batched MatMul (attention scores): dA = dy B^T and dB = A^T dy with the
// last two dims transposed; each keeps the other operand.
// CHECK-LABEL: pipe.pipeline @matmul_batched
// CHECK: %[[A:.*]] = nn.add %{{.*}} : (tensor<2x4x5x8xf32>, tensor<8xf32>)
// CHECK: %[[B:.*]] = nn.add %{{.*}} : (tensor<2x4x8x5xf32>, tensor<5xf32>)
// CHECK: nn.matmul %[[A]], %[[B]]
// CHECK: saved(%[[B]], %[[A]] : tensor<2x4x8x5xf32>, tensor<2x4x5x8xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SB:[^:]+]]: tensor<2x4x8x5xf32>, %[[SA:[^:]+]]: tensor<2x4x5x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0 : tensor<2x4x5x5xf32>
// CHECK-NEXT: %[[BT:.*]] = nn.transpose %[[SB]] {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x8x5xf32>) -> tensor<2x4x5x8xf32>
// CHECK-NEXT: %[[DA:.*]] = nn.matmul %[[DY]], %[[BT]] : (tensor<2x4x5x5xf32>, tensor<2x4x5x8xf32>) -> tensor<2x4x5x8xf32>
// CHECK-NEXT: %[[AT:.*]] = nn.transpose %[[SA]] {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x4x5x8xf32>) -> tensor<2x4x8x5xf32>
// CHECK-NEXT: %[[DB:.*]] = nn.matmul %[[AT]], %[[DY]] : (tensor<2x4x8x5xf32>, tensor<2x4x5x5xf32>) -> tensor<2x4x8x5xf32>
// CHECK: nn.reduce_sum %[[DB]]
// CHECK: nn.reduce_sum %[[DA]]
// SAVED: stage 0: keeps 2 values, 2560 bytes; memory model 2560 bytes: equal
func.func @matmul_batched(%q: tensor<2x4x5x8xf32>, %k: tensor<2x4x8x5xf32>) -> tensor<2x4x5x5xf32> {
  %bq = nn.param "bq" {source = #nn.param_source<inline>} : tensor<8xf32>
  %bk = nn.param "bk" {source = #nn.param_source<inline>} : tensor<5xf32>
  %a = nn.add %q, %bq : (tensor<2x4x5x8xf32>, tensor<8xf32>) -> tensor<2x4x5x8xf32>
  %b = nn.add %k, %bk : (tensor<2x4x8x5xf32>, tensor<5xf32>) -> tensor<2x4x8x5xf32>
  %y = nn.matmul %a, %b : (tensor<2x4x5x8xf32>, tensor<2x4x8x5xf32>) -> tensor<2x4x5x5xf32>
  return %y : tensor<2x4x5x5xf32>
}

// -----

// Gemm y = 2 A^T B^T + 0.5 C: dA = 2 B^T dy^T (gemm(B, dy) both
// transposed), dB = 2 dy^T A^T, dC = 0.5 * dy summed over the rows.
// CHECK-LABEL: pipe.pipeline @gemm
// CHECK: %[[A:.*]] = nn.mul
// CHECK: nn.gemm %[[A]], %{{.*}}, %{{.*}} {alpha = 2.000000e+00 : f32, beta = 5.000000e-01 : f32, transA = 1 : i64, transB = 1 : i64}
// CHECK: saved(%[[A]], %[[X:.*]] : tensor<8x4xf32>, tensor<8x4xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SA:[^:]+]]: tensor<8x4xf32>, %[[SX:[^:]+]]: tensor<8x4xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0 : tensor<4x6xf32>
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[DA:.*]] = nn.gemm %[[W]], %[[DY]] {alpha = 2.000000e+00 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<6x8xf32>, tensor<4x6xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.gemm %[[DY]], %[[SA]] {alpha = 2.000000e+00 : f32, transA = 1 : i64, transB = 1 : i64} : (tensor<4x6xf32>, tensor<8x4xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[ROWS:.*]] = nn.constant dense<0> : tensor<1xi64>
// CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[DY]], %[[ROWS]] : (tensor<4x6xf32>, tensor<1xi64>) -> tensor<1x6xf32>
// CHECK-NEXT: %[[SHAPE:.*]] = nn.constant dense<6> : tensor<1xi64>
// CHECK-NEXT: %[[DC1:.*]] = nn.reshape %[[SUM]], %[[SHAPE]]
// CHECK-NEXT: %[[BETA:.*]] = nn.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DC:.*]] = nn.mul %[[DC1]], %[[BETA]] : (tensor<6xf32>, tensor<f32>) -> tensor<6xf32>
// Each parameter gradient is accumulated once its op's rule has run.
// CHECK-NEXT: pipe.accumulate_grad %[[DW]] into %[[W]] : tensor<6x8xf32>
// CHECK-NEXT: %[[C:.*]] = pipe.param "c"
// CHECK-NEXT: pipe.accumulate_grad %[[DC]] into %[[C]] : tensor<6xf32>
// CHECK-NEXT: %[[DS:.*]] = nn.mul %[[DA]], %[[SX]]
// CHECK-NEXT: %[[S:.*]] = pipe.param "s"
// CHECK-NEXT: pipe.accumulate_grad %[[DS]] into %[[S]] : tensor<8x4xf32>
// SAVED: stage 0: keeps 2 values, 256 bytes; memory model 256 bytes: equal
func.func @gemm(%x: tensor<8x4xf32>) -> tensor<4x6xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<8x4xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<6x8xf32>
  %c = nn.param "c" {source = #nn.param_source<inline>} : tensor<6xf32>
  %a = nn.mul %x, %s : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %y = nn.gemm %a, %w, %c {transA = 1 : i64, transB = 1 : i64, alpha = 2.0 : f32, beta = 0.5 : f32} : (tensor<8x4xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  return %y : tensor<4x6xf32>
}

// -----

// Conv with stride 2, pads 1, two groups and a bias: conv_grad_input and
// conv_grad_weight with the explicit geometry, the bias gradient a sum of dy
// over every dim but the channels.
// CHECK-LABEL: pipe.pipeline @conv
// CHECK: %[[A:.*]] = nn.mul
// CHECK: nn.conv %[[A]]
// CHECK: saved(%[[A]], %{{.*}} : tensor<2x4x9x9xf32>, tensor<2x4x9x9xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SA:[^:]+]]: tensor<2x4x9x9xf32>, %[[SX:[^:]+]]: tensor<2x4x9x9xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0 : tensor<2x6x5x5xf32>
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[DA:.*]] = nn.conv_grad_input %[[DY]], %[[W]] {dilations = array<i64: 1, 1>, group = 2 : i64, input_shape = array<i64: 2, 4, 9, 9>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x6x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x9x9xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.conv_grad_weight %[[SA]], %[[DY]] {dilations = array<i64: 1, 1>, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, weight_shape = array<i64: 6, 2, 3, 3>} : (tensor<2x4x9x9xf32>, tensor<2x6x5x5xf32>) -> tensor<6x2x3x3xf32>
// CHECK-NEXT: %[[AXES:.*]] = nn.constant dense<[0, 2, 3]> : tensor<3xi64>
// CHECK-NEXT: %[[DB:.*]] = nn.reduce_sum %[[DY]], %[[AXES]] {keepdims = 0 : i64} : (tensor<2x6x5x5xf32>, tensor<3xi64>) -> tensor<6xf32>
// CHECK-NEXT: pipe.accumulate_grad %[[DW]] into %[[W]] : tensor<6x2x3x3xf32>
// CHECK-NEXT: %[[B:.*]] = pipe.param "b"
// CHECK-NEXT: pipe.accumulate_grad %[[DB]] into %[[B]] : tensor<6xf32>
// CHECK-NEXT: nn.mul %[[DA]], %[[SX]]
// SAVED: stage 0: keeps 2 values, 5184 bytes; memory model 5184 bytes: equal
func.func @conv(%x: tensor<2x4x9x9xf32>) -> tensor<2x6x5x5xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<4x1x1xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<6x2x3x3xf32>
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<6xf32>
  %a = nn.mul %x, %s : (tensor<2x4x9x9xf32>, tensor<4x1x1xf32>) -> tensor<2x4x9x9xf32>
  %y = nn.conv %a, %w, %b {group = 2 : i64, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x5x5xf32>
  return %y : tensor<2x6x5x5xf32>
}

// -----

// Max pooling: the training form returns the argmax indices, which are kept
// (not the input) and scattered into by max_pool_grad.
// CHECK-LABEL: pipe.pipeline @max_pool
// CHECK: %[[Y:.*]], %[[INDICES:.*]] = nn.max_pool %{{.*}} {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>)
// CHECK: pipe.return %[[Y]] : tensor<2x3x4x4xf32> saved(%[[INDICES]], %{{.*}} : tensor<2x3x4x4xi64>, tensor<2x3x8x8xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SI:[^:]+]]: tensor<2x3x4x4xi64>, %{{.*}}: tensor<2x3x8x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: nn.max_pool_grad %[[DY]], %[[SI]] {input_shape = array<i64: 2, 3, 8, 8>} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>) -> tensor<2x3x8x8xf32>
// SAVED: stage 0: keeps 2 values, 2304 bytes; memory model 2304 bytes: equal
func.func @max_pool(%x: tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<3x1x1xf32>
  %a = nn.mul %x, %s : (tensor<2x3x8x8xf32>, tensor<3x1x1xf32>) -> tensor<2x3x8x8xf32>
  %y = nn.max_pool %a {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Average pooling keeps nothing: auto_pad SAME_UPPER becomes explicit pads
// (the extra row and column at the end). Global average pooling spreads
// dy / 64 over the 8x8 window with an expand.
// CHECK-LABEL: pipe.pipeline @average_pool
// CHECK: nn.average_pool
// CHECK: nn.global_average_pool
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%{{[^:]+}}: tensor<2x3x8x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0 : tensor<2x3x4x4xf32>
// CHECK-NEXT: %[[DG:.*]] = pipe.output_grad 1 : tensor<2x3x1x1xf32>
// CHECK-NEXT: %[[SCALE:.*]] = nn.constant dense<1.562500e-02> : tensor<f32>
// CHECK-NEXT: %[[SCALED:.*]] = nn.mul %[[DG]], %[[SCALE]]
// CHECK-NEXT: %[[SHAPE:.*]] = nn.constant dense<[2, 3, 8, 8]> : tensor<4xi64>
// CHECK-NEXT: %[[SPREAD:.*]] = nn.expand %[[SCALED]], %[[SHAPE]] : (tensor<2x3x1x1xf32>, tensor<4xi64>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[DA:.*]] = nn.average_pool_grad %[[DY]] {count_include_pad = 1 : i64, input_shape = array<i64: 2, 3, 8, 8>, kernel_shape = array<i64: 3, 3>, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT: nn.add %[[SPREAD]], %[[DA]]
// The parameter's gradient keeps only the mul's input.
// SAVED: stage 0: keeps 1 values, 1536 bytes; memory model 1536 bytes: equal
func.func @average_pool(%x: tensor<2x3x8x8xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x1x1xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<3x1x1xf32>
  %a = nn.mul %x, %s : (tensor<2x3x8x8xf32>, tensor<3x1x1xf32>) -> tensor<2x3x8x8xf32>
  %y = nn.average_pool %a {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>, auto_pad = "SAME_UPPER", count_include_pad = 1 : i64} : (tensor<2x3x8x8xf32>) -> tensor<2x3x4x4xf32>
  %g = nn.global_average_pool %a : (tensor<2x3x8x8xf32>) -> tensor<2x3x1x1xf32>
  return %y, %g : tensor<2x3x4x4xf32>, tensor<2x3x1x1xf32>
}

// -----

// Batch norm in training mode becomes nn.batch_norm_train, whose batch mean
// and inverse std are kept with its input for nn.batch_norm_grad; the
// running statistics are not trainable and get no gradient.
// CHECK-LABEL: pipe.pipeline @batch_norm
// CHECK: %[[A:.*]] = nn.mul
// CHECK-NOT: nn.batch_norm %
// CHECK: %[[Y:.*]], %[[MEAN:.*]], %[[INVSTD:.*]] = nn.batch_norm_train %[[A]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK: pipe.return %[[Y]] : tensor<2x3x4x4xf32> saved(%[[A]], %[[MEAN]], %[[INVSTD]], %{{.*}} : tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4x4xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SA:[^:]+]]: tensor<2x3x4x4xf32>, %[[SM:[^:]+]]: tensor<3xf32>, %[[SI:[^:]+]]: tensor<3xf32>, %{{.*}}: tensor<2x3x4x4xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[SCALE:.*]] = pipe.param "bn.weight"
// CHECK-NEXT: %[[DX:.*]], %[[DSCALE:.*]], %[[DBIAS:.*]] = nn.batch_norm_grad %[[SA]], %[[SCALE]], %[[SM]], %[[SI]], %[[DY]]
// CHECK-NEXT: pipe.accumulate_grad %[[DSCALE]] into %[[SCALE]] : tensor<3xf32>
// CHECK-NEXT: %[[BIAS:.*]] = pipe.param "bn.bias"
// CHECK-NEXT: pipe.accumulate_grad %[[DBIAS]] into %[[BIAS]] : tensor<3xf32>
// CHECK-NEXT: nn.mul %[[DX]]
// CHECK-NOT: bn.running
// CHECK: pipe.return
// SAVED: stage 0: keeps 4 values, 792 bytes; memory model 792 bytes: equal
func.func @batch_norm(%x: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<3x1x1xf32>
  %scale = nn.param "bn.weight" {source = #nn.param_source<inline>} : tensor<3xf32>
  %bias = nn.param "bn.bias" {source = #nn.param_source<inline>} : tensor<3xf32>
  %mean = nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<3xf32>
  %var = nn.param "bn.running_var" {source = #nn.param_source<inline>, trainable = false} : tensor<3xf32>
  %a = nn.mul %x, %s : (tensor<2x3x4x4xf32>, tensor<3x1x1xf32>) -> tensor<2x3x4x4xf32>
  %y = nn.batch_norm %a, %scale, %bias, %mean, %var {training_mode = 1 : i64, epsilon = 1.0e-3 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Layer norm gets its statistics results (mean and inverse std per row),
// kept with its input for nn.layer_norm_grad; the axis is normalised.
// CHECK-LABEL: pipe.pipeline @layer_norm
// CHECK: %[[A:.*]] = nn.add
// CHECK: %[[Y:.*]], %[[STATS:.*]]:2 = nn.layer_norm %[[A]], %{{.*}}, %{{.*}} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x1xf32>, tensor<2x5x1xf32>)
// CHECK: pipe.return %[[Y]] : tensor<2x5x8xf32> saved(%[[A]], %[[STATS]]#0, %[[STATS]]#1 : tensor<2x5x8xf32>, tensor<2x5x1xf32>, tensor<2x5x1xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SA:[^:]+]]: tensor<2x5x8xf32>, %[[SM:[^:]+]]: tensor<2x5x1xf32>, %[[SI:[^:]+]]: tensor<2x5x1xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[SCALE:.*]] = pipe.param "ln.weight"
// CHECK-NEXT: %[[DX:.*]], %[[DSCALE:.*]], %[[DBIAS:.*]] = nn.layer_norm_grad %[[SA]], %[[SCALE]], %[[SM]], %[[SI]], %[[DY]] {axis = 2 : i64}
// CHECK-NEXT: pipe.accumulate_grad %[[DSCALE]] into %[[SCALE]] : tensor<8xf32>
// CHECK-NEXT: %[[BIAS:.*]] = pipe.param "ln.bias"
// CHECK-NEXT: pipe.accumulate_grad %[[DBIAS]] into %[[BIAS]] : tensor<8xf32>
// CHECK: nn.reduce_sum %[[DX]]
// SAVED: stage 0: keeps 3 values, 400 bytes; memory model 400 bytes: equal
func.func @layer_norm(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %scale = nn.param "ln.weight" {source = #nn.param_source<inline>} : tensor<8xf32>
  %bias = nn.param "ln.bias" {source = #nn.param_source<inline>} : tensor<8xf32>
  %a = nn.add %x, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %y = nn.layer_norm %a, %scale, %bias {axis = -1 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// A layer norm straight on a model input: only its scale and bias need
// gradients, which read the statistics too.
// CHECK-LABEL: pipe.pipeline @layer_norm_parameters_only
// CHECK: ^bb0(%[[X:[^:]+]]: tensor<2x5x8xf32>):
// CHECK: %[[Y:.*]], %[[STATS:.*]]:2 = nn.layer_norm %[[X]]
// CHECK: saved(%[[X]], %[[STATS]]#0, %[[STATS]]#1 :
// CHECK: } backward {
// CHECK: %{{.*}}, %[[DSCALE:.*]], %[[DBIAS:.*]] = nn.layer_norm_grad
// CHECK: pipe.accumulate_grad %[[DSCALE]] into
// CHECK: pipe.accumulate_grad %[[DBIAS]] into
// SAVED: stage 0: keeps 3 values, 400 bytes; memory model 400 bytes: equal
func.func @layer_norm_parameters_only(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %scale = nn.param "ln.weight" {source = #nn.param_source<inline>} : tensor<8xf32>
  %bias = nn.param "ln.bias" {source = #nn.param_source<inline>} : tensor<8xf32>
  %y = nn.layer_norm %x, %scale, %bias {axis = -1 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// Softmax and log-softmax keep their outputs; the gradient ops take the
// normalised axis.
// CHECK-LABEL: pipe.pipeline @softmax
// CHECK: %[[S:.*]] = nn.softmax %{{.*}} {axis = 1 : i64}
// CHECK: %[[L:.*]] = nn.log_softmax
// CHECK: saved(%[[L]], %[[S]] :
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SL:[^:]+]]: tensor<2x5x8xf32>, %[[SS:[^:]+]]: tensor<2x5x8xf32>):
// CHECK-NEXT: %[[DS:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[DL:.*]] = pipe.output_grad 1
// CHECK-NEXT: %[[D1:.*]] = nn.log_softmax_grad %[[SL]], %[[DL]] {axis = 2 : i64}
// CHECK-NEXT: %[[D2:.*]] = nn.softmax_grad %[[SS]], %[[DS]] {axis = 1 : i64}
// CHECK-NEXT: nn.add %[[D1]], %[[D2]]
// SAVED: stage 0: keeps 2 values, 640 bytes; memory model 640 bytes: equal
func.func @softmax(%x: tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x8xf32>) {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %a = nn.add %x, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %s = nn.softmax %a {axis = 1 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %l = nn.log_softmax %a : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return %s, %l : tensor<2x5x8xf32>, tensor<2x5x8xf32>
}

// -----

// Dropout gets its mask result, the only value kept (one byte per element);
// dx = where(mask, dy / (1 - ratio), 0).
// CHECK-LABEL: pipe.pipeline @dropout
// CHECK: %[[Y:.*]], %[[MASK:.*]] = nn.dropout %{{.*}} : (tensor<2x5x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x5x8xf32>, tensor<2x5x8xi1>)
// CHECK: pipe.return %[[Y]] : tensor<2x5x8xf32> saved(%[[MASK]] : tensor<2x5x8xi1>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SM:[^:]+]]: tensor<2x5x8xi1>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[KEEP:.*]] = nn.constant dense<1.33333337> : tensor<f32>
// CHECK-NEXT: %[[SCALED:.*]] = nn.mul %[[DY]], %[[KEEP]]
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: nn.where %[[SM]], %[[SCALED]], %[[ZERO]] : (tensor<2x5x8xi1>, tensor<2x5x8xf32>, tensor<f32>) -> tensor<2x5x8xf32>
// SAVED: stage 0: keeps 1 values, 80 bytes; memory model 80 bytes: equal
func.func @dropout(%x: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %a = nn.add %x, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %ratio = nn.constant dense<0.25> : tensor<f32>
  %train = nn.constant dense<true> : tensor<i1>
  %y = nn.dropout %a, %ratio, %train : (tensor<2x5x8xf32>, tensor<f32>, tensor<i1>) -> tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// Reductions: sum broadcasts dy back (reshape to the kept shape, expand),
// mean scales it by 1/5 first, max routes it to the elements equal to the
// maximum (shared between ties) and keeps the input and the output.
// CHECK-LABEL: pipe.pipeline @reduce
// CHECK: %[[A:.*]] = nn.add
// CHECK: %[[MAX:.*]] = nn.reduce_max %[[A]]
// CHECK: saved(%[[MAX]], %[[A]] : tensor<2x5x1xf32>, tensor<2x5x8xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SMAX:[^:]+]]: tensor<2x5x1xf32>, %[[SA:[^:]+]]: tensor<2x5x8xf32>):
// CHECK-NEXT: %[[DSUM:.*]] = pipe.output_grad 0 : tensor<2x5xf32>
// CHECK-NEXT: %[[DMEAN:.*]] = pipe.output_grad 1 : tensor<2x1x8xf32>
// CHECK-NEXT: %[[DMAX:.*]] = pipe.output_grad 2 : tensor<2x5x1xf32>
// CHECK-NEXT: %[[HIT:.*]] = nn.equal %[[SA]], %[[SMAX]] : (tensor<2x5x8xf32>, tensor<2x5x1xf32>) -> tensor<2x5x8xi1>
// CHECK-NEXT: %[[ONES:.*]] = nn.cast %[[HIT]] {to = f32}
// CHECK-NEXT: %[[LAST:.*]] = nn.constant dense<2> : tensor<1xi64>
// CHECK-NEXT: %[[COUNT:.*]] = nn.reduce_sum %[[ONES]], %[[LAST]] : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00>
// CHECK-NEXT: %[[SHARE:.*]] = nn.div %[[DMAX]], %[[COUNT]]
// CHECK-NEXT: %[[DA_MAX:.*]] = nn.where %[[HIT]], %[[SHARE]], %[[ZERO]] : (tensor<2x5x8xi1>, tensor<2x5x1xf32>, tensor<f32>) -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[FIFTH:.*]] = nn.constant dense<2.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[DM:.*]] = nn.mul %[[DMEAN]], %[[FIFTH]]
// CHECK-NEXT: %[[FULL:.*]] = nn.constant dense<[2, 5, 8]>
// CHECK-NEXT: %[[DA_MEAN:.*]] = nn.expand %[[DM]], %[[FULL]] : (tensor<2x1x8xf32>, tensor<3xi64>) -> tensor<2x5x8xf32>
// CHECK-NEXT: %[[ACC:.*]] = nn.add %[[DA_MAX]], %[[DA_MEAN]]
// CHECK-NEXT: %[[KEPT:.*]] = nn.constant dense<[2, 5, 1]>
// CHECK-NEXT: %[[DS:.*]] = nn.reshape %[[DSUM]], %[[KEPT]] : (tensor<2x5xf32>, tensor<3xi64>) -> tensor<2x5x1xf32>
// CHECK-NEXT: %[[FULL2:.*]] = nn.constant dense<[2, 5, 8]>
// CHECK-NEXT: %[[DA_SUM:.*]] = nn.expand %[[DS]], %[[FULL2]]
// CHECK-NEXT: nn.add %[[ACC]], %[[DA_SUM]]
// SAVED: stage 0: keeps 2 values, 360 bytes; memory model 360 bytes: equal
func.func @reduce(%x: tensor<2x5x8xf32>) -> (tensor<2x5xf32>, tensor<2x1x8xf32>, tensor<2x5x1xf32>) {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %a = nn.add %x, %b : (tensor<2x5x8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32>
  %last = nn.constant dense<[-1]> : tensor<1xi64>
  %mid = nn.constant dense<[1]> : tensor<1xi64>
  %0 = nn.reduce_sum %a, %last {keepdims = 0 : i64} : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5xf32>
  %1 = nn.reduce_mean %a, %mid : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x1x8xf32>
  %2 = nn.reduce_max %a, %last : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
  return %0, %1, %2 : tensor<2x5xf32>, tensor<2x1x8xf32>, tensor<2x5x1xf32>
}

// -----

// Reshape and transpose invert themselves; expand sums over the broadcast
// dim. Nothing is kept.
// CHECK-LABEL: pipe.pipeline @reshape_transpose_expand
// CHECK: pipe.return %{{.*}}, %{{.*}}, %{{.*}} : tensor<6x4xf32>, tensor<2x4x3xf32>, tensor<4x2x3x4xf32>{{$}}
// CHECK-NEXT: } backward {
// CHECK-NEXT: %[[DR:.*]] = pipe.output_grad 0 : tensor<6x4xf32>
// CHECK-NEXT: %[[DT:.*]] = pipe.output_grad 1 : tensor<2x4x3xf32>
// CHECK-NEXT: %[[DE:.*]] = pipe.output_grad 2 : tensor<4x2x3x4xf32>
// CHECK-NEXT: %[[DIM0:.*]] = nn.constant dense<0> : tensor<1xi64>
// CHECK-NEXT: %[[SUM:.*]] = nn.reduce_sum %[[DE]], %[[DIM0]] : (tensor<4x2x3x4xf32>, tensor<1xi64>) -> tensor<1x2x3x4xf32>
// CHECK-NEXT: %[[S1:.*]] = nn.constant dense<[2, 3, 4]>
// CHECK-NEXT: %[[G1:.*]] = nn.reshape %[[SUM]], %[[S1]]
// CHECK-NEXT: %[[G2:.*]] = nn.transpose %[[DT]] {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[ACC:.*]] = nn.add %[[G1]], %[[G2]]
// CHECK-NEXT: %[[S2:.*]] = nn.constant dense<[2, 3, 4]>
// CHECK-NEXT: %[[G3:.*]] = nn.reshape %[[DR]], %[[S2]] : (tensor<6x4xf32>, tensor<3xi64>) -> tensor<2x3x4xf32>
// CHECK-NEXT: nn.add %[[ACC]], %[[G3]]
// SAVED: stage 0: keeps 0 values, 0 bytes; memory model 0 bytes: equal
func.func @reshape_transpose_expand(%x: tensor<2x3x4xf32>) -> (tensor<6x4xf32>, tensor<2x4x3xf32>, tensor<4x2x3x4xf32>) {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<4xf32>
  %a = nn.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %shape = nn.constant dense<[6, -1]> : tensor<2xi64>
  %0 = nn.reshape %a, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
  %1 = nn.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %to = nn.constant dense<[4, 2, 3, 4]> : tensor<4xi64>
  %2 = nn.expand %a, %to : (tensor<2x3x4xf32>, tensor<4xi64>) -> tensor<4x2x3x4xf32>
  return %0, %1, %2 : tensor<6x4xf32>, tensor<2x4x3xf32>, tensor<4x2x3x4xf32>
}

// -----

// Tile sums dy viewed as [r0, d0, r1, d1, ...] over the repeats; split
// concatenates its outputs' gradients (zeros for an unused output); concat
// slices dy, for the inputs that need a gradient only.
// CHECK-LABEL: pipe.pipeline @concat_split_tile
// CHECK: } backward {
// CHECK-NEXT: %[[DP:.*]] = pipe.output_grad 0 : tensor<2x6x2xf32>
// CHECK-NEXT: %[[DT:.*]] = pipe.output_grad 1 : tensor<2x6x4xf32>
// CHECK-NEXT: %[[VIEW:.*]] = nn.constant dense<[1, 2, 1, 6, 2, 2]> : tensor<6xi64>
// CHECK-NEXT: %[[R:.*]] = nn.reshape %[[DT]], %[[VIEW]] : (tensor<2x6x4xf32>, tensor<6xi64>) -> tensor<1x2x1x6x2x2xf32>
// CHECK-NEXT: %[[REPEATS:.*]] = nn.constant dense<[0, 2, 4]> : tensor<3xi64>
// CHECK-NEXT: %[[UNTILED:.*]] = nn.reduce_sum %[[R]], %[[REPEATS]] {keepdims = 0 : i64} : (tensor<1x2x1x6x2x2xf32>, tensor<3xi64>) -> tensor<2x6x2xf32>
// CHECK-NEXT: %[[D1:.*]] = nn.add %[[DP]], %[[UNTILED]]
// CHECK-NEXT: %[[D0:.*]] = nn.constant dense<0.000000e+00> : tensor<2x6x2xf32>
// CHECK-NEXT: %[[DCAT:.*]] = nn.concat %[[D0]], %[[D1]] {axis = 2 : i64} : (tensor<2x6x2xf32>, tensor<2x6x2xf32>) -> tensor<2x6x4xf32>
// CHECK-NEXT: %[[START:.*]] = nn.constant dense<0> : tensor<1xi64>
// CHECK-NEXT: %[[END:.*]] = nn.constant dense<3> : tensor<1xi64>
// CHECK-NEXT: %[[AXIS:.*]] = nn.constant dense<1> : tensor<1xi64>
// CHECK-NEXT: %[[STEP:.*]] = nn.constant dense<1> : tensor<1xi64>
// CHECK-NEXT: nn.slice %[[DCAT]], %[[START]], %[[END]], %[[AXIS]], %[[STEP]] : {{.*}} -> tensor<2x3x4xf32>
// CHECK-NOT: nn.slice
// CHECK: pipe.return
// SAVED: stage 0: keeps 0 values, 0 bytes; memory model 0 bytes: equal
func.func @concat_split_tile(%x: tensor<2x3x4xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x4xf32>) {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<4xf32>
  %a = nn.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %cat = nn.concat %a, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  %parts:2 = nn.split %cat {axis = 2 : i64} : (tensor<2x6x4xf32>) -> (tensor<2x6x2xf32>, tensor<2x6x2xf32>)
  %rep = nn.constant dense<[1, 1, 2]> : tensor<3xi64>
  %tiled = nn.tile %parts#1, %rep : (tensor<2x6x2xf32>, tensor<3xi64>) -> tensor<2x6x4xf32>
  return %parts#1, %tiled : tensor<2x6x2xf32>, tensor<2x6x4xf32>
}

// -----

// Slice writes dy back at starts + i * steps; gather scatter-adds at its
// indices (kept: the only value kept); constant pad crops with the negated
// pads; trilu masks dy the same way.
// CHECK-LABEL: pipe.pipeline @slice_gather_pad_trilu
// CHECK: ^bb0(%{{[^:]+}}: tensor<2x3x4xf32>, %[[I:[^:]+]]: tensor<5xi64>):
// CHECK: saved(%[[I]] : tensor<5xi64>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SI:[^:]+]]: tensor<5xi64>):
// CHECK-NEXT: %[[DS:.*]] = pipe.output_grad 0 : tensor<2x3x2xf32>
// CHECK-NEXT: %[[DG:.*]] = pipe.output_grad 1 : tensor<2x3x5xf32>
// CHECK-NEXT: %[[DP:.*]] = pipe.output_grad 2 : tensor<2x3x7xf32>
// CHECK-NEXT: %[[DT:.*]] = pipe.output_grad 3 : tensor<2x3x4xf32>
// CHECK-NEXT: %[[G1:.*]] = nn.trilu %[[DT]] {upper = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[CROP:.*]] = nn.constant dense<[-1, -2]> : tensor<2xi64>
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[AXES:.*]] = nn.constant dense<2> : tensor<1xi64>
// CHECK-NEXT: %[[G2:.*]] = nn.pad %[[DP]], %[[CROP]], %[[ZERO]], %[[AXES]] : (tensor<2x3x7xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[ACC1:.*]] = nn.add %[[G1]], %[[G2]]
// CHECK-NEXT: %[[G3:.*]] = nn.gather_grad %[[DG]], %[[SI]] {axis = 2 : i64, input_shape = array<i64: 2, 3, 4>} : (tensor<2x3x5xf32>, tensor<5xi64>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[ACC2:.*]] = nn.add %[[ACC1]], %[[G3]]
// CHECK-NEXT: %[[G4:.*]] = nn.slice_grad %[[DS]] {input_shape = array<i64: 2, 3, 4>, starts = array<i64: 0, 0, 1>, steps = array<i64: 1, 1, 2>} : (tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: nn.add %[[ACC2]], %[[G4]]
// SAVED: stage 0: keeps 1 values, 40 bytes; memory model 40 bytes: equal
func.func @slice_gather_pad_trilu(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>) -> (tensor<2x3x2xf32>, tensor<2x3x5xf32>, tensor<2x3x7xf32>, tensor<2x3x4xf32>) {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<4xf32>
  %a = nn.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %starts = nn.constant dense<[1]> : tensor<1xi64>
  %ends = nn.constant dense<[4]> : tensor<1xi64>
  %axes = nn.constant dense<[2]> : tensor<1xi64>
  %steps = nn.constant dense<[2]> : tensor<1xi64>
  %0 = nn.slice %a, %starts, %ends, %axes, %steps : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3x2xf32>
  %1 = nn.gather %a, %i {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x3x5xf32>
  %pads = nn.constant dense<[1, 2]> : tensor<2xi64>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %pad_axes = nn.constant dense<[2]> : tensor<1xi64>
  %2 = nn.pad %a, %pads, %zero, %pad_axes : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x3x7xf32>
  %3 = nn.trilu %a {upper = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0, %1, %2, %3 : tensor<2x3x2xf32>, tensor<2x3x5xf32>, tensor<2x3x7xf32>, tensor<2x3x4xf32>
}

// -----

// Where routes dy by the kept condition (the model input %x gets none);
// casts convert dy back to their input's type.
// CHECK-LABEL: pipe.pipeline @where_cast
// CHECK: ^bb0(%{{[^:]+}}: tensor<2x3xf32>, %[[C:[^:]+]]: tensor<2x3xi1>):
// CHECK: saved(%[[C]] : tensor<2x3xi1>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SC:[^:]+]]: tensor<2x3xi1>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[ZERO:.*]] = nn.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DF:.*]] = nn.where %[[SC]], %[[DY]], %[[ZERO]]
// CHECK-NEXT: %[[DH:.*]] = nn.cast %[[DF]] {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
// CHECK-NEXT: %[[DA:.*]] = nn.cast %[[DH]] {to = f32} : (tensor<2x3xf16>) -> tensor<2x3xf32>
// CHECK-NEXT: nn.constant dense<0>
// CHECK-NEXT: nn.reduce_sum %[[DA]]
// CHECK-NOT: nn.where
// CHECK: pipe.return
// SAVED: stage 0: keeps 1 values, 6 bytes; memory model 6 bytes: equal
func.func @where_cast(%x: tensor<2x3xf32>, %c: tensor<2x3xi1>) -> tensor<2x3xf32> {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<3xf32>
  %a = nn.add %x, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %h = nn.cast %a {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %f = nn.cast %h {to = f32} : (tensor<2x3xf16>) -> tensor<2x3xf32>
  %y = nn.where %c, %f, %x : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

// A skip connection: %h feeds relu and the residual add; its two gradients
// are summed with nn.add before the matmul's rule.
// CHECK-LABEL: pipe.pipeline @skip
// CHECK: %[[H:.*]] = nn.matmul
// CHECK: %[[R:.*]] = nn.relu %[[H]]
// CHECK: nn.add %[[R]], %[[H]]
// CHECK: saved(%[[R]], %{{.*}} :
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SR:[^:]+]]: tensor<4x8xf32>, %[[SX:[^:]+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[DRELU:.*]] = nn.unary_grad %[[SR]], %[[DY]] {function = #nn.unary_function<relu>}
// CHECK-NEXT: %[[DH:.*]] = nn.add %[[DY]], %[[DRELU]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.gemm %[[SX]], %[[DH]] {transA = 1 : i64}
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: pipe.accumulate_grad %[[DW]] into %[[W]]
// SAVED: stage 0: keeps 2 values, 256 bytes; memory model 256 bytes: equal
func.func @skip(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
  %h = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %r = nn.relu %h : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = nn.add %r, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A tied weight: %w is used by both matmuls; each gradient is accumulated
// after the rule that made it, so that the first is not held while the second
// is computed (the memory model counts one at a time).
// CHECK-LABEL: pipe.pipeline @tied
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SH:[^:]+]]: tensor<4x8xf32>, %[[SX:[^:]+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[DW2:.*]] = nn.gemm %[[SH]], %[[DY]] {transA = 1 : i64}
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[DH:.*]] = nn.gemm %[[DY]], %[[W]] {transB = 1 : i64}
// CHECK-NEXT: pipe.accumulate_grad %[[DW2]] into %[[W]] : tensor<8x8xf32>
// CHECK-NEXT: %[[DW1:.*]] = nn.gemm %[[SX]], %[[DH]] {transA = 1 : i64}
// CHECK-NEXT: pipe.accumulate_grad %[[DW1]] into %[[W]] : tensor<8x8xf32>
// CHECK-NOT: pipe.accumulate_grad
// CHECK: pipe.return
// SAVED: stage 0: keeps 2 values, 256 bytes; memory model 256 bytes: equal
func.func @tied(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
  %h = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = nn.matmul %h, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// A value computed from parameters only is not kept: the backward recomputes
// it (the memory model charges no bytes for it).
// CHECK-LABEL: pipe.pipeline @recompute
// CHECK: ^bb0(%[[X:[^:]+]]: tensor<4x8xf32>):
// CHECK: saved(%[[X]] : tensor<4x8xf32>)
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[SX:[^:]+]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[DY:.*]] = pipe.output_grad 0
// CHECK-NEXT: %[[DS:.*]] = nn.gemm %[[SX]], %[[DY]] {transA = 1 : i64}
// CHECK-NEXT: %[[W:.*]] = pipe.param "w"
// CHECK-NEXT: %[[T:.*]] = nn.transpose %[[W]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: %[[S:.*]] = nn.sigmoid %[[T]]
// CHECK-NEXT: %[[DT:.*]] = nn.unary_grad %[[S]], %[[DS]] {function = #nn.unary_function<sigmoid>}
// CHECK-NEXT: %[[DW:.*]] = nn.transpose %[[DT]] {perm = array<i64: 1, 0>}
// CHECK-NEXT: pipe.accumulate_grad %[[DW]] into %[[W]]
// SAVED: stage 0: keeps 1 values, 128 bytes; memory model 128 bytes: equal
func.func @recompute(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
  %t = nn.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = nn.sigmoid %t : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %y = nn.matmul %x, %s : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Ops with no gradient rule on a path from a parameter to the output: one
// error naming the op and why.
func.func @pad_reflect(%x: tensor<2x3x4xf32>) -> tensor<2x3x7xf32> {
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<4xf32>
  %a = nn.add %x, %b : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %pads = nn.constant dense<[1, 2]> : tensor<2xi64>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %axes = nn.constant dense<[2]> : tensor<1xi64>
  // expected-error @+1 {{'nn.pad' op has no gradient rule: Pad mode 'reflect'}}
  %y = nn.pad %a, %pads, %zero, %axes {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x3x7xf32>
  return %y : tensor<2x3x7xf32>
}

// -----

func.func @matmul_vector(%x: tensor<2x4xf32>) -> tensor<2xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4xf32>
  // expected-error @+1 {{'nn.matmul' op has no gradient rule: MatMul with a 1-D operand}}
  %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @clip_input_bound(%x: tensor<2x4xf32>, %low: tensor<f32>) -> tensor<2x4xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<2x4xf32>
  %a = nn.mul %x, %w : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %high = nn.constant dense<6.0> : tensor<f32>
  // expected-error @+1 {{'nn.clip' op has no gradient rule: Clip bounds must be constants}}
  %y = nn.clip %a, %low, %high : (tensor<2x4xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
  return %y : tensor<2x4xf32>
}

// -----

func.func @average_pool_dilations(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<2x1x1xf32>
  %a = nn.mul %x, %w : (tensor<1x2x8x8xf32>, tensor<2x1x1xf32>) -> tensor<1x2x8x8xf32>
  // expected-error @+1 {{'nn.average_pool' op has no gradient rule: AveragePool with dilations}}
  %y = nn.average_pool %a {kernel_shape = array<i64: 3, 3>, dilations = array<i64: 2, 2>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
  return %y : tensor<1x2x4x4xf32>
}

// -----

// Off the gradient path the same ops are fine: the reflect pad only sees the
// model input.
// CHECK-LABEL: pipe.pipeline @no_rule_off_path
// CHECK: nn.pad {{.*}}mode = "reflect"
// CHECK: } backward {
// CHECK-NOT: nn.pad
// CHECK: pipe.accumulate_grad
// SAVED: stage 0: keeps 1 values, 56 bytes; memory model 56 bytes: equal
func.func @no_rule_off_path(%x: tensor<2x4xf32>) -> tensor<2x7xf32> {
  %pads = nn.constant dense<[1, 2]> : tensor<2xi64>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %axes = nn.constant dense<[1]> : tensor<1xi64>
  %p = nn.pad %x, %pads, %zero, %axes {mode = "reflect"} : (tensor<2x4xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x7xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<7xf32>
  %y = nn.mul %p, %w : (tensor<2x7xf32>, tensor<7xf32>) -> tensor<2x7xf32>
  return %y : tensor<2x7xf32>
}

// -----

// A parameter the stage also returns: its gradient sums the output gradient
// and the multiply's contribution, and is accumulated once, after the
// multiply's rule (the return is not one of the readers it waits for).
// CHECK-LABEL: pipe.pipeline @returned_parameter
// CHECK: } backward {
// CHECK: %[[DP:.*]] = pipe.output_grad 1
// CHECK: %[[SUM:.*]] = nn.add %[[DP]], %{{.*}}
// CHECK: pipe.accumulate_grad %[[SUM]] into %{{.*}} : tensor<4xf32>
// CHECK-NOT: pipe.accumulate_grad
// CHECK: pipe.return
// SAVED: stage 0: keeps 1 values, 32 bytes; memory model 32 bytes: equal
func.func @returned_parameter(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>) {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4xf32>
  %y = nn.mul %x, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %y, %w : tensor<2x4xf32>, tensor<4xf32>
}
