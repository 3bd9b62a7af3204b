// RUN: pipe-opt %s --test-print-pipe-memory -o /dev/null | FileCheck %s

// The memory model runs each op's gradient rule into a block of its own to see
// what it allocates besides the gradients it gives (measureGradientRule).
//
// A batched matmul s = a @ t (a: 2x4x8, t: 2x8x4) gives da = ds @ t^T and
// dt = a^T @ ds: each transposes one operand first, a temporary of 256 bytes
// freed before the other is made, so 256 at the peak; both gradients are new
// allocations. The transpose's rule gives da = dt^T, new too. The add passes
// its dy on to both operands: nothing allocated. The multiply by the parameter
// allocates the parameter's gradient (x needs none).
// CHECK-LABEL: memory @attention
// CHECK: rule 'scale' nn.mul temporaries=0 allocates=operand1{{$}}
// CHECK-NEXT: rule 'keys' nn.transpose temporaries=0 allocates=operand0{{$}}
// CHECK-NEXT: rule 'scores' nn.matmul temporaries=256 allocates=operand0,operand1{{$}}
// CHECK-NOT: rule 'residual'
//
// Backward peak, at the matmul's rule: ds (128), its temporary (256), da and dt
// (256 each): 896. At the transpose's rule: a's gradient so far (256, from the
// matmul), dt (256) and the partial dt^T (256) while the transpose runs; dt is
// read for the last time there and freed before the sum (256) is made, so 768.
// CHECK: activations saved=768 fwd_peak=256 bwd_peak=896
func.func @attention(%x: tensor<2x4x8xf32>) -> tensor<2x4x4xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<2x4x8xf32>
  %a = nn.mul %x, %w : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("scale")
  %t = nn.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32> loc("keys")
  %s = nn.matmul %a, %t : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32> loc("scores")
  %r = nn.add %s, %s : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("residual")
  return %r : tensor<2x4x4xf32>
}

// The gradient of a value read several times is summed as each rule gives its
// part (pipe-differentiate's order), one part at a time. With B = 256 bytes:
// - cube (z = a * y): dz (B, received) and the rule's da and dy, the first
//   gradients of a and y, made one after the other: 3B;
// - square (y = a * a): a's gradient so far (B) and dy (B); the rule makes
//   dy * a (B) and adds it to the sum at once (a new B): 4B. Then the second
//   part (B) and its sum (B), dy freed after its last read: 3B. Counting both
//   parts at once, as if given together, would say 6B.
// CHECK-LABEL: memory @square_chain
// CHECK: rule 'square' nn.mul temporaries=0 allocates=operand0,operand1{{$}}
// CHECK: activations saved=768 fwd_peak=256 bwd_peak=1024
func.func @square_chain(%x: tensor<64xf32>) -> tensor<64xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<64xf32>
  %a = nn.mul %x, %w : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> loc("scale")
  %y = nn.mul %a, %a : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> loc("square")
  %z = nn.mul %a, %y : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32> loc("cube")
  return %z : tensor<64xf32>
}

// A weight used transposed: pipe-differentiate computes wt again in the backward
// (from the parameter), and its gradient flows back through the transpose.
// Forward: wt (512 bytes, computed from w) and y (256, returned): 768; x is
// saved. Backward: at fc's rule dy (256) and dwt (512) = 768; at wt's rule
// dwt (512) and the parameter's gradient, its transpose (512): 1024.
// CHECK-LABEL: memory @transposed_weight
// CHECK: activations saved=128 fwd_peak=768 bwd_peak=1024
func.func @transposed_weight(%x: tensor<4x8xf32>) -> tensor<4x16xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<16x8xf32>
  %wt = nn.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x8xf32>) -> tensor<8x16xf32> loc("wt")
  %y = nn.matmul %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("fc")
  return %y : tensor<4x16xf32>
}

// A model input arrives as workspace when the forward starts and is saved right
// after (pipe-run's pipe_input, then pipe_save): x (2048 bytes) is the forward
// peak although the projection keeps it and makes only 64 bytes.
// CHECK-LABEL: memory @input_arrives
// CHECK: activations saved=2048 fwd_peak=2048
func.func @input_arrives(%x: tensor<8x64xf32>) -> tensor<8x2xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<64x2xf32>
  %y = nn.matmul %x, %w : (tensor<8x64xf32>, tensor<64x2xf32>) -> tensor<8x2xf32> loc("proj")
  return %y : tensor<8x2xf32>
}
