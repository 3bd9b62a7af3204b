// RUN: pipe-opt %s -verify-diagnostics -pipe-partition='stages=2 memory=1MB algo=madpipe'

// Nothing fits 1 MB per GPU: the error names the stage, the bytes it needs
// and the limit.
// expected-error @+2 {{no plan fits 2 stages}}
// expected-note-re @+1 {{madpipe: infeasible: {{.*}} needs {{[0-9.]+}} MB on stage 0 (layer fc0, 2 micro-batches in flight), limit 1.00 MB}}
func.func @main(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %w0 = nn.param "w0" {source = "inline"} : tensor<1024x1024xf32> loc("w0")
  %w1 = nn.param "w1" {source = "inline"} : tensor<1024x1024xf32> loc("w1")
  %0 = nn.matmul %x, %w0 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc0")
  %1 = nn.matmul %0, %w1 : (tensor<256x1024xf32>, tensor<1024x1024xf32>) -> tensor<256x1024xf32> loc("fc1")
  return %1 : tensor<256x1024xf32>
}
