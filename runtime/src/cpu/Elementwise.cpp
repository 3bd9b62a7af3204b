//===- Elementwise.cpp - unary, binary, where, cast, fill and range kernels ===//
//
// Pointwise kernels with numpy broadcasting; unary functions and gradients are
// evaluated in double and rounded once, binary ops are IEEE ops in the dtype.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

const char *unaryName(int32_t fn) {
  static const char *const names[] = {
      "relu", "erf",   "tanh",     "sigmoid",  "sqrt",     "exp",       "log",
      "neg",  "abs",   "reciprocal", "not",    "floor",    "ceil",      "softplus",
      "identity", "gelu", "gelu_tanh", "leaky_relu", "hard_sigmoid", "hard_swish", "clip",
      "sin",  "cos",   "tan",      "asin",     "acos",     "atan",      "sinh",
      "cosh", "asinh", "acosh",   "atanh",    "round",    "sign"};
  if (fn < 0 || fn >= static_cast<int32_t>(sizeof(names) / sizeof(names[0])))
    return "?";
  return names[fn];
}

const char *binaryName(int32_t fn) {
  static const char *const names[] = {"add",  "sub",   "mul",        "div",     "pow",
                                      "mod",  "fmod",  "equal",      "less",    "less_equal",
                                      "greater", "greater_equal", "and", "or",   "max",
                                      "min"};
  if (fn < 0 || fn >= static_cast<int32_t>(sizeof(names) / sizeof(names[0])))
    return "?";
  return names[fn];
}

// sqrt(2/pi) and the cubic coefficient of the tanh approximation of GELU.
constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluCubic = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794; // 1/sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

template <typename T> T sigmoidOf(T x) {
  // exp of a non-positive argument only: no overflow for large |x|.
  if (x >= T(0))
    return T(1) / (T(1) + std::exp(-x));
  T e = std::exp(x);
  return e / (T(1) + e);
}

