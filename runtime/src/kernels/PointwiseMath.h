//===- PointwiseMath.h - one element of the pointwise kernels -------*- C++ -*-===//
//
// The value of one element of unary, unary-gradient and binary kernels,
// shared by the CPU kernels and the CUDA ones (compiled by nvcc with
// --expt-relaxed-constexpr, as host and device functions): both backends
// compute the same formula in the same precision (unary functions in double,
// rounded once; binary ops in the dtype).
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_KERNELS_POINTWISE_MATH_H
#define PIPE_RUNTIME_KERNELS_POINTWISE_MATH_H

#include "pipe_runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define PIPE_HD __host__ __device__
#else
#define PIPE_HD
#endif

namespace piperun::pointwise {

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1/sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

template <typename T> PIPE_HD T sigmoidOf(T x) {
  // exp of a non-positive argument only: no overflow for large |x|.
  if (x >= T(0))
    return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T> PIPE_HD T unaryValue(int32_t fn, T x, T alpha, T beta) {
  switch (fn) {
  case PIPE_RELU: return x > T(0) ? x : T(0);
  case PIPE_ERF: return std::erf(x);
  case PIPE_TANH: return std::tanh(x);
  case PIPE_SIGMOID: return sigmoidOf(x);
  case PIPE_SQRT: return std::sqrt(x);
  case PIPE_EXP: return std::exp(x);
  case PIPE_LOG: return std::log(x);
  case PIPE_NEG: return -x;
  case PIPE_ABS: return std::abs(x);
  case PIPE_RECIPROCAL: return T(1) / x;
  case PIPE_FLOOR: return std::floor(x);
  case PIPE_CEIL: return std::ceil(x);
  // log(1 + e^x) = max(x, 0) + log1p(e^-|x|): exact for every x, where torch
  // returns x itself above its threshold 20 (they differ by < 2e-9 x there).
  case PIPE_SOFTPLUS: return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
  case PIPE_IDENTITY: return x;
  case PIPE_GELU: return T(0.5) * x * (T(1) + std::erf(x * T(kInvSqrt2)));
  case PIPE_GELU_TANH:
    return T(0.5) * x * (T(1) + std::tanh(T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x)));
  case PIPE_LEAKY_RELU: return x > T(0) ? x : x * alpha;
  case PIPE_HARD_SIGMOID: return std::max(T(0), std::min(T(1), alpha * x + beta));
  case PIPE_HARD_SWISH: return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5)));
  case PIPE_CLIP: return std::min(std::max(x, alpha), beta);
  case PIPE_SIN: return std::sin(x);
  case PIPE_COS: return std::cos(x);
  case PIPE_TAN: return std::tan(x);
  case PIPE_ASIN: return std::asin(x);
  case PIPE_ACOS: return std::acos(x);
  case PIPE_ATAN: return std::atan(x);
  case PIPE_SINH: return std::sinh(x);
  case PIPE_COSH: return std::cosh(x);
  case PIPE_ASINH: return std::asinh(x);
  case PIPE_ACOSH: return std::acosh(x);
  case PIPE_ATANH: return std::atanh(x);
  case PIPE_ROUND: return std::nearbyint(x); // the default rounding mode: halves to even
  case PIPE_SIGN: return T((x > T(0)) - (x < T(0)));
  default: return x;
  }
}

