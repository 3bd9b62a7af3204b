// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-schedule | FileCheck %s

// Two stages, three micro-batches, 1F1B with flush: stage 0 warms up with
// S - s - 1 = 1 extra forward, then alternates; every F of stage 1 is preceded
// by the receive of its activation, every B of stage 0 by its gradient. The
// actions use the vocabulary of plan.json, plus the tag of each transfer.
// CHECK-LABEL: pipe.pipeline @two
// CHECK: pipe.stage @stage0 attributes {actions = [#pipe.action<forward, mb = 0, stage = 0>, #pipe.transfer<send activation, mb = 0, from = 0, to = 1, tag = 0>, #pipe.action<forward, mb = 1, stage = 0>, #pipe.transfer<send activation, mb = 1, from = 0, to = 1, tag = 0>, #pipe.transfer<recv gradient, mb = 0, from = 1, to = 0, tag = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.action<forward, mb = 2, stage = 0>, #pipe.transfer<send activation, mb = 2, from = 0, to = 1, tag = 0>, #pipe.transfer<recv gradient, mb = 1, from = 1, to = 0, tag = 0>, #pipe.action<backward, mb = 1, stage = 0>, #pipe.transfer<recv gradient, mb = 2, from = 1, to = 0, tag = 0>, #pipe.action<backward, mb = 2, stage = 0>, #pipe.step<reduce_tied_gradients>, #pipe.step<optimizer_step>]
// CHECK: pipe.stage @stage1 attributes {actions = [#pipe.transfer<recv activation, mb = 0, from = 0, to = 1, tag = 0>, #pipe.action<forward, mb = 0, stage = 1>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.transfer<send gradient, mb = 0, from = 1, to = 0, tag = 0>, #pipe.transfer<recv activation, mb = 1, from = 0, to = 1, tag = 0>, #pipe.action<forward, mb = 1, stage = 1>, #pipe.action<backward, mb = 1, stage = 1>, #pipe.transfer<send gradient, mb = 1, from = 1, to = 0, tag = 0>, #pipe.transfer<recv activation, mb = 2, from = 0, to = 1, tag = 0>, #pipe.action<forward, mb = 2, stage = 1>, #pipe.action<backward, mb = 2, stage = 1>, #pipe.transfer<send gradient, mb = 2, from = 1, to = 0, tag = 0>, #pipe.step<reduce_tied_gradients>, #pipe.step<optimizer_step>]
pipe.pipeline @two attributes {num_stages = 2, microbatches = 3, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %a, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// GPipe: all forwards, then all backwards.
// CHECK-LABEL: pipe.pipeline @gpipe
// CHECK: pipe.stage @stage0 attributes {actions = [#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<forward, mb = 1, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.action<backward, mb = 1, stage = 0>, #pipe.step<optimizer_step>]
pipe.pipeline @gpipe attributes {num_stages = 1, microbatches = 2, schedule = "gpipe"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

// A plan whose action list misses the backward of micro-batch 1 is rejected
// by the partitioner's checker.
// expected-error @+1 {{the schedule fails the partitioner's checker}}
pipe.pipeline @broken attributes {num_stages = 1, microbatches = 2, schedule = "1f1b", plan = #pipe.plan<stages = 1, gpus = 1, microbatches = 2, actions = [[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.action<forward, mb = 1, stage = 0>]]>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

// A diamond: stages 1 and 2 both read stage 0 and feed stage 3, and share
// GPU 1 (a general allocation). GPU 1 runs stage 2 before stage 1, which the
// stages' real dependencies allow (a chain 0 -> 1 -> 2 -> 3 would not): the
// checker works on the stage graph the sends define.
// CHECK-LABEL: pipe.pipeline @diamond
// CHECK: pipe.stage @stage1 attributes {actions = [#pipe.transfer<recv activation, mb = 0, from = 0, to = 1, tag = 0>, #pipe.action<forward, mb = 0, stage = 1>, #pipe.transfer<send activation, mb = 0, from = 1, to = 3, tag = 2>, #pipe.transfer<recv gradient, mb = 0, from = 3, to = 1, tag = 2>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.transfer<send gradient, mb = 0, from = 1, to = 0, tag = 0>, #pipe.step<optimizer_step>]
// CHECK: pipe.stage @stage2 attributes {actions = [#pipe.transfer<recv activation, mb = 0, from = 0, to = 2, tag = 1>, #pipe.action<forward, mb = 0, stage = 2>, #pipe.transfer<send activation, mb = 0, from = 2, to = 3, tag = 3>, #pipe.transfer<recv gradient, mb = 0, from = 3, to = 2, tag = 3>, #pipe.action<backward, mb = 0, stage = 2>, #pipe.transfer<send gradient, mb = 0, from = 2, to = 0, tag = 1>, #pipe.step<optimizer_step>]
pipe.pipeline @diamond attributes {num_stages = 4, microbatches = 1, schedule = "1f1b", plan = #pipe.plan<stages = 4, gpus = 3, microbatches = 1, actions = [[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>], [#pipe.action<forward, mb = 0, stage = 2>, #pipe.action<forward, mb = 0, stage = 1>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.action<backward, mb = 0, stage = 2>], [#pipe.action<forward, mb = 0, stage = 3>, #pipe.action<backward, mb = 0, stage = 3>]]>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    pipe.send %x {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    pipe.send %x {peer = 2, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g1 = pipe.recv {peer = 2, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %g0 = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %y = nn.relu %a : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 3, tag = 2, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %gy = pipe.recv {peer = 3, tag = 2, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 0, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %y = nn.relu %a : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 3, tag = 3, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %gy = pipe.recv {peer = 3, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage3 attributes {index = 3, device = 2, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 1, tag = 2, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %b = pipe.recv {peer = 2, tag = 3, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %y = nn.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %gb = pipe.grad %b : tensor<4xf32>
    pipe.send %gb {peer = 2, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 1, tag = 2, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// The same diamond with GPU 1 running stage 1's backward before stage 2's
// forward: stage 1's gradient comes from stage 3, which waits for stage 2.
// expected-error @+1 {{the schedule fails the partitioner's checker: deadlock: GPU 0 blocks at B0@s0 (needs B0@s1); GPU 1 blocks at B0@s1 (needs B0@s3); GPU 2 blocks at F0@s3 (needs F0@s2);}}
pipe.pipeline @diamond_deadlock attributes {num_stages = 4, microbatches = 1, schedule = "1f1b", plan = #pipe.plan<stages = 4, gpus = 3, microbatches = 1, actions = [[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>], [#pipe.action<forward, mb = 0, stage = 1>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.action<forward, mb = 0, stage = 2>, #pipe.action<backward, mb = 0, stage = 2>], [#pipe.action<forward, mb = 0, stage = 3>, #pipe.action<backward, mb = 0, stage = 3>]]>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    pipe.send %x {peer = 1, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    pipe.send %x {peer = 2, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g1 = pipe.recv {peer = 2, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    %g0 = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    pipe.send %a {peer = 3, tag = 2, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %gy = pipe.recv {peer = 3, tag = 2, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.send %gy {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 0, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    pipe.send %a {peer = 3, tag = 3, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %gy = pipe.recv {peer = 3, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.send %gy {peer = 0, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage3 attributes {index = 3, device = 2, model_inputs = array<i64>, model_outputs = array<i64>} {
    %a = pipe.recv {peer = 1, tag = 2, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %b = pipe.recv {peer = 2, tag = 3, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    pipe.send %b {peer = 2, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.send %a {peer = 1, tag = 2, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
}

// -----

// Stages cut across parallel branches: stage 1 does not consume stage 0's
// output, both feed stage 2. The plan runs stage 1's forwards ahead of stage
// 0's, which is valid for this stage graph (but would deadlock if stages were
// a chain: F1@s1 waiting for F1@s0, itself behind B0@s0 waiting for B0@s1).
// The checker judges the plan on the pipeline's own send/recv edges.
// CHECK-LABEL: pipe.pipeline @branches
// CHECK: pipe.stage @stage1 attributes {actions = [#pipe.action<forward, mb = 0, stage = 1>, #pipe.transfer<send activation, mb = 0, from = 1, to = 2, tag = 1>, #pipe.action<forward, mb = 1, stage = 1>, #pipe.transfer<send activation, mb = 1, from = 1, to = 2, tag = 1>, #pipe.transfer<recv gradient, mb = 0, from = 2, to = 1, tag = 1>, #pipe.action<backward, mb = 0, stage = 1>
pipe.pipeline @branches attributes {num_stages = 3, microbatches = 2, schedule = "1f1b", plan = #pipe.plan<stages = 3, gpus = 3, microbatches = 2, actions = [[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.action<forward, mb = 1, stage = 0>, #pipe.action<backward, mb = 1, stage = 0>], [#pipe.action<forward, mb = 0, stage = 1>, #pipe.action<forward, mb = 1, stage = 1>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.action<backward, mb = 1, stage = 1>], [#pipe.action<forward, mb = 0, stage = 2>, #pipe.action<backward, mb = 0, stage = 2>, #pipe.action<forward, mb = 1, stage = 2>, #pipe.action<backward, mb = 1, stage = 2>]]>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64: 1>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 2, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %b = pipe.recv {peer = 1, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %y = nn.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    %gb = pipe.grad %b : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.send %gb {peer = 1, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// A plan that does deadlock on that graph is still refused: stage 2 runs the
// backward of micro-batch 1 before its forward.
// expected-error @+1 {{the schedule fails the partitioner's checker: deadlock: GPU 0 blocks at B0@s0 (needs B0@s2)}}
pipe.pipeline @branches_deadlock attributes {num_stages = 3, microbatches = 2, schedule = "1f1b", plan = #pipe.plan<stages = 3, gpus = 3, microbatches = 2, actions = [[#pipe.action<forward, mb = 0, stage = 0>, #pipe.action<backward, mb = 0, stage = 0>, #pipe.action<forward, mb = 1, stage = 0>, #pipe.action<backward, mb = 1, stage = 0>], [#pipe.action<forward, mb = 0, stage = 1>, #pipe.action<forward, mb = 1, stage = 1>, #pipe.action<backward, mb = 0, stage = 1>, #pipe.action<backward, mb = 1, stage = 1>], [#pipe.action<forward, mb = 0, stage = 2>, #pipe.action<backward, mb = 1, stage = 2>, #pipe.action<forward, mb = 1, stage = 2>, #pipe.action<backward, mb = 0, stage = 2>]]>} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64: 1>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 2, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %b = pipe.recv {peer = 1, tag = 1, kind = #pipe.transfer_kind<activation>} : tensor<4xf32>
    %y = nn.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    %gb = pipe.grad %b : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.send %gb {peer = 1, tag = 1, kind = #pipe.transfer_kind<gradient>} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}
