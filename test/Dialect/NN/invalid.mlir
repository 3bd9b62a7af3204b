// RUN: pipe-opt %s -split-input-file -verify-diagnostics

func.func @nn_c1_wrong_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[nn_c1] result #0 has type 'tensor<3x2xf32>', but the op's shape rules give 'tensor<2x3xf32>'}}
  %0 = nn.relu %x : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @nn_c1_wrong_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{[nn_c1] result #0 has element type 'f16', expected 'f32'}}
  %0 = nn.relu %x : (tensor<2x3xf32>) -> tensor<2x3xf16>
  return
}

// -----

func.func @nn_c2(%x: tensor<2199023255552xf32>) {
  // expected-error @+1 {{[nn_c2] operand #0 of type 'tensor<2199023255552xf32>' is beyond the size limits (dims up to 2^40, 2^48 elements)}}
  %0 = nn.relu %x : (tensor<2199023255552xf32>) -> tensor<2199023255552xf32>
  return
}

// -----

func.func @broadcast_c1(%x: tensor<2x3xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{[broadcast_c1]}}
  %0 = nn.add %x, %y : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_c2(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{[broadcast_c2] operands must have the same element type, got 'f32' and 'f16'}}
  %0 = nn.add %x, %y : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// [param_c1]: the source is an #nn.param_source (file, external or inline).
func.func @param_c1() {
  // expected-error @+1 {{attribute 'source' failed to satisfy constraint: where a parameter's values are stored}}
  %0 = nn.param "w" {source = "file"} : tensor<2xf32>
  return
}

// -----