// dx for one element: `s` is the saved value the header names for `fn`.
template <typename T> PIPE_HD T unaryGradValue(int32_t fn, T s, T dy, T alpha, T beta) {
  switch (fn) {
  case PIPE_RELU: return s > T(0) ? dy : T(0); // s = y
  case PIPE_TANH: return dy * (T(1) - s * s);   // s = y
  case PIPE_SIGMOID: return dy * s * (T(1) - s);
  case PIPE_SQRT: return dy / (T(2) * s);
  case PIPE_EXP: return dy * s;
  case PIPE_RECIPROCAL: return -dy * (s * s);
  case PIPE_ERF: return dy * T(kTwoOverSqrtPi) * std::exp(-s * s); // s = x
  case PIPE_LOG: return dy / s;
  case PIPE_ABS: return s > T(0) ? dy : (s < T(0) ? -dy : T(0));
  case PIPE_SOFTPLUS: return dy * sigmoidOf(s);
  case PIPE_GELU: {
    T cdf = T(0.5) * (T(1) + std::erf(s * T(kInvSqrt2)));
    T pdf = T(kInvSqrt2Pi) * std::exp(T(-0.5) * s * s);
    return dy * (cdf + s * pdf);
  }
  case PIPE_GELU_TANH: {
    // d/dx 0.5 x (1 + tanh(u)), u = c (x + k x^3).
    T t = std::tanh(T(kSqrt2OverPi) * (s + T(kGeluCubic) * s * s * s));
    T du = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * s * s);
    return dy * (T(0.5) * (T(1) + t) + T(0.5) * s * (T(1) - t * t) * du);
  }
  case PIPE_LEAKY_RELU: return s > T(0) ? dy : dy * alpha;
  case PIPE_HARD_SIGMOID: {
    T v = alpha * s + beta;
    return (v > T(0) && v < T(1)) ? dy * alpha : T(0);
  }
  case PIPE_HARD_SWISH:
    // 0 below -3, (x/3 + 1/2) dy on [-3, 3), dy from 3 on (torch's vector
    // path; its scalar path takes 1.5 dy at exactly 3).
    if (s < T(-3))
      return T(0);
    if (s < T(3))
      return dy * (s / T(3) + T(0.5));
    return dy;
  case PIPE_CLIP: return (s >= alpha && s <= beta) ? dy : T(0);
  case PIPE_SIN: return dy * std::cos(s); // s = x
  case PIPE_COS: return -dy * std::sin(s);
  case PIPE_TAN: {
    T t = std::tan(s);
    return dy * (T(1) + t * t);
  }
  case PIPE_ASIN: return dy / std::sqrt(T(1) - s * s);
  case PIPE_ACOS: return -dy / std::sqrt(T(1) - s * s);
  case PIPE_ATAN: return dy / (T(1) + s * s);
  case PIPE_SINH: return dy * std::cosh(s);
  case PIPE_COSH: return dy * std::sinh(s);
  case PIPE_ASINH: return dy / std::sqrt(s * s + T(1));
  case PIPE_ACOSH: return dy / std::sqrt(s * s - T(1));
  case PIPE_ATANH: return dy / (T(1) - s * s);
  case PIPE_NEG: return -dy;
  case PIPE_IDENTITY: return dy;
  case PIPE_FLOOR:
  case PIPE_CEIL:
  case PIPE_ROUND:
  case PIPE_SIGN: return T(0);
  default: return T(0);
  }
}

// Integer arithmetic that never traps: division by zero is refused before
// the loop, and MIN / -1 wraps as two's complement does.
template <typename T> PIPE_HD T wrapNegate(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

template <typename T> PIPE_HD T binaryValue(int32_t fn, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (fn) {
    case PIPE_ADD: return a + b;
    case PIPE_SUB: return a - b;
    case PIPE_MUL: return a * b;
    case PIPE_DIV: return a / b;
    case PIPE_POW: return std::pow(a, b);
    case PIPE_MOD: {
      // Python's %: the result takes the divisor's sign (torch.remainder).
      T m = std::fmod(a, b);
      if (m != T(0) && ((m < T(0)) != (b < T(0))))
        m += b;
      return m;
    }
    case PIPE_FMOD: return std::fmod(a, b);
    case PIPE_MAX:
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
      return a > b ? a : b;
    case PIPE_MIN:
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
      return a < b ? a : b;
    default: return T(0);
    }
  } else {
    using U = std::make_unsigned_t<T>;
    switch (fn) {
    case PIPE_ADD: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
    case PIPE_SUB: return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
    case PIPE_MUL: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    case PIPE_DIV: return b == T(-1) ? wrapNegate(a) : a / b;
    case PIPE_FMOD: return b == T(-1) ? T(0) : a % b;
    case PIPE_MOD: {
      if (b == T(-1))
        return T(0);
      T m = a % b;
      if (m != 0 && ((m < 0) != (b < 0)))
        m += b;
      return m;
    }
    case PIPE_MAX: return a > b ? a : b;
    case PIPE_MIN: return a < b ? a : b;
    default: return T(0);
    }
  }
}

template <typename T> PIPE_HD uint8_t compareValue(int32_t fn, T a, T b) {
  switch (fn) {
  case PIPE_EQUAL: return a == b;
  case PIPE_LESS: return a < b;
  case PIPE_LESS_EQUAL: return a <= b;
  case PIPE_GREATER: return a > b;
  case PIPE_GREATER_EQUAL: return a >= b;
  default: return 0;
  }
}

