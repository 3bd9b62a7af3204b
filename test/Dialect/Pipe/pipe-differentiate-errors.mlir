// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-differentiate | FileCheck %s
// Settings are checked before any pipeline; each error names the setting.
// RUN: not pipe-opt %s -split-input-file -pipe-differentiate=optimizer=lamb -o /dev/null 2>&1 | FileCheck %s --check-prefix=OPTIMIZER
// OPTIMIZER: error: unknown optimizer 'lamb' (sgd, momentum, adam or adamw)
// RUN: not pipe-opt %s -split-input-file -pipe-differentiate=loss=hinge -o /dev/null 2>&1 | FileCheck %s --check-prefix=LOSS
// LOSS: error: unknown loss 'hinge' (cross-entropy, mse, output or none)
// RUN: not pipe-opt %s -split-input-file -pipe-differentiate=lr=-0.1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=LR
// LR: error: optimizer settings must be finite and non-negative
// The pipelines below carry a loss; differentiating them with loss=none is
// a mismatch, reported on the pipeline.
// RUN: not pipe-opt %s -split-input-file -pipe-differentiate=loss=none -o /dev/null 2>&1 | FileCheck %s --check-prefix=MISMATCH
// MISMATCH: error: 'pipe.pipeline' op carries a loss but loss=none was asked for

// Pipelines as pipe-split-stages writes them, differentiated directly.

// The gradient of an activation that does not reach the loss (through floor,
// which has no derivative) is zeros; the producer still receives it.
// CHECK-LABEL: pipe.pipeline @zeros
// CHECK: pipe.stage @stage0
// CHECK: } backward {
// CHECK-NEXT: ^bb0(%[[X:[^:]+]]: tensor<4xf32>):
// CHECK-NEXT: %[[G:.*]] = pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: %[[DW:.*]] = nn.mul %[[G]], %[[X]]
// CHECK: pipe.accumulate_grad %[[DW]] into
// CHECK: pipe.stage @stage1
// CHECK: } backward {
// CHECK-NOT: nn.floor
// CHECK: %[[ZEROS:.*]] = nn.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NEXT: pipe.send %[[ZEROS]] {kind = #pipe.transfer_kind<gradient>, peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
// CHECK-NEXT: pipe.return
pipe.pipeline @zeros attributes {num_stages = 2, microbatches = 2, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %f = nn.floor %a : (tensor<4xf32>) -> tensor<4xf32>
    %v = pipe.param "v" {source = #nn.param_source<inline>, owner = 1, users = array<i64: 1>} : tensor<4xf32>
    %y = nn.mul %f, %v : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %shape = nn.constant dense<[1, 4]> : tensor<2xi64>
    %logits = nn.reshape %y, %shape : (tensor<4xf32>, tensor<2xi64>) -> tensor<1x4xf32>
    %labels = pipe.label 0 {range = 4} : tensor<1xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<1x4xf32>, tensor<1xi64>) -> (tensor<f32>, tensor<1x4xf32>)
    pipe.loss %loss : tensor<f32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// An op that is on the path from a parameter to the loss and implements no
// gradient rule.
pipe.pipeline @no_rule attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<1x4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<1x4xf32>
    // expected-error @+1 {{'arith.mulf' op has no gradient rule, and it is on a path from a trainable parameter to the loss}}
    %y = arith.mulf %x, %w : tensor<1x4xf32>
    %labels = pipe.label 0 {range = 4} : tensor<1xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels : (tensor<1x4xf32>, tensor<1xi64>) -> (tensor<f32>, tensor<1x4xf32>)
    pipe.loss %loss : tensor<f32>
    pipe.return
  }
}

// -----

