// RUN: pipe-opt %s | pipe-opt | FileCheck %s
// RUN: pipe-opt %s --mlir-print-op-generic | pipe-opt | FileCheck %s

// CHECK-LABEL: pipe.pipeline @model
// CHECK-SAME: attributes {microbatches = 8 : i64, num_stages = 2 : i64, plan = #pipe.plan<stages = 2, gpus = 2, microbatches = 8, period_ms = 1.25, gpu_of_stage = [0, 1], stage_metrics = [#pipe.stage_metrics<time_ms = 0.5, memory_bytes = 1024, memory_limit_bytes = 4096>, #pipe.stage_metrics<time_ms = 0.75, memory_bytes = 2048>], actions = {{\[}}[#pipe.action<forward, mb = 0, stage = 0>], [#pipe.action<forward, mb = 0, stage = 1>]]>, schedule = "1f1b"}
pipe.pipeline @model attributes {num_stages = 2, microbatches = 8, schedule = "1f1b", plan = #pipe.plan<period_ms = 1.25, stages = 2, gpus = 2, microbatches = 8, gpu_of_stage = [0, 1], stage_metrics = [#pipe.stage_metrics<time_ms = 0.5, memory_bytes = 1024, memory_limit_bytes = 4096>, #pipe.stage_metrics<time_ms = 0.75, memory_bytes = 2048>], actions = [[#pipe.action<forward, mb = 0, stage = 0>], [#pipe.action<forward, mb = 0, stage = 1>]]>} {
  // CHECK: pipe.stage @stage0 attributes {actions = [#pipe.transfer<recv gradient, mb = 0, from = 1, to = 0, tag = 0>, #pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.step<optimizer_step>], device = 0 : i64, index = 0 : i64, model_inputs = array<i64: 0>, model_outputs = array<i64>}
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>, actions = [#pipe.transfer<recv gradient, mb = 0, from = 1, to = 0, tag = 0>, #pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.step<optimizer_step>]} {
  ^bb0(%x: tensor<4xf32>):
    // CHECK: pipe.param "embed" {length = 16 : i64, offset = 0 : i64, owner = 0 : i64, source = #nn.param_source<file>, users = array<i64: 0, 1>} : tensor<4xf32>
    %w = pipe.param "embed" {source = #nn.param_source<file>, offset = 0, length = 16, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // CHECK: pipe.send %{{.*}} {kind = #pipe.transfer_kind<activation>, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    pipe.send %y {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    // CHECK: pipe.recv {kind = #pipe.transfer_kind<gradient>, peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    // CHECK: pipe.return
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %w = pipe.param "embed" {source = #nn.param_source<file>, offset = 0, length = 16, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.add %a, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    // CHECK: pipe.grad %{{.*}} : tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    // CHECK: pipe.return %{{.*}} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}


// Training: the loss and the optimizer on the pipeline, a backward region per
// stage whose arguments are the forward's saved values, labels, the loss,
// output gradients and parameter gradients.
// CHECK-LABEL: pipe.pipeline @training
// CHECK-SAME: training = #pipe.training<loss = cross_entropy, optimizer = adamw, lr = 0.0003, momentum = 0.9, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1>
pipe.pipeline @training attributes {num_stages = 1, microbatches = 4, schedule = "1f1b",
    training = #pipe.training<loss = cross_entropy, optimizer = adamw, lr = 0.0003, momentum = 0.9, beta1 = 0.9, beta2 = 0.95, eps = 1.0e-08, weight_decay = 0.1>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64: 0>} {
  ^bb0(%x: tensor<2x4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4x4xf32>
    %y = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // CHECK: %[[LABELS:.*]] = pipe.label 0 {range = 4 : i64} : tensor<2xi64>
    %labels = pipe.label 0 {range = 4} : tensor<2xi64>
    %loss, %log_prob = nn.softmax_cross_entropy_loss %y, %labels : (tensor<2x4xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x4xf32>)
    // CHECK: pipe.loss %{{.*}} : tensor<f32>
    pipe.loss %loss : tensor<f32>
    // CHECK: pipe.return %{{.*}} : tensor<2x4xf32> saved(%{{.*}}, %[[LABELS]], %{{.*}} : tensor<2x4xf32>, tensor<2xi64>, tensor<2x4xf32>)
    pipe.return %y : tensor<2x4xf32> saved(%log_prob, %labels, %x : tensor<2x4xf32>, tensor<2xi64>, tensor<2x4xf32>)
  // CHECK: } backward {
  // CHECK-NEXT: ^bb0(%[[LOGP:.*]]: tensor<2x4xf32>, %[[L:.*]]: tensor<2xi64>, %[[X:.*]]: tensor<2x4xf32>):
  } backward {
  ^bb0(%lp: tensor<2x4xf32>, %l: tensor<2xi64>, %xs: tensor<2x4xf32>):
    %one = nn.constant dense<1.0> : tensor<f32>
    // CHECK: %[[DY:.*]] = nn.softmax_cross_entropy_loss_grad %{{.*}}, %[[LOGP]], %[[L]]
    %dy = nn.softmax_cross_entropy_loss_grad %one, %lp, %l : (tensor<f32>, tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    // CHECK: %[[DW:.*]] = nn.gemm %[[X]], %[[DY]] {transA = 1 : i64}
    %dw = nn.gemm %xs, %dy {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
    // CHECK: %[[W:.*]] = pipe.param "w"
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4x4xf32>
    // CHECK: pipe.accumulate_grad %[[DW]] into %[[W]] : tensor<4x4xf32>
    pipe.accumulate_grad %dw into %w : tensor<4x4xf32>
    // CHECK: pipe.return{{$}}
    pipe.return
  }
}


// loss = none: the gradient of each model output is an input of the backward.
// CHECK-LABEL: pipe.pipeline @no_loss
// CHECK-SAME: training = #pipe.training<loss = none, optimizer = sgd, lr = 0.1, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>
pipe.pipeline @no_loss attributes {num_stages = 1, microbatches = 1, schedule = "1f1b",
    training = #pipe.training<loss = none, optimizer = sgd, lr = 0.1, momentum = 0.0, beta1 = 0.9, beta2 = 0.999, eps = 1.0e-08, weight_decay = 0.0>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    pipe.return %w : tensor<4xf32>
  } backward {
    // CHECK: %[[G:.*]] = pipe.output_grad 0 : tensor<4xf32>
    %g = pipe.output_grad 0 : tensor<4xf32>
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<4xf32>
    // CHECK: pipe.accumulate_grad %[[G]] into
    pipe.accumulate_grad %g into %w : tensor<4xf32>
    pipe.return
  }
}
