// RUN: pipe-opt %s -split-input-file -verify-diagnostics -test-check-saved-values -o /dev/null | FileCheck %s

// test-check-saved-values itself: a stage whose saved values differ from the
// memory model's is reported, with an error at the op concerned.

// The relu's gradient reads its output, which the memory model charges; the
// stage does not keep it.
// CHECK: stage 0: keeps 0 values, 0 bytes; memory model 16 bytes: DIFFERENT
pipe.pipeline @missing attributes {num_stages = 1, microbatches = 1, schedule = "1f1b", training = #pipe.training<loss = none, optimizer = sgd, lr = 0.1, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    %h = nn.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // expected-error @+1 {{the memory model keeps a value of type 'tensor<4xf32>' for this op's backward, but the program does not}}
    %y = nn.relu %h : (tensor<4xf32>) -> tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  } backward {
    %dy = pipe.output_grad 0 : tensor<4xf32>
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    pipe.accumulate_grad %dy into %w : tensor<4xf32>
    pipe.return
  }
}

// -----

// The add's gradient reads nothing, but the stage keeps its result.
// CHECK: stage 0: keeps 1 values, 16 bytes; memory model 0 bytes: DIFFERENT
pipe.pipeline @extra attributes {num_stages = 1, microbatches = 1, schedule = "1f1b", training = #pipe.training<loss = none, optimizer = sgd, lr = 0.1, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    // expected-error @+1 {{the program keeps a value of type 'tensor<4xf32>' that the memory model does not charge}}
    %h = nn.add %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    pipe.return %h : tensor<4xf32> saved(%h : tensor<4xf32>)
  } backward {
  ^bb0(%kept: tensor<4xf32>):
    %dy = pipe.output_grad 0 : tensor<4xf32>
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    pipe.accumulate_grad %dy into %w : tensor<4xf32>
    pipe.return
  }
}
