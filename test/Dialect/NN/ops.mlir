// RUN: pipe-opt %s | pipe-opt | FileCheck %s
// RUN: pipe-opt %s --mlir-print-op-generic | pipe-opt | FileCheck %s

// CHECK-LABEL: func @values
func.func @values(%shape: tensor<2xi64>) -> (tensor<2x3xf32>, tensor<4x4xf32>, tensor<?xi64>) {
  // CHECK: nn.constant dense<1.000000e+00> : tensor<2x3xf32>
  %c = nn.constant dense<1.0> : tensor<2x3xf32>
  // CHECK: nn.param "fc.weight" {length = 64 : i64, offset = 128 : i64, source = #nn.param_source<file>} : tensor<4x4xf32>
  %p = nn.param "fc.weight" {source = #nn.param_source<file>, offset = 128, length = 64} : tensor<4x4xf32>
  // CHECK: nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  %m = nn.param "bn.running_mean" {source = #nn.param_source<inline>, trainable = false} : tensor<4xf32>
  // CHECK: nn.constant_of_shape
  %z = nn.constant_of_shape %shape {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<*xf32>
  %s = nn.constant dense<0> : tensor<i64>
  %l = nn.constant dense<5> : tensor<i64>
  %d = nn.constant dense<1> : tensor<i64>
  // CHECK: nn.range
  %r = nn.range %s, %l, %d : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return %c, %p, %r : tensor<2x3xf32>, tensor<4x4xf32>, tensor<?xi64>
}

// CHECK-LABEL: func @elementwise
func.func @elementwise(%x: tensor<2x3xf32>, %y: tensor<3xf32>, %b: tensor<2x3xi1>) {
  // CHECK: nn.relu
  %0 = nn.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.erf
  %1 = nn.erf %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.tanh
  %2 = nn.tanh %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.sigmoid
  %3 = nn.sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.sqrt
  %4 = nn.sqrt %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.exp
  %5 = nn.exp %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.log
  %6 = nn.log %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.neg
  %7 = nn.neg %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.abs
  %8 = nn.abs %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.reciprocal
  %9 = nn.reciprocal %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.not
  %10 = nn.not %b : (tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: nn.floor
  %11 = nn.floor %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.ceil
  %12 = nn.ceil %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.softplus
  %13 = nn.softplus %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.identity
  %14 = nn.identity %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.gelu %{{.*}} {approximate = "tanh"}
  %15 = nn.gelu %x {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.leaky_relu
  %16 = nn.leaky_relu %x {alpha = 0.1 : f32} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.hard_sigmoid
  %17 = nn.hard_sigmoid %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.hard_swish
  %18 = nn.hard_swish %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.cast %{{.*}} {to = f16}
  %19 = nn.cast %x {to = f16} : (tensor<2x3xf32>) -> tensor<2x3xf16>
  %lo = nn.constant dense<0.0> : tensor<f32>
  %hi = nn.constant dense<6.0> : tensor<f32>
  // CHECK: nn.clip
  %20 = nn.clip %x, %lo, %hi : (tensor<2x3xf32>, tensor<f32>, tensor<f32>) -> tensor<2x3xf32>
  // CHECK: nn.add
  %21 = nn.add %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.sub
  %22 = nn.sub %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.mul
  %23 = nn.mul %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.div
  %24 = nn.div %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.pow
  %25 = nn.pow %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.mod
  %26 = nn.mod %x, %y {fmod = 1 : i64} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.equal
  %27 = nn.equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.less
  %28 = nn.less %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.less_or_equal
  %29 = nn.less_or_equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.greater
  %30 = nn.greater %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.greater_or_equal
  %31 = nn.greater_or_equal %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: nn.and
  %32 = nn.and %b, %b : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: nn.or
  %33 = nn.or %b, %b : (tensor<2x3xi1>, tensor<2x3xi1>) -> tensor<2x3xi1>
  // CHECK: nn.max
  %34 = nn.max %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.min
  %35 = nn.min %x, %y : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.where
  %36 = nn.where %b, %x, %y : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func @linear_and_windows
func.func @linear_and_windows(%a: tensor<4x2x8x16xf32>, %b: tensor<16x8xf32>, %img: tensor<2x3x32x32xf32>,
                              %w: tensor<8x3x3x3xf32>, %bias: tensor<8xf32>) {
  // CHECK: nn.matmul
  %0 = nn.matmul %a, %b : (tensor<4x2x8x16xf32>, tensor<16x8xf32>) -> tensor<4x2x8x8xf32>
  // CHECK: nn.gemm
  %1 = nn.gemm %b, %b, %bias {transB = 1 : i64} : (tensor<16x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<16x16xf32>
  // CHECK: nn.conv {{.*}}pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>
  %2 = nn.conv %img, %w, %bias {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<2x8x16x16xf32>
  // CHECK: nn.max_pool
  %3:2 = nn.max_pool %img {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x3x32x32xf32>) -> (tensor<2x3x16x16xf32>, tensor<2x3x16x16xi64>)
  // CHECK: nn.average_pool
  %4 = nn.average_pool %img {kernel_shape = array<i64: 3, 3>, auto_pad = "SAME_UPPER"} : (tensor<2x3x32x32xf32>) -> tensor<2x3x32x32xf32>
  // CHECK: nn.global_average_pool
  %5 = nn.global_average_pool %img : (tensor<2x3x32x32xf32>) -> tensor<2x3x1x1xf32>
  // CHECK: nn.global_max_pool
  %6 = nn.global_max_pool %img : (tensor<2x3x32x32xf32>) -> tensor<2x3x1x1xf32>
  return
}

// CHECK-LABEL: func @normalisation
func.func @normalisation(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %t: tensor<2x5x8xf32>, %g: tensor<8xf32>) {
  // CHECK: nn.batch_norm {{.*}}training_mode = 1
  %0:3 = nn.batch_norm %x, %c, %c, %c, %c {training_mode = 1 : i64} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: nn.layer_norm
  %1:3 = nn.layer_norm %t, %g, %g {axis = -1 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x5x8xf32>, tensor<2x5x1xf32>, tensor<2x5x1xf32>)
  // CHECK: nn.softmax
  %2 = nn.softmax %t {axis = 1 : i64} : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: nn.log_softmax
  %3 = nn.log_softmax %t : (tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  %ratio = nn.constant dense<0.1> : tensor<f32>
  %train = nn.constant dense<true> : tensor<i1>
  // CHECK: nn.dropout
  %4:2 = nn.dropout %t, %ratio, %train : (tensor<2x5x8xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x5x8xf32>, tensor<2x5x8xi1>)
  return
}

// CHECK-LABEL: func @reductions
func.func @reductions(%x: tensor<2x5x8xf32>) {
  %axes = nn.constant dense<[-1]> : tensor<1xi64>
  // CHECK: nn.reduce_mean
  %0 = nn.reduce_mean %x, %axes : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
  // CHECK: nn.reduce_sum
  %1 = nn.reduce_sum %x, %axes {keepdims = 0 : i64} : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5xf32>
  // CHECK: nn.reduce_max
  %2 = nn.reduce_max %x : (tensor<2x5x8xf32>) -> tensor<1x1x1xf32>
  // CHECK: nn.reduce_min
  %3 = nn.reduce_min %x, %axes : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
  // CHECK: nn.reduce_prod
  %4 = nn.reduce_prod %x, %axes : (tensor<2x5x8xf32>, tensor<1xi64>) -> tensor<2x5x1xf32>
  return
}

// CHECK-LABEL: func @data_movement
func.func @data_movement(%x: tensor<2x3x4xf32>, %i: tensor<5xi64>) {
  // CHECK: nn.shape
  %0 = nn.shape %x {start = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<2xi64>
  %shape = nn.constant dense<[6, -1]> : tensor<2xi64>
  // CHECK: nn.reshape
  %1 = nn.reshape %x, %shape : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<6x4xf32>
  // CHECK: nn.flatten
  %2 = nn.flatten %x {axis = 2 : i64} : (tensor<2x3x4xf32>) -> tensor<6x4xf32>
  %axes = nn.constant dense<[0]> : tensor<1xi64>
  // CHECK: nn.unsqueeze
  %3 = nn.unsqueeze %x, %axes : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<1x2x3x4xf32>
  // CHECK: nn.squeeze
  %4 = nn.squeeze %3, %axes : (tensor<1x2x3x4xf32>, tensor<1xi64>) -> tensor<2x3x4xf32>
  // CHECK: nn.transpose
  %5 = nn.transpose %x {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  // CHECK: nn.concat
  %6 = nn.concat %x, %x {axis = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x6x4xf32>
  // CHECK: nn.split
  %7:2 = nn.split %x {axis = 2 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xf32>)
  %st = nn.constant dense<[1]> : tensor<1xi64>
  %en = nn.constant dense<[3]> : tensor<1xi64>
  %ax = nn.constant dense<[2]> : tensor<1xi64>
  %sp = nn.constant dense<[1]> : tensor<1xi64>
  // CHECK: nn.slice
  %8 = nn.slice %x, %st, %en, %ax, %sp : (tensor<2x3x4xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<2x3x2xf32>
  // CHECK: nn.gather
  %9 = nn.gather %x, %i {axis = 2 : i64} : (tensor<2x3x4xf32>, tensor<5xi64>) -> tensor<2x3x5xf32>
  %to = nn.constant dense<[4, 2, 3, 4]> : tensor<4xi64>
  // CHECK: nn.expand
  %10 = nn.expand %x, %to : (tensor<2x3x4xf32>, tensor<4xi64>) -> tensor<4x2x3x4xf32>
  %rep = nn.constant dense<[1, 2, 1]> : tensor<3xi64>
  // CHECK: nn.tile
  %11 = nn.tile %x, %rep : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<2x6x4xf32>
  %pads = nn.constant dense<[1, 2]> : tensor<2xi64>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %pax = nn.constant dense<[2]> : tensor<1xi64>
  // CHECK: nn.pad {{.*}}mode = "reflect"
  %12 = nn.pad %x, %pads, %zero, %pax {mode = "reflect"} : (tensor<2x3x4xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<2x3x7xf32>
  // CHECK: nn.trilu
  %13 = nn.trilu %x {upper = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return
}

// The training forms, gradients and loss of NNGradOps.td (docs/nn-dialect.md,
// "Gradient ops").
// CHECK-LABEL: func @gradient_elementwise
func.func @gradient_elementwise(%x: tensor<2x3xf32>, %dy: tensor<2x3xf32>) {
  // CHECK: nn.unary_grad %{{.*}}, %{{.*}} {function = #nn.unary_function<relu>}
  %0 = nn.unary_grad %x, %dy {function = #nn.unary_function<relu>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.unary_grad %{{.*}}, %{{.*}} {function = #nn.unary_function<gelu_tanh>}
  %1 = nn.unary_grad %x, %dy {function = #nn.unary_function<gelu_tanh>} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.unary_grad %{{.*}}, %{{.*}} {beta = 6.000000e+00 : f64, function = #nn.unary_function<clip>}
  %2 = nn.unary_grad %x, %dy {function = #nn.unary_function<clip>, alpha = 0.0 : f64, beta = 6.0 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: nn.unary_grad %{{.*}}, %{{.*}} {alpha = 1.000000e-01 : f64, function = #nn.unary_function<leaky_relu>}
  %3 = nn.unary_grad %x, %dy {function = #nn.unary_function<leaky_relu>, alpha = 0.1 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func @gradient_windows
func.func @gradient_windows(%img: tensor<2x4x9x9xf32>, %w: tensor<6x2x3x3xf32>, %dy: tensor<2x6x5x5xf32>,
                            %dp: tensor<2x4x4x4xf32>, %idx: tensor<2x4x4x4xi64>) {
  // CHECK: nn.conv_grad_input %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, group = 2 : i64, input_shape = array<i64: 2, 4, 9, 9>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x6x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x9x9xf32>
  %0 = nn.conv_grad_input %dy, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x6x5x5xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x9x9xf32>
  // CHECK: nn.conv_grad_weight %{{.*}}, %{{.*}} {{{.*}}weight_shape = array<i64: 6, 2, 3, 3>} : (tensor<2x4x9x9xf32>, tensor<2x6x5x5xf32>) -> tensor<6x2x3x3xf32>
  %1 = nn.conv_grad_weight %img, %dy {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, weight_shape = array<i64: 6, 2, 3, 3>} : (tensor<2x4x9x9xf32>, tensor<2x6x5x5xf32>) -> tensor<6x2x3x3xf32>
  // CHECK: nn.max_pool_grad %{{.*}}, %{{.*}} {input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>) -> tensor<2x4x9x9xf32>
  %2 = nn.max_pool_grad %dp, %idx {input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>) -> tensor<2x4x9x9xf32>
  // Floor (4) and ceil (5) rounding of the pooled size both verify.
  // CHECK: nn.average_pool_grad %{{.*}} {count_include_pad = 1 : i64, input_shape = array<i64: 2, 4, 9, 9>, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x9x9xf32>
  %3 = nn.average_pool_grad %dp {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = 1 : i64, input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x9x9xf32>
  %ceil = nn.constant dense<1.0> : tensor<2x4x5x5xf32>
  // CHECK: nn.average_pool_grad {{.*}} : (tensor<2x4x5x5xf32>) -> tensor<2x4x9x9xf32>
  %4 = nn.average_pool_grad %ceil {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = 0 : i64, input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x4x5x5xf32>) -> tensor<2x4x9x9xf32>
  return
}

// CHECK-LABEL: func @gradient_normalisation
func.func @gradient_normalisation(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %t: tensor<2x5x8xf32>,
                                  %g: tensor<8xf32>, %stat: tensor<2x5x1xf32>) {
  // CHECK: nn.batch_norm_train {{.*}} -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %y, %mean, %invstd = nn.batch_norm_train %x, %c, %c, %c, %c {epsilon = 1.0e-3 : f32, momentum = 0.8 : f32} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: nn.batch_norm_grad {{.*}} -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %0:3 = nn.batch_norm_grad %x, %c, %mean, %invstd, %y : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x3x4x4xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  // CHECK: nn.layer_norm_grad {{.*}} {axis = 2 : i64} : {{.*}} -> (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %1:3 = nn.layer_norm_grad %t, %g, %stat, %stat, %t {axis = 2 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<2x5x1xf32>, tensor<2x5x1xf32>, tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>)
  // CHECK: nn.softmax_grad {{.*}} {axis = 1 : i64}
  %2 = nn.softmax_grad %t, %t {axis = 1 : i64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  // CHECK: nn.log_softmax_grad {{.*}} {axis = 2 : i64}
  %3 = nn.log_softmax_grad %t, %t {axis = 2 : i64} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x8xf32>
  return
}

// CHECK-LABEL: func @gradient_data_movement
func.func @gradient_data_movement(%dy: tensor<2x3x5xf32>, %i: tensor<5xi32>, %ds: tensor<2x3x2xf32>) {
  // CHECK: nn.gather_grad %{{.*}}, %{{.*}} {axis = 2 : i64, input_shape = array<i64: 2, 3, 4>} : (tensor<2x3x5xf32>, tensor<5xi32>) -> tensor<2x3x4xf32>
  %0 = nn.gather_grad %dy, %i {axis = 2 : i64, input_shape = array<i64: 2, 3, 4>} : (tensor<2x3x5xf32>, tensor<5xi32>) -> tensor<2x3x4xf32>
  // A negative step: elements 3 and 1 of the last dim.
  // CHECK: nn.slice_grad %{{.*}} {input_shape = array<i64: 2, 3, 4>, starts = array<i64: 0, 0, 3>, steps = array<i64: 1, 1, -2>} : (tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  %1 = nn.slice_grad %ds {starts = array<i64: 0, 0, 3>, steps = array<i64: 1, 1, -2>, input_shape = array<i64: 2, 3, 4>} : (tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  return
}

// CHECK-LABEL: func @loss
func.func @loss(%logits: tensor<6x10xf32>, %labels: tensor<6xi64>, %image: tensor<2x10x4x4xf32>, %pixels: tensor<2x4x4xi32>) {
  // CHECK: nn.softmax_cross_entropy_loss %{{.*}}, %{{.*}} : (tensor<6x10xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x10xf32>)
  %loss, %log_prob = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<6x10xf32>, tensor<6xi64>) -> (tensor<f32>, tensor<6x10xf32>)
  // CHECK: nn.softmax_cross_entropy_loss_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<f32>, tensor<6x10xf32>, tensor<6xi64>) -> tensor<6x10xf32>
  %0 = nn.softmax_cross_entropy_loss_grad %loss, %log_prob, %labels : (tensor<f32>, tensor<6x10xf32>, tensor<6xi64>) -> tensor<6x10xf32>
  // Classes on dim 1 of [N, C, d...] logits; labels equal to ignore_index count for nothing.
  // CHECK: nn.softmax_cross_entropy_loss {{.*}} {ignore_index = -100 : i64} : (tensor<2x10x4x4xf32>, tensor<2x4x4xi32>)
  %l2:2 = nn.softmax_cross_entropy_loss %image, %pixels {ignore_index = -100 : i64} : (tensor<2x10x4x4xf32>, tensor<2x4x4xi32>) -> (tensor<f32>, tensor<2x10x4x4xf32>)
  // CHECK: nn.softmax_cross_entropy_loss_grad {{.*}} {ignore_index = -100 : i64}
  %1 = nn.softmax_cross_entropy_loss_grad %l2#0, %l2#1, %pixels {ignore_index = -100 : i64} : (tensor<f32>, tensor<2x10x4x4xf32>, tensor<2x4x4xi32>) -> tensor<2x10x4x4xf32>
  return
}

// Recurrent layers: X, W, R, then the optional operands by keyword.
// CHECK-LABEL: func @recurrent
func.func @recurrent(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>, %b: tensor<1x32xf32>, %h: tensor<1x2x4xf32>, %p: tensor<1x12xf32>, %xb: tensor<2x5x3xf32>, %wg: tensor<2x12x3xf32>, %rg: tensor<2x12x4xf32>, %hb: tensor<2x2x4xf32>, %wr: tensor<1x4x3xf32>, %rr: tensor<1x4x4xf32>) {
  // CHECK: nn.lstm %{{.*}}, %{{.*}}, %{{.*}} bias(%{{.*}}) initial_h(%{{.*}}) initial_c(%{{.*}}) peepholes(%{{.*}}) {clip = 3.000000e+00 : f32, hidden_size = 4 : i64, input_forget = 1 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x12xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  %0:3 = nn.lstm %x, %w, %r bias(%b) initial_h(%h) initial_c(%h) peepholes(%p) {hidden_size = 4 : i64, clip = 3.0 : f32, input_forget = 1 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x32xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x12xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  // The initial cell state alone (the segment sizes keep the operands apart).
  // CHECK: nn.lstm %{{.*}}, %{{.*}}, %{{.*}} initial_c(%{{.*}}) {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x2x4xf32>)
  %1:3 = nn.lstm %x, %w, %r initial_c(%h) {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>, tensor<1x2x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  // Layout 1: [batch, seq, ...] in, [batch, seq, dirs, hidden] and [batch, dirs, hidden] out.
  // CHECK: nn.gru %{{.*}}, %{{.*}}, %{{.*}} initial_h(%{{.*}}) {direction = "bidirectional", hidden_size = 4 : i64, layout = 1 : i64, linear_before_reset = 1 : i64, sequence_lens = array<i64: 5, 3>} : (tensor<2x5x3xf32>, tensor<2x12x3xf32>, tensor<2x12x4xf32>, tensor<2x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x2x4xf32>)
  %2:2 = nn.gru %xb, %wg, %rg initial_h(%hb) {hidden_size = 4 : i64, direction = "bidirectional", layout = 1 : i64, linear_before_reset = 1 : i64, sequence_lens = array<i64: 5, 3>} : (tensor<2x5x3xf32>, tensor<2x12x3xf32>, tensor<2x12x4xf32>, tensor<2x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x2x4xf32>)
  // CHECK: nn.rnn %{{.*}}, %{{.*}}, %{{.*}} {activation_alpha = array<f32: 2.000000e-01>, activations = ["LeakyRelu"], direction = "reverse", hidden_size = 4 : i64}
  %3:2 = nn.rnn %x, %wr, %rr {hidden_size = 4 : i64, direction = "reverse", activations = ["LeakyRelu"], activation_alpha = array<f32: 0.2>} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}