template <typename T> T unaryValue(int32_t fn, T x, T alpha, T beta) {
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
template <typename T> T unaryGradValue(int32_t fn, T s, T dy, T alpha, T beta) {
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

// What `saved` must be for pipe_k_unary_grad: 'y', 'x', or nothing.
char savedKind(int32_t fn) {
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

// Integer arithmetic that never traps: division by zero is refused before
// the loop, and MIN / -1 wraps as two's complement does.
template <typename T> T wrapNegate(T a) {
  using U = std::make_unsigned_t<T>;
  return static_cast<T>(U(0) - static_cast<U>(a));
}

template <typename T> T binaryValue(int32_t fn, T a, T b) {
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

template <typename T> uint8_t compareValue(int32_t fn, T a, T b) {
  switch (fn) {
  case PIPE_EQUAL: return a == b;
  case PIPE_LESS: return a < b;
  case PIPE_LESS_EQUAL: return a <= b;
  case PIPE_GREATER: return a > b;
  case PIPE_GREATER_EQUAL: return a >= b;
  default: return 0;
  }
}

// Runs `value(a, b)` over the broadcast of a and b into y.
template <typename Out, typename In, typename Fn>
void binaryLoop(pipe_rank *r, const StridedLoop &loop, Out *y, const In *a, const In *b,
                Fn value) {
  forEachRow(r, loop, [&](const int64_t *offsets, int64_t length, const int64_t *step) {
    Out *out = y + offsets[0];
    const In *left = a + offsets[1];
    const In *right = b + offsets[2];
    if (step[1] == 1 && step[2] == 1) {
      for (int64_t i = 0; i < length; ++i)
        out[i] = value(left[i], right[i]);
    } else if (step[1] == 1 && step[2] == 0) {
      const In scalar = right[0];
      for (int64_t i = 0; i < length; ++i)
        out[i] = value(left[i], scalar);
    } else if (step[1] == 0 && step[2] == 1) {
      const In scalar = left[0];
      for (int64_t i = 0; i < length; ++i)
        out[i] = value(scalar, right[i]);
    } else {
      for (int64_t i = 0; i < length; ++i)
        out[i] = value(left[i * step[1]], right[i * step[2]]);
    }
  });
}

} // namespace

extern "C" {

void pipe_k_fill(pipe_rank *r, pipe_tensor *y, double value) {
  PIPE_DEVICE_STAGED(r, pipe_k_fill, y, value);
  const char *op = "fill";
  requireTensor(r, op, "y", y);
  dispatchDtype<kAnyDtype>(r, op, "y", y->dtype, [&](auto tag) {
    using T = decltype(tag);
    T *data = static_cast<T *>(y->data);
    const T v = convertValue<T>(value);
    const int64_t n = y->numel;
    const int threads = threadsFor(r, n);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < n; ++i)
      data[i] = v;
  });
}

void pipe_k_unary(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y, double alpha,
                  double beta) {
  PIPE_DEVICE_STAGED(r, pipe_k_unary, fn, x, y, alpha, beta);
  char op[48];
  std::snprintf(op, sizeof op, "unary(%s)", unaryName(fn));
  if (fn < PIPE_RELU || fn > PIPE_SIGN)
    fail(r, "unary: unknown function %d", fn);
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameShape(r, op, "x", x, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  const int64_t n = x->numel;
  if (fn == PIPE_IDENTITY) {
    const size_t element = dtypeSize(r, x->dtype);
    if (n > 0 && y->data != x->data)
      std::memcpy(y->data, x->data, static_cast<size_t>(n) * element);
    return;
  }
  if (fn == PIPE_NOT) {
    requireDtype(r, op, "x", x, PIPE_BOOL);
    const uint8_t *in = static_cast<const uint8_t *>(x->data);
    uint8_t *out = static_cast<uint8_t *>(y->data);
    for (int64_t i = 0; i < n; ++i)
      out[i] = in[i] ? 0 : 1;
    return;
  }
  if (fn == PIPE_NEG || fn == PIPE_ABS) {
    dispatchDtype<kNumberDtypes>(r, op, "x", x->dtype, [&](auto tag) {
      using T = decltype(tag);
      const T *in = static_cast<const T *>(x->data);
      T *out = static_cast<T *>(y->data);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_integral_v<T>)
          out[i] = (fn == PIPE_NEG || in[i] < 0) ? wrapNegate(in[i]) : in[i];
        else
          out[i] = fn == PIPE_NEG ? -in[i] : std::abs(in[i]);
      }
    });
    return;
  }
  if (fn == PIPE_CLIP && std::isnan(alpha))
    alpha = -HUGE_VAL;
  if (fn == PIPE_CLIP && std::isnan(beta))
    beta = HUGE_VAL;
  dispatchDtype<kFloatDtypes>(r, op, "x", x->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *in = static_cast<const T *>(x->data);
    T *out = static_cast<T *>(y->data);
    const int threads = threadsFor(r, n * 8);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(unaryValue<double>(fn, in[i], alpha, beta));
  });
}

void pipe_k_unary_grad(pipe_rank *r, int32_t fn, const pipe_tensor *saved, const pipe_tensor *dy,
                       pipe_tensor *dx, double alpha, double beta) {
  PIPE_DEVICE_STAGED(r, pipe_k_unary_grad, fn, saved, dy, dx, alpha, beta);
  char op[48];
  std::snprintf(op, sizeof op, "unary_grad(%s)", unaryName(fn));
  const char kind = savedKind(fn);
  if (kind == '?')
    fail(r, "%s: function %d has no gradient", op, fn);
  requireTensor(r, op, "dy", dy);
  requireTensor(r, op, "dx", dx);
  requireSameShape(r, op, "dy", dy, "dx", dx);
  requireSameDtype(r, op, "dy", dy, "dx", dx);
  requireFloat(r, op, "dy", dy);
  if (kind != '-') {
    const char *name = kind == 'y' ? "saved (y)" : "saved (x)";
    requireTensor(r, op, name, saved);
    requireSameShape(r, op, "dy", dy, name, saved);
    requireSameDtype(r, op, "dy", dy, name, saved);
  }
  if (fn == PIPE_CLIP && std::isnan(alpha))
    alpha = -HUGE_VAL;
  if (fn == PIPE_CLIP && std::isnan(beta))
    beta = HUGE_VAL;
  const int64_t n = dy->numel;
  dispatchDtype<kFloatDtypes>(r, op, "dy", dy->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *s = kind != '-' ? static_cast<const T *>(saved->data) : nullptr;
    const T *g = static_cast<const T *>(dy->data);
    T *out = static_cast<T *>(dx->data);
    const int threads = threadsFor(r, n * 8);
#pragma omp parallel for num_threads(threads) if (threads > 1)
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<T>(unaryGradValue<double>(fn, s ? s[i] : T(0), g[i], alpha, beta));
  });
}

