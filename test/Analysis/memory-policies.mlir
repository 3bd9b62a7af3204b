// RUN: pipe-opt %s --test-print-pipe-memory='dtype=fp32 optimizer=sgd' -o /dev/null | FileCheck %s --check-prefix=SGD
// RUN: pipe-opt %s --test-print-pipe-memory='dtype=fp32 optimizer=momentum' -o /dev/null | FileCheck %s --check-prefix=MOMENTUM
// RUN: pipe-opt %s --test-print-pipe-memory='dtype=fp32 optimizer=adam' -o /dev/null | FileCheck %s --check-prefix=ADAM
// RUN: pipe-opt %s --test-print-pipe-memory='dtype=bf16 optimizer=adam' -o /dev/null | FileCheck %s --check-prefix=MIXED
// RUN: pipe-opt %s --test-print-pipe-memory='dtype=bf16 optimizer=sgd' -o /dev/null | FileCheck %s --check-prefix=MIXEDSGD

// A two-layer MLP, x 4x8 -> 16 -> 8: 8*16 + 16 + 16*8 + 8 = 280 trainable
// parameters and a 4-element fp32 buffer (16 bytes).
//
// Saved for backward (fp32): fc1 keeps x (128 bytes) for dW1 (x itself needs
// no gradient, so w1 is not needed); the bias adds keep nothing; act keeps its
// output r (256); fc2 keeps r (already kept) and w2 (a parameter): 384 in all.
// ADAM: saved 'fc1' nn.matmul bytes=128 keeps=operand0{{$}}
// ADAM: saved 'act' nn.relu bytes=256 keeps=result0{{$}}
// ADAM: saved 'fc2' nn.matmul bytes=256 keeps=operand0,operand1(param){{$}}
//
// Parameter state per trainable parameter: fp32 weight 4 + gradient 4; momentum
// + 4, Adam + 8 (two moments). Mixed precision (bf16): weight 2 + gradient 2 +
// fp32 master 4, optimizer state in fp32.
// SGD: params trainable=280 buffers=4 weights=1120 grads=1120 master=0 optimizer=0 buffer_bytes=16 total=2256
// MOMENTUM: params trainable=280 buffers=4 weights=1120 grads=1120 master=0 optimizer=1120 buffer_bytes=16 total=3376
// ADAM: params trainable=280 buffers=4 weights=1120 grads=1120 master=0 optimizer=2240 buffer_bytes=16 total=4496
// MIXED: params trainable=280 buffers=4 weights=560 grads=560 master=1120 optimizer=2240 buffer_bytes=16 total=4496
// MIXEDSGD: params trainable=280 buffers=4 weights=560 grads=560 master=1120 optimizer=0 buffer_bytes=16 total=2256
//
// Forward transient (values not kept): h [fc1, bias1], h2 [bias1, act],
// y [fc2, bias2], y2 [bias2, end]: peak h + h2 = 512 bytes.
// Backward, in reverse: dy2 and dy (256), dy and dr (384), dr and dh2 (512),
// dh2 and dh (512), dh (256). x needs no gradient. On top, each op's parameter
// gradients until they are accumulated: db2 32, dW2 512, db1 64, dW1 512. The
// peak is at fc2: dy and dr (384) + dW2 (512) = 896; in bf16 192 + 256 = 448.
// ADAM: activations saved=384 fwd_peak=512 bwd_peak=896
// MIXED: activations saved=192 fwd_peak=256 bwd_peak=448
func.func @mlp(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w1 = nn.param "w1" {source = #nn.param_source<inline>} : tensor<8x16xf32>
  %b1 = nn.param "b1" {source = #nn.param_source<inline>} : tensor<16xf32>
  %w2 = nn.param "w2" {source = #nn.param_source<inline>} : tensor<16x8xf32>
  %b2 = nn.param "b2" {source = #nn.param_source<inline>} : tensor<8xf32>
  %buf = nn.param "stats" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %h = nn.matmul %x, %w1 : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32> loc("fc1")
  %h2 = nn.add %h, %b1 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> loc("bias1")
  %r = nn.relu %h2 : (tensor<4x16xf32>) -> tensor<4x16xf32> loc("act")
  %y = nn.matmul %r, %w2 : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32> loc("fc2")
  %y2 = nn.add %y, %b2 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> loc("bias2")
  return %y2 : tensor<4x8xf32>
}