func.func @param_c1_unknown() {
  // expected-error @+2 {{expected ::pipe::nn::ParamSource to be one of: file, external, inline}}
  // expected-error @+1 {{failed to parse NN_ParamSourceAttr parameter 'value'}}
  %0 = nn.param "w" {source = #nn.param_source<disk>} : tensor<2xf32>
  return
}

// -----

func.func @param_c2() {
  // expected-error @+1 {{[param_c2] a 'file' parameter needs offset and length}}
  %0 = nn.param "w" {source = #nn.param_source<file>} : tensor<2xf32>
  return
}

// -----

func.func @param_c3() {
  // expected-error @+1 {{[param_c3] an external parameter needs the data file's path}}
  %0 = nn.param "w" {source = #nn.param_source<external>, offset = 0, length = 8} : tensor<2xf32>
  return
}

// -----

func.func @param_c4() {
  // expected-error @+1 {{[param_c4] a parameter must have a static shape}}
  %0 = nn.param "w" {source = #nn.param_source<inline>} : tensor<?xf32>
  return
}

// -----

func.func @clip_c1(%x: tensor<4xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{[clip_c1] min and max must be scalars}}
  %0 = nn.clip %x, %b, %b : (tensor<4xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @clip_c2(%x: tensor<4xf32>, %b: tensor<f16>) {
  // expected-error @+1 {{[clip_c2] input, min and max must have the same element type, got 'f32' and 'f16'}}
  %0 = nn.clip %x, %b, %b : (tensor<4xf32>, tensor<f16>, tensor<f16>) -> tensor<4xf32>
  return
}

// -----

func.func @where_c1(%c: tensor<4xf32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{[where_c1] condition must be a tensor of i1}}
  %0 = nn.where %c, %x, %x : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_c2(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+1 {{[where_c2] x and y must have the same element type}}
  %0 = nn.where %c, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_c1(%x: tensor<f32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{[matmul_c1] operands must have rank >= 1}}
  %0 = nn.matmul %x, %y : (tensor<f32>, tensor<4xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @matmul_c2(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+1 {{[matmul_c2] contraction dims differ: 3 vs 4}}
  %0 = nn.matmul %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_c3(%x: tensor<2x2x3xf32>, %y: tensor<3x3x5xf32>) {
  // expected-error @+1 {{[matmul_c3] batch dims are not broadcast-compatible}}
  %0 = nn.matmul %x, %y : (tensor<2x2x3xf32>, tensor<3x3x5xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @matmul_c4(%x: tensor<2x3xf32>, %y: tensor<3x5xf16>) {
  // expected-error @+1 {{[matmul_c4] operands must have the same element type}}
  %0 = nn.matmul %x, %y : (tensor<2x3xf32>, tensor<3x5xf16>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gemm_c1(%x: tensor<2x3x4xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+1 {{[gemm_c1] A and B must be 2-D}}
  %0 = nn.gemm %x, %y : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @gemm_c2(%x: tensor<2x3xf32>, %y: tensor<4x5xf32>) {
  // expected-error @+1 {{[gemm_c2] contraction dims differ: 3 vs 4}}
  %0 = nn.gemm %x, %y : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gemm_c3(%x: tensor<2x3xf32>, %y: tensor<3x5xf32>, %c: tensor<1x2x5xf32>) {
  // expected-error @+1 {{[gemm_c3] C must have rank <= 2}}
  %0 = nn.gemm %x, %y, %c : (tensor<2x3xf32>, tensor<3x5xf32>, tensor<1x2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gemm_c4(%x: tensor<2x3xf32>, %y: tensor<3x5xbf16>) {
  // expected-error @+1 {{[gemm_c4] A, B and C must have the same element type, got 'f32' and 'bf16'}}
  %0 = nn.gemm %x, %y : (tensor<2x3xf32>, tensor<3x5xbf16>) -> tensor<2x5xf32>
  return
}

// -----

func.func @conv_c1(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{[conv_c1] input and weight must have the same rank >= 3}}
  %0 = nn.conv %x, %w : (tensor<2x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @conv_c2(%x: tensor<2x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{[conv_c2] input has 3 channels, weight expects 2 x group 1}}
  %0 = nn.conv %x, %w : (tensor<2x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_c3(%x: tensor<2x4x8x8xf32>, %w: tensor<3x2x3x3xf32>) {
  // expected-error @+1 {{[conv_c3] output channels 3 are not divisible by group 2}}
  %0 = nn.conv %x, %w {group = 2 : i64} : (tensor<2x4x8x8xf32>, tensor<3x2x3x3xf32>) -> tensor<2x3x6x6xf32>
  return
}

// -----

func.func @conv_c4(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{[conv_c4] kernel_shape disagrees with the weight's spatial dims}}
  %1 = nn.conv %x, %w {kernel_shape = array<i64: 5, 5>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
  return
}

// -----

func.func @conv_c5(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{[conv_c5] bias must be 1-D with one entry per output channel}}
  %0 = nn.conv %x, %w, %b : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

func.func @conv_c6(%x: tensor<2x3x8x8xf16>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{[conv_c6] input, weight and bias must have the same element type, got 'f16' and 'f32'}}
  %0 = nn.conv %x, %w : (tensor<2x3x8x8xf16>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf16>
  return
}

// -----

func.func @conv_c6_integer(%x: tensor<2x3x8x8xi32>, %w: tensor<4x3x3x3xi32>) {
  // expected-error @+1 {{[conv_c6] input must have a floating-point element type, got 'i32'}}
  %0 = nn.conv %x, %w : (tensor<2x3x8x8xi32>, tensor<4x3x3x3xi32>) -> tensor<2x4x6x6xi32>
  return
}

// -----

func.func @window_c1(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{[window_c1] strides has 1 entries, expected 2}}
  %0 = nn.max_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2>} : (tensor<2x3x8x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @window_c1_negative_pads(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{[window_c1] pads must be non-negative, got -1000}}
  %0 = nn.max_pool %x {kernel_shape = array<i64: 2, 2>, pads = array<i64: -1000, 1, 1, 1>} : (tensor<2x3x8x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @window_c1_empty_output(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{[window_c1] the window does not fit spatial dim 0 of size 8 (with its padding)}}
  %0 = nn.average_pool %x {kernel_shape = array<i64: 9, 2>} : (tensor<2x3x8x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @max_pool_c1(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{[max_pool_c1] input must have rank >= 3}}
  %0 = nn.max_pool %x {kernel_shape = array<i64: 2>} : (tensor<3x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @average_pool_c1(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{[average_pool_c1] input must have rank >= 3}}
  %0 = nn.average_pool %x {kernel_shape = array<i64: 2>} : (tensor<3x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @global_pool_c1(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{[global_pool_c1] input must have rank >= 3}}
  %0 = nn.global_average_pool %x : (tensor<3x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @batch_norm_c1(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{[batch_norm_c1] running statistics are results only in training mode}}
  %0:3 = nn.batch_norm %x, %c, %c, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_c2(%x: tensor<3xf32>, %c: tensor<3xf32>) {
  // expected-error @+1 {{[batch_norm_c2] input must have rank >= 2}}
  %0 = nn.batch_norm %x, %c, %c, %c, %c : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @batch_norm_c3(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %d: tensor<4xf32>) {
  // expected-error @+1 {{[batch_norm_c3] scale, bias, mean and var must be 1-D of size 3}}
  %0 = nn.batch_norm %x, %c, %d, %c, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @batch_norm_c4(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{[batch_norm_c4] input, scale, bias, mean and var must have floating-point element types, got 'i64'}}
  %0 = nn.batch_norm %x, %c, %c, %i, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xi64>, tensor<3xf32>) -> tensor<2x3x4x4xf32>
  return
}

// -----

func.func @layer_norm_c1(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{[layer_norm_c1] has 1 or 3 results, not 2}}
  %0:2 = nn.layer_norm %x, %g : (tensor<2x8xf32>, tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x1xf32>)
  return
}

// -----

func.func @layer_norm_c2(%x: tensor<2x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{[layer_norm_c2] axis 2 is out of range}}
  %0 = nn.layer_norm %x, %g {axis = 2 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_c3(%x: tensor<2x8xf32>, %g: tensor<7xf32>) {
  // expected-error @+1 {{[layer_norm_c3] scale does not broadcast to the normalised dims}}
  %0 = nn.layer_norm %x, %g : (tensor<2x8xf32>, tensor<7xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @layer_norm_c4(%x: tensor<2x8xf32>, %g: tensor<8xf16>) {
  // expected-error @+1 {{[layer_norm_c4] input, scale and bias must have the same element type, got 'f32' and 'f16'}}
  %0 = nn.layer_norm %x, %g : (tensor<2x8xf32>, tensor<8xf16>) -> tensor<2x8xf32>
  return
}

// -----

func.func @softmax_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[softmax_c1] axis 2 is out of range for rank 2}}
  %0 = nn.softmax %x {axis = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @log_softmax_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[log_softmax_c1] axis -3 is out of range for rank 2}}
  %0 = nn.log_softmax %x {axis = -3 : i64} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reduce_c1(%x: tensor<2x8xf32>) {
  %axes = nn.constant dense<[3]> : tensor<1xi64>
  // expected-error @+1 {{[reduce_c1] axis 3 is out of range for rank 2}}
  %0 = nn.reduce_mean %x, %axes : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @transpose_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[transpose_c1] perm must be a permutation of [0, rank)}}
  %0 = nn.transpose %x {perm = array<i64: 0, 0>} : (tensor<2x8xf32>) -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_c2(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[concat_c2] axis 2 is out of range}}
  %0 = nn.concat %x, %x {axis = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @concat_c3(%x: tensor<2x8xf32>, %y: tensor<3x8xf32>) {
  // expected-error @+1 {{[concat_c3] inputs differ in dim 0}}
  %0 = nn.concat %x, %y {axis = 1 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @concat_c4(%x: tensor<2x8xf32>, %y: tensor<2x8xf16>) {
  // expected-error @+1 {{[concat_c4] inputs must have the same element type}}
  %0 = nn.concat %x, %y {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2x8xf16>) -> tensor<2x16xf32>
  return
}

// -----

func.func @split_c2(%x: tensor<2x8xf32>) {
  %sizes = nn.constant dense<[3, 4]> : tensor<2xi64>
  // expected-error @+1 {{[split_c2] sizes sum to 7, dim is 8}}
  %0:2 = nn.split %x, %sizes {axis = 1 : i64} : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @split_c3(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[split_c3] axis 2 is out of range}}
  %0:2 = nn.split %x {axis = 2 : i64} : (tensor<2x8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @gather_c1(%x: tensor<2x8xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{[gather_c1] axis 2 is out of range}}
  %0 = nn.gather %x, %i {axis = 2 : i64} : (tensor<2x8xf32>, tensor<3xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @gather_c2(%x: tensor<2x8xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{[gather_c2] indices must be 32- or 64-bit integers, got 'f32'}}
  %0 = nn.gather %x, %i : (tensor<2x8xf32>, tensor<3xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @gather_c2_bool(%x: tensor<2x8xf32>, %i: tensor<3xi1>) {
  // expected-error @+1 {{[gather_c2] indices must be 32- or 64-bit integers, got 'i1'}}
  %0 = nn.gather %x, %i : (tensor<2x8xf32>, tensor<3xi1>) -> tensor<3x8xf32>
  return
}

// -----

func.func @reshape_c1(%x: tensor<2x8xf32>) {
  %s = nn.constant dense<[5, 3]> : tensor<2xi64>
  // expected-error @+1 {{[reshape_c1] cannot reshape 16 elements into 15}}
  %0 = nn.reshape %x, %s : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @reshape_c2(%x: tensor<2x8xf32>) {
  %s = nn.constant dense<[-1, -1]> : tensor<2xi64>
  // expected-error @+1 {{[reshape_c2] shape has more than one -1}}
  %0 = nn.reshape %x, %s : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @reshape_c3(%x: tensor<2x8xf32>) {
  %s = nn.constant dense<[4, -2]> : tensor<2xi64>
  // expected-error @+1 {{[reshape_c3] shape has an invalid dim -2}}
  %0 = nn.reshape %x, %s : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @flatten_c1(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{[flatten_c1] axis 3 is out of range for rank 2}}
  %0 = nn.flatten %x {axis = 3 : i64} : (tensor<2x8xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @squeeze_c2(%x: tensor<2x8xf32>) {
  %a = nn.constant dense<[0]> : tensor<1xi64>
  // expected-error @+1 {{[squeeze_c2] cannot squeeze dim 0 of size 2}}
  %0 = nn.squeeze %x, %a : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @unsqueeze_c1(%x: tensor<2x8xf32>) {
  %a = nn.constant dense<[0, 0]> : tensor<2xi64>
  // expected-error @+1 {{[unsqueeze_c1] axes are out of range or repeated for output rank 4}}
  %0 = nn.unsqueeze %x, %a : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @slice_c3(%x: tensor<8xf32>) {
  %z = nn.constant dense<[0]> : tensor<1xi64>
  // expected-error @+1 {{[slice_c3] step is zero}}
  %0 = nn.slice %x, %z, %z, %z, %z : (tensor<8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @expand_c1(%x: tensor<3xf32>) {
  %s = nn.constant dense<[2, 4]> : tensor<2xi64>
  // expected-error @+1 {{[expand_c1] input is not broadcast-compatible with the target shape}}
  %0 = nn.expand %x, %s : (tensor<3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @pad_c1(%x: tensor<8xf32>, %p: tensor<2xi64>, %v: tensor<f32>, %a: tensor<1xi64>) {
  // expected-error @+1 {{[pad_c1] mode must be constant, reflect, edge or wrap, got 'mirror'}}
  %0 = nn.pad %x, %p, %v, %a {mode = "mirror"} : (tensor<8xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<?xf32>
  return
}

// -----

func.func @range_c1() {
  %a = nn.constant dense<0> : tensor<i64>
  // expected-error @+1 {{[range_c1] delta is zero}}
  %0 = nn.range %a, %a, %a : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<?xi64>
  return
}

// -----

func.func @range_c2() {
  %a = nn.constant dense<0.0> : tensor<f64>
  %b = nn.constant dense<1.0e+300> : tensor<f64>
  %c = nn.constant dense<1.0> : tensor<f64>
  // expected-error @+1 {{[range_c2] the range has more than 1099511627776 elements (or is not finite)}}
  %0 = nn.range %a, %b, %c : (tensor<f64>, tensor<f64>, tensor<f64>) -> tensor<*xf64>
  return
}

// -----

func.func @concat_c1() {
  // expected-error @+1 {{[concat_c1] needs at least one input}}
  %0 = nn.concat {axis = 0 : i64} : () -> tensor<*xf32>
  return
}

// -----

func.func @constant_of_shape_c1() {
  %s = nn.constant dense<[2, -1]> : tensor<2xi64>
  // expected-error @+1 {{[constant_of_shape_c1] shape has a negative dim -1}}
  %0 = nn.constant_of_shape %s {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @pad_c2(%x: tensor<8xf32>, %v: tensor<f32>) {
  %p = nn.constant dense<[1, 2, 3]> : tensor<3xi64>
  %a = nn.constant dense<[0]> : tensor<1xi64>
  // expected-error @+1 {{[pad_c2] pads has 3 entries for 1 axes}}
  %0 = nn.pad %x, %p, %v, %a : (tensor<8xf32>, tensor<3xi64>, tensor<f32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @pad_c3(%x: tensor<8xf32>, %v: tensor<f32>) {
  %p = nn.constant dense<[1, 2]> : tensor<2xi64>
  %a = nn.constant dense<[1]> : tensor<1xi64>
  // expected-error @+1 {{[pad_c3] axis 1 is out of range}}
  %0 = nn.pad %x, %p, %v, %a : (tensor<8xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @slice_c1(%x: tensor<8xf32>) {
  %a = nn.constant dense<[0]> : tensor<1xi64>
  %b = nn.constant dense<[0, 1]> : tensor<2xi64>
  // expected-error @+1 {{[slice_c1] starts, ends, axes and steps differ in length}}
  %0 = nn.slice %x, %a, %b, %a, %a : (tensor<8xf32>, tensor<1xi64>, tensor<2xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @slice_c2(%x: tensor<8xf32>) {
  %a = nn.constant dense<[0]> : tensor<1xi64>
  %ax = nn.constant dense<[1]> : tensor<1xi64>
  %one = nn.constant dense<[1]> : tensor<1xi64>
  // expected-error @+1 {{[slice_c2] axis 1 is out of range}}
  %0 = nn.slice %x, %a, %one, %ax, %one : (tensor<8xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @split_c1(%x: tensor<8xf32>) {
  // expected-error @+1 {{[split_c1] needs at least one result}}
  nn.split %x : (tensor<8xf32>) -> ()
  return
}

// -----

func.func @squeeze_c1(%x: tensor<1x8xf32>) {
  %a = nn.constant dense<[2]> : tensor<1xi64>
  // expected-error @+1 {{[squeeze_c1] axis 2 is out of range for rank 2}}
  %0 = nn.squeeze %x, %a : (tensor<1x8xf32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @tile_c1(%x: tensor<2x8xf32>) {
  %r = nn.constant dense<[2]> : tensor<1xi64>
  // expected-error @+1 {{[tile_c1] repeats has 1 entries for rank 2}}
  %0 = nn.tile %x, %r : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @tile_c2(%x: tensor<2x3xf32>) {
  %r = nn.constant dense<[-1, 1]> : tensor<2xi64>
  // expected-error @+1 {{[tile_c2] repeats has a negative entry -1}}
  %0 = nn.tile %x, %r : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @pad_c4(%x: tensor<2x3xf32>, %v: tensor<f32>) {
  %p = nn.constant dense<[0, -5]> : tensor<2xi64>
  %a = nn.constant dense<[0]> : tensor<1xi64>
  // expected-error @+1 {{[pad_c4] pads make dim 0 negative}}
  %0 = nn.pad %x, %p, %v, %a : (tensor<2x3xf32>, tensor<2xi64>, tensor<f32>, tensor<1xi64>) -> tensor<*xf32>
  return
}

// -----

func.func @expand_c2(%x: tensor<3xf32>) {
  %s = nn.constant dense<[-2, 3]> : tensor<2xi64>
  // expected-error @+1 {{[expand_c2] the target shape has a negative dim}}
  %0 = nn.expand %x, %s : (tensor<3xf32>, tensor<2xi64>) -> tensor<*xf32>
  return
}

// -----

// Gradient ops (NNGradOps.td).

func.func @unary_grad_c1_type(%x: tensor<4xf16>, %dy: tensor<4xf32>) {
  // expected-error @+1 {{[unary_grad_c1] saved value and gradient must share a float type}}
  %0 = nn.unary_grad %x, %dy {function = #nn.unary_function<tanh>} : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unary_grad_c1_shape(%x: tensor<4xf32>, %dy: tensor<2x4xf32>) {
  // expected-error @+1 {{[unary_grad_c1] saved value and gradient must have the same shape}}
  %0 = nn.unary_grad %x, %dy {function = #nn.unary_function<relu>} : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @conv_grad_c1(%dy: tensor<2x6x4x4xf32>, %w: tensor<6x2x3x3xf32>) {
  // With stride 2 and pads 1 a 9x9 input gives 5x5, not 4x4.
  // expected-error @+1 {{[conv_grad_c1] the gradient has shape 'tensor<2x6x4x4xf32>', the forward geometry gives 'tensor<2x6x5x5xf32>'}}
  %0 = nn.conv_grad_input %dy, %w {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 2 : i64, input_shape = array<i64: 2, 4, 9, 9>} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x9x9xf32>
  return
}

// -----

func.func @conv_grad_c1_group(%x: tensor<2x4x9x9xf32>, %dy: tensor<2x6x5x5xf32>) {
  // expected-error @+1 {{[conv_grad_c1] group 3 does not divide the channels consistently}}
  %0 = nn.conv_grad_weight %x, %dy {strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 3 : i64, weight_shape = array<i64: 6, 2, 3, 3>} : (tensor<2x4x9x9xf32>, tensor<2x6x5x5xf32>) -> tensor<6x2x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_c1(%dy: tensor<2x3x4x4xf32>, %i: tensor<2x3x4x4xi32>) {
  // expected-error @+1 {{[max_pool_grad_c1] indices must be i64}}
  %0 = nn.max_pool_grad %dy, %i {input_shape = array<i64: 2, 3, 8, 8>} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @max_pool_grad_c2(%dy: tensor<2x3x4x4xf32>, %i: tensor<2x3x4x4xi64>) {
  // expected-error @+1 {{[max_pool_grad_c2] the gradient's batch and channel dims must be the input's}}
  %0 = nn.max_pool_grad %dy, %i {input_shape = array<i64: 2, 5, 8, 8>} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xi64>) -> tensor<2x5x8x8xf32>
  return
}

// -----

func.func @average_pool_grad_c1(%dy: tensor<2x3x4x4xf32>) {
  // expected-error @+1 {{[average_pool_grad_c1] kernel_shape and strides need one entry per spatial dim of the input, pads two}}
  %0 = nn.average_pool_grad %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = 0 : i64, input_shape = array<i64: 2, 3, 8, 8>} : (tensor<2x3x4x4xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @average_pool_grad_c2(%dy: tensor<2x3x3x3xf32>) {
  // expected-error @+1 {{[average_pool_grad_c2] the gradient's shape 'tensor<2x3x3x3xf32>' is not the pooled shape of the input}}
  %0 = nn.average_pool_grad %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, count_include_pad = 0 : i64, input_shape = array<i64: 2, 3, 8, 8>} : (tensor<2x3x3x3xf32>) -> tensor<2x3x8x8xf32>
  return
}

// -----

func.func @batch_norm_train_c1(%x: tensor<2x3x4x4xf32>, %c: tensor<3xf32>, %bad: tensor<4xf32>) {
  // expected-error @+1 {{[batch_norm_train_c1] scale, bias and running statistics must have one entry per channel (3)}}
  %0:3 = nn.batch_norm_train %x, %c, %c, %bad, %c : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<4xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @batch_norm_train_c1_rank(%x: tensor<4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{[batch_norm_train_c1] input must have rank >= 2}}
  %0:3 = nn.batch_norm_train %x, %c, %c, %c, %c : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @layer_norm_grad_c1(%x: tensor<2x5x8xf32>, %g: tensor<8xf32>, %s: tensor<2x5x1xf32>) {
  // expected-error @+1 {{[layer_norm_grad_c1] axis -1 must be normalised into [0, 3)}}
  %0:3 = nn.layer_norm_grad %x, %g, %s, %s, %x {axis = -1 : i64} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<2x5x1xf32>, tensor<2x5x1xf32>, tensor<2x5x8xf32>) -> (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @softmax_grad_c1(%y: tensor<2x5xf32>, %dy: tensor<2x6xf32>) {
  // expected-error @+1 {{[softmax_grad_c1] output and gradient must have the same shape}}
  %0 = nn.softmax_grad %y, %dy {axis = 1 : i64} : (tensor<2x5xf32>, tensor<2x6xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @softmax_grad_c1_log_axis(%y: tensor<2x5xf32>, %dy: tensor<2x5xf32>) {
  // expected-error @+1 {{[softmax_grad_c1] axis 2 must be normalised into [0, 2)}}
  %0 = nn.log_softmax_grad %y, %dy {axis = 2 : i64} : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  return
}

// -----

func.func @gather_grad_c1(%dy: tensor<2x5xf32>, %i: tensor<5xi64>) {
  // expected-error @+1 {{[gather_grad_c1] axis 2 must be normalised into [0, 2)}}
  %0 = nn.gather_grad %dy, %i {axis = 2 : i64, input_shape = array<i64: 2, 4>} : (tensor<2x5xf32>, tensor<5xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_grad_c2(%dy: tensor<2x5xf32>, %i: tensor<5xi1>) {
  // expected-error @+1 {{[gather_grad_c2] indices must be i32 or i64}}
  %0 = nn.gather_grad %dy, %i {axis = 1 : i64, input_shape = array<i64: 2, 4>} : (tensor<2x5xf32>, tensor<5xi1>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_grad_c3(%dy: tensor<2x6xf32>, %i: tensor<5xi64>) {
  // expected-error @+1 {{[gather_grad_c3] the gradient's shape 'tensor<2x6xf32>' is not the gathered shape 'tensor<2x5xf32>'}}
  %0 = nn.gather_grad %dy, %i {axis = 1 : i64, input_shape = array<i64: 2, 4>} : (tensor<2x6xf32>, tensor<5xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_grad_c1(%dy: tensor<2x2xf32>) {
  // expected-error @+1 {{[slice_grad_c1] starts, steps and the gradient need one entry per dim of the input (2)}}
  %0 = nn.slice_grad %dy {starts = array<i64: 0>, steps = array<i64: 1, 1>, input_shape = array<i64: 2, 4>} : (tensor<2x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_grad_c2(%dy: tensor<2x2xf32>) {
  // Elements 3 and 5 of a dim of 4.
  // expected-error @+1 {{[slice_grad_c2] dim 1: elements 3 to 5 fall outside [0, 4)}}
  %0 = nn.slice_grad %dy {starts = array<i64: 0, 3>, steps = array<i64: 1, 2>, input_shape = array<i64: 2, 4>} : (tensor<2x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_grad_c2_step(%dy: tensor<2x2xf32>) {
  // expected-error @+1 {{[slice_grad_c2] step of dim 1 is 0}}
  %0 = nn.slice_grad %dy {starts = array<i64: 0, 0>, steps = array<i64: 1, 0>, input_shape = array<i64: 2, 4>} : (tensor<2x2xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @cross_entropy_c1(%logits: tensor<4x10xf32>, %labels: tensor<4xf32>) {
  // expected-error @+1 {{[cross_entropy_c1] labels must be i32 or i64 class indices, not 'f32'}}
  %0:2 = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<4x10xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @cross_entropy_c1_logits(%logits: tensor<4x10xi32>, %labels: tensor<4xi64>) {
  // expected-error @+1 {{[cross_entropy_c1] logits must be floating point, not 'i32'}}
  %0:2 = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<4x10xi32>, tensor<4xi64>) -> (tensor<i32>, tensor<4x10xi32>)
  return
}

// -----

func.func @cross_entropy_c2(%logits: tensor<4x10x3xf32>, %labels: tensor<4x10xi64>) {
  // Classes are dim 1: the labels of [4, 10, 3] logits are [4, 3].
  // expected-error @+1 {{[cross_entropy_c2] labels must have the logits' shape without the class dim: 'tensor<4x3xi64>'}}
  %0:2 = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<4x10x3xf32>, tensor<4x10xi64>) -> (tensor<f32>, tensor<4x10x3xf32>)
  return
}

// -----

func.func @cross_entropy_c2_rank(%logits: tensor<10xf32>, %labels: tensor<i64>) {
  // expected-error @+1 {{[cross_entropy_c2] logits must be [N, C, ...]}}
  %0:2 = nn.softmax_cross_entropy_loss %logits, %labels : (tensor<10xf32>, tensor<i64>) -> (tensor<f32>, tensor<10xf32>)
  return
}

// -----

func.func @rnn_c1_hidden_size(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c1] hidden_size must be >= 1, got 0}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 0 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x0xf32>, tensor<1x2x0xf32>)
  return
}

// -----

func.func @rnn_c1_direction(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c1] direction 'backward' is not forward, reverse or bidirectional}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64, direction = "backward"} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c1_layout(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c1] layout must be 0 or 1, got 2}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64, layout = 2 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x2x1x4xf32>, tensor<5x1x4xf32>)
  return
}

// -----

func.func @rnn_c2_count(%x: tensor<5x2x3xf32>, %w: tensor<1x16x3xf32>, %r: tensor<1x16x4xf32>) {
  // expected-error @+1 {{[rnn_c2] has 2 activations, expected 3}}
  %0:3 = nn.lstm %x, %w, %r {hidden_size = 4 : i64, activations = ["Sigmoid", "Tanh"]} : (tensor<5x2x3xf32>, tensor<1x16x3xf32>, tensor<1x16x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c2_name(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c2] activation 'Gelu' is not one of Sigmoid Tanh Relu Softsign Softplus LeakyRelu HardSigmoid Affine ScaledTanh}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64, activations = ["Gelu"]} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c3_float(%x: tensor<5x2x3xi32>, %w: tensor<1x4x3xi32>, %r: tensor<1x4x4xi32>) {
  // expected-error @+1 {{[rnn_c3] X must have a floating-point element type, got 'i32'}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64} : (tensor<5x2x3xi32>, tensor<1x4x3xi32>, tensor<1x4x4xi32>) -> (tensor<5x1x2x4xi32>, tensor<1x2x4xi32>)
  return
}

// -----

func.func @rnn_c3_same(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xbf16>) {
  // expected-error @+1 {{[rnn_c3] X, W, R, B, the initial states and the peepholes must have the same element type, got 'f32' and 'bf16'}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xbf16>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c4_rank(%x: tensor<5x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c4] X must be 3-D, got rank 2}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64} : (tensor<5x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return
}

// -----

func.func @rnn_c4_weights(%x: tensor<5x2x3xf32>, %w: tensor<1x12x3xf32>, %r: tensor<1x16x4xf32>) {
  // expected-error @+1 {{[rnn_c4] W must be [1, 16, 3] (1 direction(s), 4 gate(s) of hidden_size 4, 3 input features), got 'tensor<1x12x3xf32>'}}
  %0:3 = nn.lstm %x, %w, %r {hidden_size = 4 : i64} : (tensor<5x2x3xf32>, tensor<1x12x3xf32>, tensor<1x16x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c4_state(%x: tensor<2x5x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>, %h: tensor<1x2x4xf32>) {
  // expected-error @+1 {{[rnn_c4] initial_h must be [2, 1, 4] (1 direction(s), 1 gate(s) of hidden_size 4, 3 input features), got 'tensor<1x2x4xf32>'}}
  %0:2 = nn.rnn %x, %w, %r initial_h(%h) {hidden_size = 4 : i64, layout = 1 : i64} : (tensor<2x5x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>, tensor<1x2x4xf32>) -> (tensor<2x5x1x4xf32>, tensor<2x1x4xf32>)
  return
}

// -----

func.func @rnn_c5_count(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c5] sequence_lens has 3 entries for a batch of 2}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64, sequence_lens = array<i64: 5, 5, 5>} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @rnn_c5_range(%x: tensor<5x2x3xf32>, %w: tensor<1x4x3xf32>, %r: tensor<1x4x4xf32>) {
  // expected-error @+1 {{[rnn_c5] sequence length 6 is outside [0, 5]}}
  %0:2 = nn.rnn %x, %w, %r {hidden_size = 4 : i64, sequence_lens = array<i64: 6, 5>} : (tensor<5x2x3xf32>, tensor<1x4x3xf32>, tensor<1x4x4xf32>) -> (tensor<5x1x2x4xf32>, tensor<1x2x4xf32>)
  return
}
