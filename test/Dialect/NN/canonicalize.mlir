// RUN: pipe-opt %s -canonicalize -split-input-file | FileCheck %s

// CHECK-LABEL: func @shape_arithmetic
// CHECK-DAG: %[[SHAPE:.*]] = nn.constant dense<[2, 12]> : tensor<2xi64>
// CHECK: %[[R:.*]] = nn.reshape %{{.*}}, %[[SHAPE]]
// CHECK: return %[[R]]
func.func @shape_arithmetic(%x: tensor<2x3x4xf32>) -> tensor<2x12xf32> {
  %s = nn.shape %x : (tensor<2x3x4xf32>) -> tensor<3xi64>
  %i0 = nn.constant dense<0> : tensor<i64>
  %d0 = nn.gather %s, %i0 : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %a = nn.constant dense<[0]> : tensor<1xi64>
  %u0 = nn.unsqueeze %d0, %a : (tensor<i64>, tensor<1xi64>) -> tensor<1xi64>
  %i1 = nn.constant dense<[1, 2]> : tensor<2xi64>
  %d12 = nn.gather %s, %i1 : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  %st = nn.constant dense<[0]> : tensor<1xi64>
  %en = nn.constant dense<[1]> : tensor<1xi64>
  %one = nn.constant dense<[1]> : tensor<1xi64>
  %d1 = nn.slice %d12, %st, %en, %st, %one : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %d2 = nn.slice %d12, %en, %en, %st, %one : (tensor<2xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<0xi64>
  %i2 = nn.constant dense<[1]> : tensor<1xi64>
  %d2b = nn.gather %d12, %i2 : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %m = nn.mul %d1, %d2b : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  %c = nn.concat %u0, %m, %d2 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>, tensor<0xi64>) -> tensor<2xi64>
  %r = nn.reshape %x, %c : (tensor<2x3x4xf32>, tensor<2xi64>) -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>
}

// -----

// CHECK-LABEL: func @identity_and_noop_reshape
// CHECK-NEXT: return %arg0
func.func @identity_and_noop_reshape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = nn.identity %x : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %s = nn.constant dense<[2, 3]> : tensor<2xi64>
  %1 = nn.reshape %0, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  %2 = nn.expand %1, %s : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  return %2 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @inactive_dropout