/// One element of pipe_binary on inputs of type T into y at offset `at`: a
/// BOOL for the comparisons and for AND, OR (on BOOL inputs), else a T.
template <typename T>
PIPE_HD void binaryAt(int32_t fn, T a, T b, void *y, int64_t at) {
  if (fn >= PIPE_EQUAL && fn <= PIPE_GREATER_EQUAL) {
    static_cast<uint8_t *>(y)[at] = compareValue<T>(fn, a, b);
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    // BOOL: only the logical functions.
    static_cast<uint8_t *>(y)[at] = fn == PIPE_AND ? (a && b) : (a || b);
  } else {
    static_cast<T *>(y)[at] = binaryValue<T>(fn, a, b);
  }
}

/// A value converted to T: floats as C does; integers from floats truncate
/// toward zero, saturate at the type's range and map NaN to 0; BOOL
/// (uint8_t) is v != 0.
template <typename To, typename From> PIPE_HD To convertValue(From v) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return v != From(0) ? 1 : 0;
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(v);
  } else if constexpr (std::is_floating_point_v<From>) {
    if (v != v)
      return 0;
    // The largest integers of To are not exact in From: compare against 2^(bits-1).
    const From limit =
        static_cast<From>(static_cast<double>(uint64_t{1} << std::numeric_limits<To>::digits));
    if (v >= limit)
      return std::numeric_limits<To>::max();
    if (v < -limit)
      return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

/// y[i] (dtype `to`) = x[i] (dtype `from`) converted: pipe_k_cast's element,
/// for F32, F64, I64, I32 and BOOL.
template <typename From> PIPE_HD void castInto(int32_t to, From v, void *y, int64_t i) {
  switch (to) {
  case PIPE_F32: static_cast<float *>(y)[i] = convertValue<float>(v); break;
  case PIPE_F64: static_cast<double *>(y)[i] = convertValue<double>(v); break;
  case PIPE_I64: static_cast<int64_t *>(y)[i] = convertValue<int64_t>(v); break;
  case PIPE_I32: static_cast<int32_t *>(y)[i] = convertValue<int32_t>(v); break;
  case PIPE_BOOL: static_cast<uint8_t *>(y)[i] = convertValue<uint8_t>(v); break;
  default: break;
  }
}
PIPE_HD inline void castElement(int32_t from, int32_t to, const void *x, void *y, int64_t i) {
  switch (from) {
  case PIPE_F32: castInto(to, static_cast<const float *>(x)[i], y, i); break;
  case PIPE_F64: castInto(to, static_cast<const double *>(x)[i], y, i); break;
  case PIPE_I64: castInto(to, static_cast<const int64_t *>(x)[i], y, i); break;
  case PIPE_I32: castInto(to, static_cast<const int32_t *>(x)[i], y, i); break;
  case PIPE_BOOL: castInto(to, static_cast<const uint8_t *>(x)[i], y, i); break;
  default: break;
  }
}

// What `saved` must be for pipe_k_unary_grad: 'y', 'x', or nothing.
inline char savedKind(int32_t fn) {
  switch (fn) {
  case PIPE_RELU: case PIPE_TANH: case PIPE_SIGMOID: case PIPE_SQRT: case PIPE_EXP:
  case PIPE_RECIPROCAL:
    return 'y';
  case PIPE_ERF: case PIPE_LOG: case PIPE_ABS: case PIPE_SOFTPLUS: case PIPE_GELU:
  case PIPE_GELU_TANH: case PIPE_LEAKY_RELU: case PIPE_HARD_SIGMOID: case PIPE_HARD_SWISH:
  case PIPE_CLIP: case PIPE_SIN: case PIPE_COS: case PIPE_TAN: case PIPE_ASIN: case PIPE_ACOS:
  case PIPE_ATAN: case PIPE_SINH: case PIPE_COSH: case PIPE_ASINH: case PIPE_ACOSH:
  case PIPE_ATANH:
    return 'x';
  case PIPE_NEG: case PIPE_IDENTITY: case PIPE_FLOOR: case PIPE_CEIL: case PIPE_ROUND:
  case PIPE_SIGN:
    return '-';
  default:
    return '?';
  }
}

} // namespace piperun::pointwise

#endif // PIPE_RUNTIME_KERNELS_POINTWISE_MATH_H
