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