// CHECK-NOT: nn.dropout
// CHECK: return %arg0, %arg0
func.func @inactive_dropout(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %ratio = nn.constant dense<0.5> : tensor<f32>
  %off = nn.constant dense<false> : tensor<i1>
  %0 = nn.dropout %x, %ratio, %off : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> tensor<2x3xf32>
  %zero = nn.constant dense<0.0> : tensor<f32>
  %on = nn.constant dense<true> : tensor<i1>
  %1 = nn.dropout %x, %zero, %on : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> tensor<2x3xf32>
  return %0, %1 : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @inactive_dropout_mask
// CHECK: %[[ONES:.*]] = nn.constant dense<true> : tensor<2x3xi1>
// CHECK: return %arg0, %[[ONES]]
func.func @inactive_dropout_mask(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>) {
  %ratio = nn.constant dense<0.5> : tensor<f32>
  %off = nn.constant dense<false> : tensor<i1>
  %0:2 = nn.dropout %x, %ratio, %off : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> (tensor<2x3xf32>, tensor<2x3xi1>)
  return %0#0, %0#1 : tensor<2x3xf32>, tensor<2x3xi1>
}

// -----

// CHECK-LABEL: func @active_dropout_stays
// CHECK: nn.dropout
func.func @active_dropout_stays(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %ratio = nn.constant dense<0.1> : tensor<f32>
  %on = nn.constant dense<true> : tensor<i1>
  %0 = nn.dropout %x, %ratio, %on : (tensor<2x3xf32>, tensor<f32>, tensor<i1>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func @constants
// CHECK-DAG: nn.constant dense<[0, 2, 4, 6]> : tensor<4xi64>
// CHECK-DAG: nn.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-DAG: nn.constant dense<[3, 0]> : tensor<2xi64>
// CHECK-DAG: nn.constant dense<[true, false]> : tensor<2xi1>
// CHECK-DAG: nn.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: nn.constant dense<[-2, 2]> : tensor<2xi64>
// CHECK-NOT: nn.range
// CHECK-NOT: nn.constant_of_shape
// CHECK-NOT: nn.where
// CHECK-NOT: nn.equal
// CHECK-NOT: nn.cast
// CHECK-NOT: nn.mod
func.func @constants() -> (tensor<4xi64>, tensor<2x3xf32>, tensor<2xi64>, tensor<2xi1>, tensor<2xf32>, tensor<2xi64>) {
  %s = nn.constant dense<0> : tensor<i64>
  %l = nn.constant dense<8> : tensor<i64>
  %d = nn.constant dense<2> : tensor<i64>
  %r = nn.range %s, %l, %d : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<4xi64>
  %shape = nn.constant dense<[2, 3]> : tensor<2xi64>
  %z = nn.constant_of_shape %shape {value = dense<0.0> : tensor<1xf32>} : (tensor<2xi64>) -> tensor<2x3xf32>
  %c = nn.constant dense<[true, false]> : tensor<2xi1>
  %x = nn.constant dense<[3, 4]> : tensor<2xi64>
  %w = nn.where %c, %x, %s : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %e = nn.equal %x, %x : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
  %n = nn.not %e : (tensor<2xi1>) -> tensor<2xi1>
  %f = nn.equal %shape, %shape : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi1>
  %g = nn.and %f, %c : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  %one = nn.constant dense<[1, 2]> : tensor<2xi64>
  %fl = nn.cast %one {to = f32} : (tensor<2xi64>) -> tensor<2xf32>
  %neg = nn.constant dense<[-3, 3]> : tensor<2xi64>
  %m = nn.mod %one, %neg : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %r, %z, %w, %g, %fl, %m : tensor<4xi64>, tensor<2x3xf32>, tensor<2xi64>, tensor<2xi1>, tensor<2xf32>, tensor<2xi64>
}

// -----

// Booleans cast as 1, not -1; fmod = 1 is C's fmod; unsigned values and
// overflowing arithmetic are not folded.
// CHECK-LABEL: func @fold_edge_cases
// CHECK-DAG: %[[ONE:.*]] = nn.constant dense<[1, 0]> : tensor<2xi64>
// CHECK-DAG: %[[ONEF:.*]] = nn.constant dense<[1.000000e+00, 0.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[FMOD:.*]] = nn.constant dense<-1> : tensor<i64>
// CHECK-DAG: %[[MOD:.*]] = nn.constant dense<2> : tensor<i64>
// CHECK-DAG: %[[LESS:.*]] = nn.less
// CHECK-DAG: %[[DIV:.*]] = nn.div
// CHECK-DAG: %[[MUL:.*]] = nn.mul
// CHECK: return %[[ONE]], %[[ONEF]], %[[FMOD]], %[[MOD]], %[[LESS]], %[[DIV]], %[[MUL]]
func.func @fold_edge_cases() -> (tensor<2xi64>, tensor<2xf32>, tensor<i64>, tensor<i64>, tensor<i1>, tensor<i64>, tensor<i64>) {
  %b = nn.constant dense<[true, false]> : tensor<2xi1>
  %0 = nn.cast %b {to = i64} : (tensor<2xi1>) -> tensor<2xi64>
  %1 = nn.cast %b {to = f32} : (tensor<2xi1>) -> tensor<2xf32>
  %m7 = nn.constant dense<-7> : tensor<i64>
  %p3 = nn.constant dense<3> : tensor<i64>
  %2 = nn.mod %m7, %p3 {fmod = 1 : i64} : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %3 = nn.mod %m7, %p3 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %u200 = nn.constant dense<200> : tensor<ui8>
  %u100 = nn.constant dense<100> : tensor<ui8>
  %4 = nn.less %u200, %u100 : (tensor<ui8>, tensor<ui8>) -> tensor<i1>
  %min = nn.constant dense<-9223372036854775808> : tensor<i64>
  %m1 = nn.constant dense<-1> : tensor<i64>
  %5 = nn.div %min, %m1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %6 = nn.mul %min, %m1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2xi64>, tensor<2xf32>, tensor<i64>, tensor<i64>, tensor<i1>, tensor<i64>, tensor<i64>
}

// -----

// And/Or/Not of constants fold.
// CHECK-LABEL: func @logic
// CHECK-NEXT: %[[R:.*]] = nn.constant dense<[false, true]> : tensor<2xi1>
// CHECK-NEXT: return %[[R]]
func.func @logic() -> tensor<2xi1> {
  %a = nn.constant dense<[true, true]> : tensor<2xi1>
  %b = nn.constant dense<[false, true]> : tensor<2xi1>
  %c = nn.and %a, %b : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  %d = nn.or %c, %b : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
  return %d : tensor<2xi1>
}

// -----

// Integer Neg and Abs fold (an axis count negated in an expanded
// LayerNormalization); a float constant cast to another float type folds,
// rounded to nearest (a double epsilon cast to float); INT64_MIN does not
// negate.
// CHECK-LABEL: func @negate_abs_and_float_casts
// CHECK-DAG: nn.constant dense<[1, -2]> : tensor<2xi64>
// CHECK-DAG: nn.constant dense<[1, 2]> : tensor<2xi64>
// CHECK-DAG: nn.constant dense<9.99999997E-7> : tensor<f32>
// CHECK-DAG: nn.neg %{{.*}} : (tensor<i64>) -> tensor<i64>
func.func @negate_abs_and_float_casts() -> (tensor<2xi64>, tensor<2xi64>, tensor<f32>, tensor<i64>) {
  %a = nn.constant dense<[-1, 2]> : tensor<2xi64>
  %n = nn.neg %a : (tensor<2xi64>) -> tensor<2xi64>
  %m = nn.abs %a : (tensor<2xi64>) -> tensor<2xi64>
  %d = nn.constant dense<1.0e-6> : tensor<f64>
  %f = nn.cast %d {to = f32} : (tensor<f64>) -> tensor<f32>
  %min = nn.constant dense<-9223372036854775808> : tensor<i64>
  %o = nn.neg %min : (tensor<i64>) -> tensor<i64>
  return %n, %m, %f, %o : tensor<2xi64>, tensor<2xi64>, tensor<f32>, tensor<i64>
}
