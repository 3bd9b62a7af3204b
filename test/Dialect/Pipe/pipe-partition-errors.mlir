// RUN: pipe-opt %s -split-input-file -verify-diagnostics -pipe-partition='stages=2 memory=1MB algo=madpipe'
// A memory size needs its unit: 80 alone would be 80 bytes.
// RUN: not pipe-opt %s -split-input-file -pipe-partition='stages=2 memory=80' 2>&1 | FileCheck %s --check-prefix=UNIT
// UNIT: error: '80' has no unit: write e.g. 80GB or 80GiB

// Nothing fits 1 MB per GPU: the error names the stage, the bytes it needs
// and the limit, then advises with numbers: the GPUs the parameter state
// alone needs (madpipe finds no plan on 4, 8 or 16 GPUs either), the saved
// activations a smaller micro-batch or bf16 would shrink, and that
// recomputation does not help.
// expected-error @+6 {{no plan fits 2 GPUs}}
// expected-note-re @+5 {{madpipe: infeasible: {{.*}} needs {{[0-9.]+}} MB on stage 0 (layer fc0, 2 micro-batches in flight), limit 1.00 MB}}
// expected-note @+4 {{advice: more GPUs: parameters and optimizer state alone need 33.55 MB, at least 34 GPUs of 1.00 MB}}
// expected-note @+3 {{advice: a smaller --micro-batch-size (now 256): activations saved for the backward pass are 2.10 MB per micro-batch and scale with it}}
// expected-note @+2 {{advice: --dtype=bf16 halves the saved activations (2.10 MB -> 1.05 MB per micro-batch)}}
// expected-note @+1 {{advice: --recompute=auto does not fit on 2 GPUs either (recomputation trades activations only)}}
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %w0 = nn.param "w0" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w0")
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<1024x1024xf32> loc("w1")
  %0 = nn.matmul %x, %w0 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc0")
  %1 = nn.matmul %0, %w1 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc1")
  return %1 : tensor<256x1024xf32>
}


// -----

// Every layer of the plan must hold an op to place: a function whose only op is
// a parameter (which each stage copies) has none, and that is an error rather
// than a plan nothing follows.
// expected-error @+1 {{layer 'w' of the plan has no operation to place}}
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4xf32> loc("w")
  return %w : tensor<4xf32>
}
