// RUN: pipe-opt %s --test-print-pipe-cost='target=h100' -o /dev/null | FileCheck %s

// Data movement and free shape ops, fp32, on x 2x3x4 (N = 24, 96 bytes) that
// needs a gradient. Data movement: no FLOPs; forward reads what it copies and
// writes the result; backward is the adjoint copy. Free ops: no kernel, no
// FLOPs, nothing kept.

// transpose: 96 + 96 = 192 both ways. concat(x, x) -> 2x6x4: 96 + 96 + 192 =
// 384; bwd dy 192 + two gradients 192 = 384. split into 2x3x2 twice: 2 * 96 =
// 192 both ways. slice [1:3] on the last axis -> 2x3x2 (48 bytes): reads and
// writes 48 each = 96; bwd dy 48 + zeroed dx 96 = 144. expand -> 4x2x3x4 (384
// bytes): 480; bwd sums the copies: 96 FLOPs, 480 bytes. tile x2 on axis 1 ->
// 2x6x4: 288; bwd 48 FLOPs, 288 bytes. pad 1+2 on the last axis -> 2x3x7 (168
// bytes): 264 both ways.
// CHECK-LABEL: cost @movement
// CHECK: op 'transpose' nn.transpose class=data_movement fwd_flops=0 fwd_bytes=192 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=192 kernels=1/1 saved=0
// CHECK: op 'concat' nn.concat class=data_movement fwd_flops=0 fwd_bytes=384 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=384 kernels=1/1 saved=0
// CHECK: op 'split' nn.split class=data_movement fwd_flops=0 fwd_bytes=192 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=192 kernels=1/1 saved=0
// CHECK: op 'slice' nn.slice class=data_movement fwd_flops=0 fwd_bytes=96 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=144 kernels=1/1 saved=0
// CHECK: op 'expand' nn.expand class=data_movement fwd_flops=0 fwd_bytes=480 bwd_flops=96 bwd_weight_flops=0 bwd_bytes=480 kernels=1/1 saved=0
// CHECK: op 'tile' nn.tile class=data_movement fwd_flops=0 fwd_bytes=288 bwd_flops=48 bwd_weight_flops=0 bwd_bytes=288 kernels=1/1 saved=0
// CHECK: op 'pad' nn.pad class=data_movement fwd_flops=0 fwd_bytes=264 bwd_flops=0 bwd_weight_flops=0 bwd_bytes=264 kernels=1/1 saved=0
// CHECK: op 'shape' nn.shape class=free{{$}}
// CHECK: op 'reshape' nn.reshape class=free{{$}}
// CHECK: op 'unsqueeze' nn.unsqueeze class=free{{$}}
// CHECK: op 'squeeze' nn.squeeze class=free{{$}}
// CHECK: op 'flatten' nn.flatten class=free{{$}}
// CHECK: op 'identity' nn.identity class=free{{$}}
func.func @movement(%x_in: tensor<2x3x4xf32>) -> (tensor<2x4x3xf32>, tensor<2x6x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<4x2x3x4xf32>, tensor<2x6x4xf32>, tensor<2x3x7xf32>, tensor<2xi64>, tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<2x12xf32>, tensor<2x3x4xf32>) {
  %s = nn.param "s" {source = #nn.param_source<inline>} : tensor<f32>
  %x = nn.mul %x_in, %s : (tensor<2x3x4xf32>, tensor<f32>) -> tensor<2x3x4xf32> loc("pre")
  %0 = nn.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32> loc("transpose")
  %1 = nn.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32> loc("concat")
  %2:2 = nn.split %x {axis = 2 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>) loc("split")
  %st = nn.constant dense<[1]> : tensor<1xi64>
  %en = nn.constant dense<[3]> : tensor<1xi64>
  %ax = nn.constant dense<[2]> : tensor<1xi64>
  %sp = nn.constant dense<[1]> : tensor<1xi64>
  %3 = nn.slice %x, %st, %en, %ax, %sp : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3x2xf32> loc("slice")
  %to = nn.constant dense<[4, 2, 3, 4]> : tensor<4xi64>
  %4 = nn.expand %x, %to : (tensor<2x3x4xf32>, tensor<4xi64>) -> tensor<4x2x3x4xf32> loc("expand")
  %rep = nn.constant dense<[1, 2, 1]> : tensor<3xi64>
  %5 = nn.tile %x, %rep : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<2x6x4xf32> loc("tile")
  %pads = nn.constant dense<[1, 2]> : tensor<2xi64>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %pax = nn.constant dense<[2]> : tensor<1xi64>
  %6 = nn.pad %x, %pads, %zero, %pax : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x3x7xf32> loc("pad")
  %7 = nn.shape %x {start = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64> loc("shape")
  %shape = nn.constant dense<[6, -1]> : tensor<2xi64>
  %8 = nn.reshape %x, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32> loc("reshape")
  %axes = nn.constant dense<[0]> : tensor<1xi64>
  %u = nn.unsqueeze %x, %axes : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<1x2x3x4xf32> loc("unsqueeze")
  %9 = nn.squeeze %u, %axes : (tensor<1x2x3x4xf32>, tensor<1xi64>) -> tensor<2x3x4xf32> loc("squeeze")
  %10 = nn.flatten %x : (tensor<2x3x4xf32>) -> tensor<2x12xf32> loc("flatten")
  %11 = nn.identity %x : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("identity")
  return %0, %1, %2#0, %3, %4, %5, %6, %7, %8, %9, %10, %11 : tensor<2x4x3xf32>, tensor<2x6x4xf32>, tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<4x2x3x4xf32>, tensor<2x6x4xf32>, tensor<2x3x7xf32>, tensor<2xi64>, tensor<6x4xf32>, tensor<2x3x4xf32>, tensor<2x12xf32>, tensor<2x3x4xf32>
}

// Embedding lookup: gather rows of a 10x4 table at 2x3 indices -> 2x3x4 (24
// elements, 96 bytes): fwd reads and writes 96 each + indices 48 = 240. bwd (a
// weight gradient): zero the 10x4 gradient and scatter-add dy into it, 24
// FLOPs, dy 96 + indices 48 + dW 160 = 304 bytes; keeps the indices (48).
// CHECK-LABEL: cost @embedding
// CHECK: op 'embed' nn.gather class=data_movement fwd_flops=0 fwd_bytes=240 bwd_flops=24 bwd_weight_flops=24 bwd_bytes=304 kernels=1/1 saved=48
func.func @embedding(%ids: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %table = nn.param "wte" {source = #nn.param_source<inline>} : tensor<10x4xf32>
  %y = nn.gather %table, %ids : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32> loc("embed")
  return %y : tensor<2x3x4xf32>
}
