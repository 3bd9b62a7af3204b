// RUN: pipe-opt %s --test-print-pipe-chain='target=h100 dtype=fp32 optimizer=adam' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-chain='target=h100 dtype=fp32 json=1' -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: pipe-opt %s --test-print-pipe-chain='target=v100 dtype=fp16 json=1' -o /dev/null | FileCheck %s --check-prefix=V100

// A residual block: conv1 -> bn (fused relu) -> conv2 -> add(skip) (fused into
// conv2) -> flatten (free) -> gemm.
// Layers: each kernel-launching op starts one; fused and free ops join their
// kernel's / operand's layer; parameters join their first user's layer.
//   0 conv1 (w1), 1 bn + relu (scale, bias, buffers), 2 conv2 + add + flatten (w2),
//   3 fc (wf, bf).
// Cut sets (exact, from def-use): y1 (layer 0) is read by layer 1 and by the
// add in layer 2 (the skip): one tensor with consumers 1,2 of 1*4*4*4*4 = 256
// bytes; r (layer 1) -> 2 (256 bytes); the flattened sum (layer 2) -> 3 (256).
// W(l) in bytes at fp32: conv1 4*4*1*1*4 = 64; bn 8*4 = 32 + buffers 32 / 4
// (Adam fp32: state multiplier 16 / 4 = 4) = 40; conv2 4*4*3*3*4 = 576;
// fc (64*2 + 2)*4 = 520.
// Saved (fp32): conv1 keeps x (256); bn keeps y1 (256) + 32 bytes of
// statistics: 288; relu keeps r (256) and conv2 keeps r too: r is a shared
// saved value of layers 1 and 2, in neither's saved bytes, which each stage
// holding one of them keeps once (a cut between layers 1 and 2 makes two
// copies); fc keeps the flattened sum (256).
// CHECK-LABEL: chain @block layers=4 tensors=3 state_multiplier=4
// CHECK-NEXT: layer 0 'conv1' nodes=conv1 params=64 saved=256 out=256
// CHECK-NEXT: layer 1 'bn' nodes=bn,relu params=40 saved=288 out=256
// CHECK-NEXT: layer 2 'conv2' nodes=conv2,skip,flatten params=576 saved=0 out=256
// CHECK-NEXT: layer 3 'fc' nodes=fc params=520 saved=256 out=0
// CHECK-NEXT: tensor 0 -> 1,2 bytes=256
// CHECK-NEXT: tensor 1 -> 2 bytes=256
// CHECK-NEXT: tensor 2 -> 3 bytes=256
// CHECK-NEXT: shared saved 1,2 bytes=256
// Carried: y1 is made by layer 0 and read last by layer 2 (the skip), so layer 1
// runs while it is live. In the forward bn keeps it (saved, not workspace); in
// the backward the skip's gradient of y1 (256) is held while layer 1's backward
// runs, then summed with bn's.
// CHECK-NEXT: carried layer 1 forward=0 backward=256
// JSON: "node_ids": [
// JSON-NEXT: "conv1"
// JSON: "name": "block"
// JSON: "consumers": [
// JSON-NEXT: 1,
// JSON-NEXT: 2
// JSON: "state_multiplier": 4.0
// The built-in target's links reach the problem per direction, in bytes/s.
// V100 (DGX-1/DGX-2: one 100 Gb/s EDR port per two GPUs): 50 Gb/s per GPU /
// 8 = 6.25e9 B/s, latency 10 us = 0.01 ms; NVLink 2 300 GB/s bidirectional /
// 2 = 150e9 B/s; memory 32 GiB = 32 * 1073741824 = 34359738368 bytes.
// V100: "platform": {
// V100: "inter_node": {
// V100-NEXT: "bandwidth_bytes_per_s": 6250000000.0,
// V100: "intra_node": {
// V100-NEXT: "bandwidth_bytes_per_s": 150000000000.0,
// V100: "memory_bytes_per_gpu": 34359738368.0
func.func @block(%x: tensor<1x4x4x4xf32>) -> tensor<1x2xf32> {
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<4x4x1x1xf32>
  %scale = nn.param "bn.weight" {source = #nn.param_source<inline>} : tensor<4xf32>
  %bias = nn.param "bn.bias" {source = #nn.param_source<inline>} : tensor<4xf32>
  %mean = nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %var = nn.param "bn.running_var" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %w2 = nn.param "w2" {source = #nn.param_source<inline>} : tensor<4x4x3x3xf32>
  %wf = nn.param "fc.weight" {source = #nn.param_source<inline>} : tensor<2x64xf32>
  %bf = nn.param "fc.bias" {source = #nn.param_source<inline>} : tensor<2xf32>
  %y1 = nn.conv %x, %w1 : (tensor<1x4x4x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x4x4xf32> loc("conv1")
  %b, %rm, %rv = nn.batch_norm %y1, %scale, %bias, %mean, %var {training_mode = 1 : i64} : (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<1x4x4x4xf32>, tensor<4xf32>, tensor<4xf32>) loc("bn")
  %r = nn.relu %b : (tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> loc("relu")
  %y2 = nn.conv %r, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x4xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x4x4xf32> loc("conv2")
  %s = nn.add %y2, %y1 : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> loc("skip")
  %f = nn.flatten %s : (tensor<1x4x4x4xf32>) -> tensor<1x64xf32> loc("flatten")
  %o = nn.gemm %f, %wf, %bf {transB = 1 : i64} : (tensor<1x64xf32>, tensor<2x64xf32>, tensor<2xf32>) -> tensor<1x2xf32> loc("fc")
  return %o : tensor<1x2xf32>
}

// Tied weights: the embedding table is read by the gather (layer 0) and by the
// output projection (layer 2, transB). It joins its first user's layer, which
// does not keep it: 16*4*4 = 256 bytes leave layer 0's parameters for a shared
// parameter of layers 0 and 2, owned by the first stage reading it and copied
// (with its gradient) on every other GPU that reads it.
// CHECK-LABEL: chain @tied layers=3
// CHECK-NEXT: layer 0 'embed' nodes=embed params=0
// CHECK-NEXT: layer 1 'mid' nodes=mid params=64
// CHECK-NEXT: layer 2 'head' nodes=head params=0
// CHECK: shared parameter 0,2 bytes=256
func.func @tied(%ids: tensor<2xi64>) -> tensor<2x16xf32> {
  %wte = nn.param "wte" {source = #nn.param_source<inline>} : tensor<16x4xf32>
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<4x4xf32>
  %e = nn.gather %wte, %ids : (tensor<16x4xf32>, tensor<2xi64>) -> tensor<2x4xf32> loc("embed")
  %h = nn.matmul %e, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("mid")
  %o = nn.gemm %h, %wte {transB = 1 : i64} : (tensor<2x4xf32>, tensor<16x4xf32>) -> tensor<2x16xf32> loc("head")
  return %o : tensor<2x16xf32>
}