void pipe_k_binary(pipe_rank *r, int32_t fn, const pipe_tensor *a, const pipe_tensor *b,
                   pipe_tensor *y) {
  PIPE_DEVICE_STAGED(r, pipe_k_binary, fn, a, b, y);
  char op[48];
  std::snprintf(op, sizeof op, "binary(%s)", binaryName(fn));
  if (fn < PIPE_ADD || fn > PIPE_MIN)
    fail(r, "binary: unknown function %d", fn);
  requireTensor(r, op, "a", a);
  requireTensor(r, op, "b", b);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "a", a, "b", b);
  const bool compare = fn >= PIPE_EQUAL && fn <= PIPE_GREATER_EQUAL;
  const bool logical = fn == PIPE_AND || fn == PIPE_OR;
  if (compare || logical)
    requireDtype(r, op, "y", y, PIPE_BOOL);
  else
    requireSameDtype(r, op, "a", a, "y", y);

  const pipe_tensor *inputs[2] = {a, b};
  const char *names[2] = {"a", "b"};
  StridedLoop loop;
  planBroadcast(r, op, y, "y", 2, inputs, names, loop);

  if (logical) {
    requireDtype(r, op, "a", a, PIPE_BOOL);
    const bool isAnd = fn == PIPE_AND;
    binaryLoop(r, loop, static_cast<uint8_t *>(y->data), static_cast<const uint8_t *>(a->data),
               static_cast<const uint8_t *>(b->data), [isAnd](uint8_t p, uint8_t q) -> uint8_t {
                 return isAnd ? (p && q) : (p || q);
               });
    return;
  }
  if (compare) {
    dispatchDtype<kAnyDtype>(r, op, "a", a->dtype, [&](auto tag) {
      using T = decltype(tag);
      binaryLoop(r, loop, static_cast<uint8_t *>(y->data), static_cast<const T *>(a->data),
                 static_cast<const T *>(b->data),
                 [fn](T p, T q) { return compareValue<T>(fn, p, q); });
    });
    return;
  }
  if (fn == PIPE_POW)
    requireFloat(r, op, "a", a);
  dispatchDtype<kNumberDtypes>(r, op, "a", a->dtype, [&](auto tag) {
    using T = decltype(tag);
    const T *bData = static_cast<const T *>(b->data);
    if constexpr (std::is_integral_v<T>) {
      if (fn == PIPE_DIV || fn == PIPE_MOD || fn == PIPE_FMOD)
        for (int64_t i = 0; i < b->numel; ++i)
          if (bData[i] == 0)
            fail(r, "%s: integer division by zero ('b' element %lld)", op,
                 static_cast<long long>(i));
    }
    binaryLoop(r, loop, static_cast<T *>(y->data), static_cast<const T *>(a->data), bData,
               [fn](T p, T q) { return binaryValue<T>(fn, p, q); });
  });
}

void pipe_k_where(pipe_rank *r, const pipe_tensor *cond, const pipe_tensor *x,
                  const pipe_tensor *z, pipe_tensor *y) {
  PIPE_DEVICE_STAGED(r, pipe_k_where, cond, x, z, y);
  const char *op = "where";
  requireTensor(r, op, "cond", cond);
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "z", z);
  requireTensor(r, op, "y", y);
  requireDtype(r, op, "cond", cond, PIPE_BOOL);
  requireSameDtype(r, op, "x", x, "z", z);
  requireSameDtype(r, op, "x", x, "y", y);
  const pipe_tensor *inputs[3] = {cond, x, z};
  const char *names[3] = {"cond", "x", "z"};
  StridedLoop loop;
  planBroadcast(r, op, y, "y", 3, inputs, names, loop);
  dispatchElementSize(r, op, x->dtype, [&](auto tag) {
    using U = decltype(tag);
    const uint8_t *c = static_cast<const uint8_t *>(cond->data);
    const U *p = static_cast<const U *>(x->data);
    const U *q = static_cast<const U *>(z->data);
    U *out = static_cast<U *>(y->data);
    forEachRow(r, loop, [&](const int64_t *offsets, int64_t length, const int64_t *step) {
      for (int64_t i = 0; i < length; ++i)
        out[offsets[0] + i * step[0]] = c[offsets[1] + i * step[1]]
                                            ? p[offsets[2] + i * step[2]]
                                            : q[offsets[3] + i * step[3]];
    });
  });
}

void pipe_k_cast(pipe_rank *r, const pipe_tensor *x, pipe_tensor *y) {
  PIPE_DEVICE_STAGED(r, pipe_k_cast, x, y);
  const char *op = "cast";
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameShape(r, op, "x", x, "y", y);
  const int64_t n = x->numel;
  dispatchDtype<kAnyDtype>(r, op, "x", x->dtype, [&](auto fromTag) {
    using From = decltype(fromTag);
    dispatchDtype<kAnyDtype>(r, op, "y", y->dtype, [&](auto toTag) {
      using To = decltype(toTag);
      const From *in = static_cast<const From *>(x->data);
      To *out = static_cast<To *>(y->data);
      const int threads = threadsFor(r, n);
#pragma omp parallel for num_threads(threads) if (threads > 1)
      for (int64_t i = 0; i < n; ++i)
        out[i] = convertValue<To>(in[i]);
    });
  });
}

void pipe_k_range(pipe_rank *r, pipe_tensor *y, double start, double delta) {
  PIPE_DEVICE_STAGED(r, pipe_k_range, y, start, delta);
  const char *op = "range";
  requireTensor(r, op, "y", y);
  requireRank(r, op, "y", y, 1);
  dispatchDtype<kNumberDtypes>(r, op, "y", y->dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = static_cast<T *>(y->data);
    for (int64_t i = 0; i < y->numel; ++i) {
      if constexpr (std::is_integral_v<T>)
        // Integer ranges stay exact: no detour through double for big values.
        out[i] = static_cast<T>(static_cast<int64_t>(start) + i * static_cast<int64_t>(delta));
      else
        out[i] = static_cast<T>(start + static_cast<double>(i) * delta);
    }
  });
}

} // extern "C"