// A gradient that reaches a result the op's rule does not differentiate
// (the cross-entropy's log-probability) is an error, not a silent zero.
pipe.pipeline @dropped_result attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<1x4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<1x4xf32>
    %y = nn.mul %x, %w : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
    %labels = pipe.label 0 {range = 4} : tensor<1xi64>
    // expected-error @+1 {{'nn.softmax_cross_entropy_loss' op result #1 is on a path to the loss, and the op's gradient rule only differentiates through its other results}}
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels : (tensor<1x4xf32>, tensor<1xi64>) -> (tensor<f32>, tensor<1x4xf32>)
    %axes = nn.constant dense<[0, 1]> : tensor<2xi64>
    %sum = nn.reduce_sum %log_prob, %axes {keepdims = 0 : i64} : (tensor<1x4xf32>, tensor<2xi64>) -> tensor<f32>
    %total = nn.add %loss, %sum : (tensor<f32>, tensor<f32>) -> tensor<f32>
    pipe.loss %total : tensor<f32>
    pipe.return
  }
}

// -----

pipe.pipeline @twice attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{'pipe.stage' op already has a backward region}}
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %l = nn.constant dense<0.0> : tensor<f32>
    pipe.loss %l : tensor<f32>
    pipe.return
  } backward {
    pipe.return
  }
}

// -----

pipe.pipeline @orphan_gradient attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-error @+1 {{'pipe.recv' op receives a gradient for tag 3 but the stage sends no activation under it}}
    %g = pipe.recv {peer = 1, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %z = nn.constant dense<0.0> : tensor<4xf32>
    pipe.send %z {peer = 0, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %l = nn.constant dense<0.0> : tensor<f32>
    pipe.loss %l : tensor<f32>
    pipe.return
  }
}

// -----

pipe.pipeline @not_a_placeholder attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = nn.constant dense<1.0> : tensor<4xf32>
    pipe.send %a {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    // expected-error @+1 {{'pipe.send' op sends a gradient that is not a pipe.grad placeholder}}
    pipe.send %a {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %l = nn.constant dense<0.0> : tensor<f32>
    pipe.loss %l : tensor<f32>
    pipe.return
  }
}

// -----

pipe.pipeline @placeholder_used attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<4xf32>):
    // expected-error @+1 {{'pipe.grad' op is used by something other than a gradient send}}
    %g = pipe.grad %x : tensor<4xf32>
    %l = nn.constant dense<0.0> : tensor<f32>
    pipe.loss %l : tensor<f32>
    pipe.return %g : tensor<4xf32>
  }
}

// -----

// Training updates the running statistics in place: their new values are
// not values of the program.
pipe.pipeline @running_statistics attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<2x3x4x4xf32>):
    %scale = pipe.param "bn.weight" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<3xf32>
    %bias = pipe.param "bn.bias" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<3xf32>
    %mean = pipe.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false, owner = 0, users = array<i64: 0>} : tensor<3xf32>
    %var = pipe.param "bn.running_var" {source = #nn.param_source<inline>, trainable = false, owner = 0, users = array<i64: 0>} : tensor<3xf32>
    // expected-error @+1 {{'nn.batch_norm' op uses its updated running statistics as values; training updates them in place}}
    %y, %new_mean, %new_var = nn.batch_norm %x, %scale, %bias, %mean, %var {training_mode = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    %s = nn.reduce_sum %new_mean {keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
    pipe.loss %s : tensor<f32>
    pipe.return %y : tensor<2x3x4x4xf32>
  }
}

// -----

// expected-error @+1 {{pipe-differentiate needs a pipe.pipeline (run pipe-split-stages first)}}
module {
  func.func @not_split(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// A recurrent layer is differentiated as its cells, which nn-expand-composites
// writes (the planning pipeline runs it before pipe-differentiate).
pipe.pipeline @recurrent attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<3x2x4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<1x5x4xf32>
    %r = pipe.param "r" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<1x5x5xf32>
    // expected-error @+1 {{'nn.rnn' op is differentiated as its unrolled cells: run nn-expand-composites before pipe-differentiate (the planning pipeline does)}}
    %y, %h = nn.rnn %x, %w, %r {hidden_size = 5 : i64} : (tensor<3x2x4xf32>, tensor<1x5x4xf32>, tensor<1x5x5xf32>) -> (tensor<3x1x2x5xf32>, tensor<1x2x5xf32>)
    %s = nn.reduce_sum %h {keepdims = 0 : i64} : (tensor<1x2x5xf32>) -> tensor<f32>
    pipe.loss %s : tensor<f32>
    pipe.return %y : tensor<3x1x2x5xf32>
  }
}
