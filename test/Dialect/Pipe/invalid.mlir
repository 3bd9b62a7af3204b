// RUN: pipe-opt %s -split-input-file -verify-diagnostics

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[pipeline_c1] index 2 is out of range for 2 stages}}
  pipe.stage @s attributes {index = 2, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

// expected-error @+1 {{[pipeline_c1] stage 1 is missing}}
pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %c = nn.constant dense<1.0> : tensor<2xf32>
    // expected-error @+1 {{[pipeline_c2] has no matching pipe.recv in stage 1}}
    pipe.send %c {peer = 1, tag = 7, kind = #pipe.transfer_kind<activation>} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %c = nn.constant dense<1.0> : tensor<2xf32>
    // expected-error @+1 {{[pipeline_c3] sends 'tensor<2xf32>' but the matching receive expects 'tensor<3xf32>'}}
    pipe.send %c {peer = 1, tag = 7, kind = #pipe.transfer_kind<activation>} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-note @+1 {{the receive}}
    %r = pipe.recv {peer = 0, tag = 7, kind = #pipe.transfer_kind<activation>} : tensor<3xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-error @+1 {{[pipeline_c2] has no matching pipe.send in stage 0}}
    %r = pipe.recv {peer = 0, tag = 3, kind = #pipe.transfer_kind<gradient>} : tensor<3xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %c = nn.constant dense<1.0> : tensor<2xf32>
    // [send_c1]: the kind is a #pipe.transfer_kind (activation or gradient).
    // expected-error @+1 {{attribute 'kind' failed to satisfy constraint: what a transfer carries}}
    pipe.send %c {peer = 1, tag = 0, kind = "activation"} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    %c = nn.constant dense<1.0> : tensor<2xf32>
    // expected-error @+1 {{[send_c2] peer stage 0 is the stage itself}}
    pipe.send %c {peer = 0, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    // [recv_c1]: the kind is a #pipe.transfer_kind (activation or gradient).
    // expected-error @+2 {{expected ::pipe::pipeline::TransferKind to be one of: activation, gradient}}
    // expected-error @+1 {{failed to parse Pipe_TransferKindAttr parameter 'value'}}
    %r = pipe.recv {peer = 1, tag = 0, kind = #pipe.transfer_kind<other>} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-error @+1 {{[recv_c2] peer stage 5 does not exist}}
    %r = pipe.recv {peer = 5, tag = 0, kind = #pipe.transfer_kind<activation>} : tensor<2xf32>
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    // [param_c1]: the source is an #nn.param_source.
    // expected-error @+1 {{attribute 'source' failed to satisfy constraint: where the parameter's values are stored (#nn.param_source)}}
    %w = pipe.param "w" {source = "file", owner = 0, users = array<i64: 0>} : tensor<2xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-error @+1 {{[param_c2] owner stage 1 is not among its users}}
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 1, users = array<i64: 0>} : tensor<2xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 2, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
  pipe.stage @s1 attributes {index = 1, device = 1, model_inputs = array<i64>, model_outputs = array<i64>} {
    // expected-error @+1 {{[param_c3] stage 1 uses the parameter but is not among its users}}
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<2xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c1] index and device must be non-negative}}
  pipe.stage @s0 attributes {index = 0, device = -1, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c2] has 0 arguments but model_inputs lists 1}}
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c3] returns 0 values but model_outputs lists 1}}
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64: 0>} {
    pipe.return
  }
}

// -----

// expected-error @+1 {{[pipeline_c1] num_stages must be at least 1, got -1}}
pipe.pipeline @p attributes {num_stages = -1, microbatches = 1, schedule = "1f1b"} {
}

// -----

// expected-error @+1 {{[pipeline_c4] microbatches must be at least 1, got 0}}
pipe.pipeline @p attributes {num_stages = 1, microbatches = 0, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c4] keeps 1 values for a backward it does not have}}
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<2xf32>):
    pipe.return saved(%x : tensor<2xf32>)
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c4] the backward's arguments must be the forward's saved values: 1 arguments for 1 saved values, or their types differ}}
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<2xf32>):
    pipe.return saved(%x : tensor<2xf32>)
  } backward {
  ^bb0(%kept: tensor<3xf32>):
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  // expected-error @+1 {{[stage_c5] the backward must end with a pipe.return of no values}}
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  } backward {
    %g = pipe.output_grad 0 : tensor<2xf32>
    pipe.return %g : tensor<2xf32>
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64: 0>, model_outputs = array<i64>} {
  ^bb0(%x: tensor<2xf32>):
    // expected-error @+1 {{[loss_c1] the loss must be a scalar float tensor, not 'tensor<2xf32>'}}
    pipe.loss %x : tensor<2xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  } backward {
    %g = pipe.output_grad 0 : tensor<2xf32>
    // expected-error @+1 {{[accumulate_grad_c1] accumulates into a value that is not a pipe.param}}
    pipe.accumulate_grad %g into %g : tensor<2xf32>
    pipe.return
  }
}

// -----

pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  } backward {
    %g = pipe.output_grad 0 : tensor<2xf32>
    %m = pipe.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false, owner = 0, users = array<i64: 0>} : tensor<2xf32>
    // expected-error @+1 {{[accumulate_grad_c1] parameter 'bn.running_mean' is not trainable}}
    pipe.accumulate_grad %g into %m : tensor<2xf32>
    pipe.return
  }
}

// -----

// accumulate_grad_c2: the gradient has the parameter's type. The op's
// AllTypesMatch trait reports it, before the verifier's own message.
pipe.pipeline @p attributes {num_stages = 1, microbatches = 1, schedule = "1f1b"} {
  pipe.stage @s0 attributes {index = 0, device = 0, model_inputs = array<i64>, model_outputs = array<i64>} {
    pipe.return
  } backward {
    %g = pipe.output_grad 0 : tensor<2xf16>
    %w = pipe.param "w" {source = #nn.param_source<inline>, owner = 0, users = array<i64: 0>} : tensor<2xf32>
    // expected-error @+1 {{failed to verify that all of {gradient, param} have same type}}
    "pipe.accumulate_grad"(%g, %w) : (tensor<2xf16>, tensor<2xf32>) -> ()
    pipe.return
  }
}

// -----

// expected-error @+1 {{plan: stages, gpus, microbatches and replicas must be at least 1}}
module attributes {pipe.plan = #pipe.plan<stages = 2, gpus = 2, microbatches = 1, replicas = 0>} {
}

// -----

// expected-error @+1 {{plan: replica_layout must be pipeline-major or stage-major, got 'diagonal'}}
module attributes {pipe.plan = #pipe.plan<stages = 2, gpus = 2, replicas = 2, replica_layout = "diagonal">} {
}
