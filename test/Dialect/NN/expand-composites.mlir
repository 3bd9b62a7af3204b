// RUN: pipe-opt %s -split-input-file --nn-expand-composites | FileCheck %s
// Clip: 4 gates in each of the LSTM's 4 cells, one min and one max each.
// RUN: pipe-opt %s -split-input-file --nn-expand-composites | grep -c nn.min | FileCheck %s --check-prefix=CLIP
// CLIP: {{^}}16{{$}}
// Products: the GRU's 2 per step (r * H R^T, z * (h - g)) for 2 steps; the
// LSTM's 6 per cell (3 peepholes, f * c, i * g, o * h(c)) for 4 cells.
// RUN: pipe-opt %s -split-input-file --nn-expand-composites | grep -c nn.mul | FileCheck %s --check-prefix=MUL
// MUL: {{^}}28{{$}}

// A GRU in layout 1 whose last state alone is read: the input and the initial
// state are transposed to [seq, batch, ...] and back; the projection X W^T is
// one matmul for both steps; per step H R^T for z and r, the candidate's
// H R^T apart (linear_before_reset: the reset multiplies it); sequence_lens
// (2, 1, 0) freeze the entries past their length with a where on a constant
// mask per step. Nothing computes the unread output Y.
// CHECK-LABEL: func.func @gru_last_state
// CHECK: nn.transpose %arg0 {perm = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
// CHECK: nn.transpose %arg3 {perm = array<i64: 1, 0, 2>} : (tensor<3x1x5xf32>) -> tensor<1x3x5xf32>
// CHECK: nn.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x15xf32>) -> tensor<2x3x15xf32>
// CHECK: %[[H0:.*]] = nn.squeeze {{.*}} -> tensor<3x5xf32>
// CHECK: nn.matmul %[[H0]], %{{.*}} : (tensor<3x5xf32>, tensor<5x10xf32>) -> tensor<3x10xf32>
// CHECK: nn.sigmoid
// CHECK: %[[R1:.*]] = nn.sigmoid
// CHECK: %[[HH1:.*]] = nn.matmul %[[H0]], %{{.*}} : (tensor<3x5xf32>, tensor<5x5xf32>) -> tensor<3x5xf32>
// CHECK: nn.mul %[[R1]], %[[HH1]]
// CHECK: nn.tanh
// CHECK: %[[M1:.*]] = nn.constant dense<{{\[}}[true], [true], [false]]> : tensor<3x1xi1>
// CHECK: %[[H1:.*]] = nn.where %[[M1]], %{{.*}}, %[[H0]]
// CHECK: nn.matmul %[[H1]], %{{.*}} : (tensor<3x5xf32>, tensor<5x10xf32>) -> tensor<3x10xf32>
// CHECK: %[[M2:.*]] = nn.constant dense<{{\[}}[true], [false], [false]]> : tensor<3x1xi1>
// CHECK: %[[H2:.*]] = nn.where %[[M2]], %{{.*}}, %[[H1]]
// CHECK: %[[LAST:.*]] = nn.reshape %[[H2]], %{{.*}} -> tensor<1x3x5xf32>
// CHECK: %[[OUT:.*]] = nn.transpose %[[LAST]] {perm = array<i64: 1, 0, 2>} : (tensor<1x3x5xf32>) -> tensor<3x1x5xf32>
// CHECK-NOT: nn.concat
// CHECK: return %[[OUT]]
func.func @gru_last_state(%x: tensor<3x2x4xf32>, %w: tensor<1x15x4xf32>, %r: tensor<1x15x5xf32>, %h: tensor<3x1x5xf32>) -> tensor<3x1x5xf32> {
  %y, %yh = nn.gru %x, %w, %r initial_h(%h) {hidden_size = 5 : i64, layout = 1 : i64, linear_before_reset = 1 : i64, sequence_lens = array<i64: 2, 1, 0>} : (tensor<3x2x4xf32>, tensor<1x15x4xf32>, tensor<1x15x5xf32>, tensor<3x1x5xf32>) -> (tensor<3x2x1x5xf32>, tensor<3x1x5xf32>)
  return %yh : tensor<3x1x5xf32>
}

// -----

// A bidirectional LSTM of 2 steps with peepholes and a clip: per direction one
// projection and two cells (the reverse one from the last step), peepholes
// multiply the cell state into i and f (and the new state into o), every gate
// input clipped to [-2, 2]; Y joins the steps per direction and then the
// directions, the last states join the directions.
// CHECK-LABEL: func.func @lstm_bidirectional
// CHECK-COUNT-2: nn.matmul %arg0
// CHECK-NOT: nn.matmul %arg0
// CHECK: nn.concat {{.*}} {axis = 0 : i64} : (tensor<1x1x2x3xf32>, tensor<1x1x2x3xf32>) -> tensor<2x1x2x3xf32>
// CHECK: nn.concat {{.*}} {axis = 1 : i64} : (tensor<2x1x2x3xf32>, tensor<2x1x2x3xf32>) -> tensor<2x2x2x3xf32>
// CHECK: nn.concat {{.*}} {axis = 0 : i64} : (tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> tensor<2x2x3xf32>
// CHECK: nn.concat {{.*}} {axis = 0 : i64} : (tensor<1x2x3xf32>, tensor<1x2x3xf32>) -> tensor<2x2x3xf32>
func.func @lstm_bidirectional(%x: tensor<2x2x4xf32>, %w: tensor<2x12x4xf32>, %r: tensor<2x12x3xf32>, %p: tensor<2x9xf32>) -> (tensor<2x2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>) {
  %y, %yh, %yc = nn.lstm %x, %w, %r peepholes(%p) {hidden_size = 3 : i64, direction = "bidirectional", clip = 2.0 : f32} : (tensor<2x2x4xf32>, tensor<2x12x4xf32>, tensor<2x12x3xf32>, tensor<2x9xf32>) -> (tensor<2x2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>)
  return %y, %yh, %yc : tensor<2x2x2x3xf32>, tensor<2x2x3xf32>, tensor<2x2x3xf32>
}
