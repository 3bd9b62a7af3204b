// RUN: pipe-opt %s --test-print-pipe-cost='target=h100' -o /dev/null | FileCheck %s
// RUN: pipe-opt %s --test-print-pipe-cost='target=h100 fuse=0' -o /dev/null | FileCheck %s --check-prefix=NOFUSE

// Element-wise ops, fp32. Unary: f FLOPs per element forward (1 per
// arithmetic operation or special function), f + 1 backward; bytes are one
// read and one write per element; the backward reads dy and the kept value and
// writes dx. Here x is 4x8 (N = 32, 128 bytes) and needs a gradient. Every op
// below reads the same x, so none is fused (x has several uses).

// relu / tanh: f = 1, keep the output: fwd 32, 256 bytes; bwd 64, 384 bytes.
// sigmoid: f = 3 (exp, add, divide), keeps y: fwd 96, bwd 128.
// gelu (erf form) f = 5, keeps x; gelu (tanh form) f = 9.
// neg: keeps nothing: bwd dy + dx = 256 bytes. floor: no gradient at all.
// CHECK-LABEL: cost @unary
// CHECK: op 'relu' nn.relu class=elementwise fwd_flops=32 fwd_bytes=256 bwd_flops=64 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=128
// CHECK: op 'tanh' nn.tanh class=elementwise fwd_flops=32 fwd_bytes=256 bwd_flops=64 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=128
// CHECK: op 'sigmoid' nn.sigmoid class=elementwise fwd_flops=96 fwd_bytes=256 bwd_flops=128 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=128
// CHECK: op 'gelu' nn.gelu class=elementwise fwd_flops=160 fwd_bytes=256 bwd_flops=192 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=128
// CHECK: op 'gelu_tanh' nn.gelu class=elementwise fwd_flops=288 fwd_bytes=256 bwd_flops=320 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=128
// CHECK: op 'neg' nn.neg class=elementwise fwd_flops=32 fwd_bytes=256 bwd_flops=64 bwd_weight_flops=0 bwd_bytes=256 kernels=1/1 saved=0
// CHECK: op 'floor' nn.floor class=elementwise fwd_flops=32 fwd_bytes=256 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=0 kernels=1/0 saved=0
// x (128 bytes) is kept once although gelu and gelu_tanh both keep it:
// pre keeps x_in 128, relu/tanh/sigmoid outputs 3 * 128, x 128 = 640.
// CHECK: total {{.*}} saved=640
func.func @unary(%x_in: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %x = nn.mul %x_in, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> loc("pre")
  %0 = nn.relu %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("relu")
  %1 = nn.tanh %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("tanh")
  %2 = nn.sigmoid %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("sigmoid")
  %3 = nn.gelu %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("gelu")
  %4 = nn.gelu %x {approximate = "tanh"} : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("gelu_tanh")
  %5 = nn.neg %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("neg")
  %6 = nn.floor %x : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("floor")
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Binary ops with broadcasting: a 4x8 (needs a gradient), b 8 (a parameter,
// broadcast over 4 rows). fwd: N(y) = 32 FLOPs, bytes a 128 + b 32 + y 128 = 288.
// Per operand needing a gradient: g * N(y) FLOPs plus N(y) for the sum over
// broadcast dims; reads dy, the operand, and the values its rule keeps.
// add: da = dy passes through (no kernel); db = sum(dy): 32 FLOPs, dy 128 +
//   db 32 = 160 bytes (weight gradient). Keeps nothing.
// mul: da = dy b: 32, 128 + 128 + b 32 = 288 bytes; db = sum(dy a): 64,
//   128 + 32 + a 128 = 288 bytes. Keeps a (b is a parameter).
// div: da = dy / b: 32, 288 bytes; db = sum(-dy a / b^2): 3*32 + 32 = 128,
//   128 + 32 + a 128 + b 32 = 320 bytes. Keeps a and b.
// sub: da passes through; db = -sum(dy): 64, 160 bytes.
// equal: no gradient; its i1 result is 32 bytes (fwd 128 + 32 + 32 = 192).
// where(c, a, b): fwd 32, c 32 + a 128 + b 32 + y 128 = 320 bytes; da 32
//   FLOPs (dy 128 + c 32 + a 128 = 288 bytes), db 64 (128 + 32 + 32 = 192);
//   keeps c. c comes from `equal` alone: where is fused into it, saving the
//   read and the write of c (once: c is kept, so it is written anyway):
//   fwd 320 - 32 = 288, bwd 480 - 2 * 32 = 416, no kernel of its own.
// CHECK-LABEL: cost @binary
// CHECK: op 'add' nn.add class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=32 bwd_weight_flops=32 bwd_bytes=160 kernels=1/1 saved=0
// CHECK: op 'mul' nn.mul class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=96 bwd_weight_flops=64 bwd_bytes=576 kernels=1/2 saved=128
// CHECK: op 'div' nn.div class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=160 bwd_weight_flops=128 bwd_bytes=608 kernels=1/2 saved=128
// CHECK: op 'sub' nn.sub class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=64 bwd_weight_flops=64 bwd_bytes=160 kernels=1/1 saved=0
// CHECK: op 'eq' nn.equal class=elementwise fwd_flops=32 fwd_bytes=192 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=0 kernels=1/0 saved=0
// CHECK: op 'where' nn.where class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=96 bwd_weight_flops=64 bwd_bytes=416 kernels=0/0 saved=32 {{.*}} fused_into='eq'
// NOFUSE-LABEL: cost @binary
// NOFUSE: op 'where' nn.where class=elementwise fwd_flops=32 fwd_bytes=320 bwd_flops=96 bwd_weight_flops=64 bwd_bytes=480 kernels=1/2 saved=32
func.func @binary(%a_in: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %a = nn.mul %a_in, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> loc("pre")
  %0 = nn.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("add")
  %1 = nn.mul %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("mul")
  %2 = nn.div %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("div")
  %3 = nn.sub %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("sub")
  %c = nn.equal %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1> loc("eq")
  %4 = nn.where %c, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("where")
  return %0, %1, %2, %3, %4 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// Fusion into a GEMM epilogue: y = relu(x @ w + b), x 4x8, w 8x8, b 8.
// matmul: N(y) = 32, K = 8: fwd 512 FLOPs, bytes 128 + 256 + 128 = 512.
// add (its lhs comes from the matmul alone): fused; the matmul's output is
//   neither written nor read back: 288 - 2 * 128 = 32 bytes (b); its backward
//   (db, 32 FLOPs) runs in the matmul's backward: 160 - 256 -> 0 bytes.
// relu: fused too (chain): 256 - 2 * 128 = 0 bytes; bwd 384 - 256 = 128.
// CHECK-LABEL: cost @fusion
// CHECK: op 'fc' nn.matmul class=gemm fwd_flops=512 fwd_bytes=512 {{.*}} kernels=1/1
// CHECK: op 'bias' nn.add class=elementwise fwd_flops=32 fwd_bytes=32 bwd_flops=32 bwd_weight_flops=32 bwd_bytes=0 kernels=0/0 {{.*}} fused_into='fc'
// CHECK: op 'act' nn.relu class=elementwise fwd_flops=32 fwd_bytes=0 bwd_flops=64 bwd_weight_flops=0 bwd_bytes=128 kernels=0/0 {{.*}} fused_into='fc'
// NOFUSE-LABEL: cost @fusion
// NOFUSE: op 'bias' nn.add class=elementwise fwd_flops=32 fwd_bytes=288 bwd_flops=32 bwd_weight_flops=32 bwd_bytes=160 kernels=1/1
// NOFUSE: op 'act' nn.relu class=elementwise fwd_flops=32 fwd_bytes=256 bwd_flops=64 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1
func.func @fusion(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w = nn.param "w" {source = #nn.param_source<inline>} : tensor<8x8xf32>
  %b = nn.param "b" {source = #nn.param_source<inline>} : tensor<8xf32>
  %0 = nn.matmul %x, %w : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> loc("fc")
  %1 = nn.add %0, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("bias")
  %2 = nn.relu %1 : (tensor<4x8xf32>) -> tensor<4x8xf32> loc("act")
  return %2 : tensor<4x8xf32>
}
