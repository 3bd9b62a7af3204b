// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-schedule | FileCheck %s

// Two stages, three micro-batches, 1F1B with flush: stage 0 warms up with
// S - s - 1 = 1 extra forward, then alternates; every F of stage 1 is preceded
// by the receive of its activation, every B of stage 0 by its gradient.
// CHECK-LABEL: pipe.pipeline @two
// CHECK: pipe.stage @stage0 attributes {actions = ["forward mb=0", "send activation tag=0 to=1 mb=0", "forward mb=1", "send activation tag=0 to=1 mb=1", "recv gradient tag=0 from=1 mb=0", "backward mb=0", "forward mb=2", "send activation tag=0 to=1 mb=2", "recv gradient tag=0 from=1 mb=1", "backward mb=1", "recv gradient tag=0 from=1 mb=2", "backward mb=2", "reduce tied-parameter gradients", "optimizer step"]
// CHECK: pipe.stage @stage1 attributes {actions = ["recv activation tag=0 from=0 mb=0", "forward mb=0", "backward mb=0", "send gradient tag=0 to=0 mb=0", "recv activation tag=0 from=0 mb=1", "forward mb=1", "backward mb=1", "send gradient tag=0 to=0 mb=1", "recv activation tag=0 from=0 mb=2", "forward mb=2", "backward mb=2", "send gradient tag=0 to=0 mb=2", "reduce tied-parameter gradients", "optimizer step"]
pipe.pipeline @two attributes {num_stages = 2, microbatches = 3, schedule = "1f1b"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %w = pipe.param "w" {source = "inline", owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 1, tag = 0, kind = "activation"} : tensor<4xf32>
    %g = pipe.recv {peer = 1, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = "activation"} : tensor<4xf32>
    %w = pipe.param "w" {source = "inline", owner = 0, users = array<i64: 0, 1>} : tensor<4xf32>
    %y = nn.mul %a, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// GPipe: all forwards, then all backwards.
// CHECK-LABEL: pipe.pipeline @gpipe
// CHECK: pipe.stage @stage0 attributes {actions = ["forward mb=0", "forward mb=1", "backward mb=0", "backward mb=1", "optimizer step"]
pipe.pipeline @gpipe attributes {num_stages = 1, microbatches = 2, schedule = "gpipe"} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

// A plan whose action list misses the backward of micro-batch 1 is rejected
// by the partitioner's checker.
// expected-error @+1 {{the schedule fails the partitioner's checker}}
pipe.pipeline @broken attributes {num_stages = 1, microbatches = 2, schedule = "1f1b", plan = {actions = [["F0@s0", "B0@s0", "F1@s0"]]}} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
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
// CHECK: pipe.stage @stage1 attributes {actions = ["forward mb=0", "send activation tag=1 to=2 mb=0", "forward mb=1", "send activation tag=1 to=2 mb=1", "recv gradient tag=1 from=2 mb=0", "backward mb=0"
pipe.pipeline @branches attributes {num_stages = 3, microbatches = 2, schedule = "1f1b", plan = {actions = [["F0@s0", "B0@s0", "F1@s0", "B1@s0"], ["F0@s1", "F1@s1", "B0@s1", "B1@s1"], ["F0@s2", "B0@s2", "F1@s2", "B1@s2"]]}} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 0, kind = "activation"} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64: 1>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 1, kind = "activation"} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 1, kind = "gradient"} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 2, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = "activation"} : tensor<4xf32>
    %b = pipe.recv {peer = 1, tag = 1, kind = "activation"} : tensor<4xf32>
    %y = nn.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    %gb = pipe.grad %b : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.send %gb {peer = 1, tag = 1, kind = "gradient"} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}

// -----

// A plan that does deadlock on that graph is still refused: stage 2 runs the
// backward of micro-batch 1 before its forward.
// expected-error @+1 {{the schedule fails the partitioner's checker: deadlock: GPU 0 blocks at B0@s0 (needs B0@s2)}}
pipe.pipeline @branches_deadlock attributes {num_stages = 3, microbatches = 2, schedule = "1f1b", plan = {actions = [["F0@s0", "B0@s0", "F1@s0", "B1@s0"], ["F0@s1", "F1@s1", "B0@s1", "B1@s1"], ["F0@s2", "B1@s2", "F1@s2", "B0@s2"]]}} {
  pipe.stage @stage0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 0, kind = "activation"} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage1 attributes {index = 1, device = 1, model_inputs = array<i64: 1>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<4xf32>):
    %y = nn.relu %x : (tensor<4xf32>) -> tensor<4xf32>
    pipe.send %y {peer = 2, tag = 1, kind = "activation"} : tensor<4xf32>
    %g = pipe.recv {peer = 2, tag = 1, kind = "gradient"} : tensor<4xf32>
    pipe.return
  }
  pipe.stage @stage2 attributes {index = 2, device = 2, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    %a = pipe.recv {peer = 0, tag = 0, kind = "activation"} : tensor<4xf32>
    %b = pipe.recv {peer = 1, tag = 1, kind = "activation"} : tensor<4xf32>
    %y = nn.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %ga = pipe.grad %a : tensor<4xf32>
    %gb = pipe.grad %b : tensor<4xf32>
    pipe.send %ga {peer = 0, tag = 0, kind = "gradient"} : tensor<4xf32>
    pipe.send %gb {peer = 1, tag = 1, kind = "gradient"} : tensor<4xf32>
    pipe.return %y : tensor<4xf32>
  }
}
