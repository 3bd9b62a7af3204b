//===- Elementwise.cpp - unary, binary, where, cast, fill and range kernels ===//
//
// Pointwise kernels with numpy broadcasting; unary functions and gradients are
// evaluated in double and rounded once, binary ops are IEEE ops in the dtype.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"
#include "kernels/PointwiseMath.h"

using namespace piperun;
using namespace piperun::cpu;
using namespace piperun::pointwise;

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

StridedLoop piperun::cpu::binaryChecks(pipe_rank *r, int32_t fn, const pipe_tensor *a,
                                       const pipe_tensor *b, const pipe_tensor *y) {
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
  if (logical)
    requireDtype(r, op, "a", a, PIPE_BOOL);
  if (fn == PIPE_POW)
    requireFloat(r, op, "a", a);
  return loop;
}

StridedLoop piperun::cpu::whereChecks(pipe_rank *r, const pipe_tensor *cond,
                                      const pipe_tensor *x, const pipe_tensor *z,
                                      const pipe_tensor *y) {
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
  return loop;
}

extern "C" {

void pipe_k_fill(pipe_rank *r, pipe_tensor *y, double value) {
  PIPE_DEVICE_KERNEL(r, fill, pipe_k_fill, y, value);
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
  PIPE_DEVICE_KERNEL(r, unary, pipe_k_unary, fn, x, y, alpha, beta);
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
  PIPE_DEVICE_KERNEL(r, unaryGrad, pipe_k_unary_grad, fn, saved, dy, dx, alpha, beta);
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
  PIPE_DEVICE_KERNEL(r, binary, pipe_k_binary, fn, a, b, y);
  const StridedLoop loop = binaryChecks(r, fn, a, b, y);
  char op[48];
  std::snprintf(op, sizeof op, "binary(%s)", binaryName(fn));
  const bool compare = fn >= PIPE_EQUAL && fn <= PIPE_GREATER_EQUAL;
  const bool logical = fn == PIPE_AND || fn == PIPE_OR;
  if (logical) {
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
  PIPE_DEVICE_KERNEL(r, where, pipe_k_where, cond, x, z, y);
  const StridedLoop loop = whereChecks(r, cond, x, z, y);
  const char *op = "where";
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
  PIPE_DEVICE_KERNEL(r, cast, pipe_k_cast, x, y);
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
