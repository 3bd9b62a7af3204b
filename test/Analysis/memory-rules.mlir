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
// Backward peak, at the transpose's rule: a's gradient so far (256, from the
// matmul), dt (256), the new partial dt^T (256) and the new sum (256): 1024.
// At the matmul's rule: ds (128), its temporary (256), da and dt (256 each): 896.
// CHECK: activations saved=768 fwd_peak=256 bwd_peak=1024
func.func @attention(%x: tensor<2x4x8xf32>) -> tensor<2x4x4xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<2x4x8xf32>
  %a = nn.mul %x, %w : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32> loc("scale")
  %t = nn.transpose %a {perm = array<i64: 0, 2, 1>} : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32> loc("keys")
  %s = nn.matmul %a, %t : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32> loc("scores")
  %r = nn.add %s, %s : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32> loc("residual")
  return %r : tensor<2x4x4xf32>
}
