//===- Reduce.cpp - sum, mean, max, min and prod over a set of axes -------===//
//
// Reductions in memory order: the innermost group of dims is either reduced (a
// contiguous run per output) or kept (a run of outputs accumulated together).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "KernelSupport.h"

using namespace piperun;
using namespace piperun::cpu;

namespace {

const char *reduceName(int32_t fn) {
  switch (fn) {
  case PIPE_REDUCE_SUM: return "reduce(sum)";
  case PIPE_REDUCE_MEAN: return "reduce(mean)";
  case PIPE_REDUCE_MAX: return "reduce(max)";
  case PIPE_REDUCE_MIN: return "reduce(min)";
  case PIPE_REDUCE_PROD: return "reduce(prod)";
  default: return "reduce";
  }
}

// The accumulator: double for float sums and products, the element type for
// max/min; integers accumulate in 64 bits, wrapping like two's complement.
template <typename T> struct Accumulate {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  int32_t fn;

  Acc initial() const {
    if (fn == PIPE_REDUCE_PROD)
      return Acc(1);
    if (fn == PIPE_REDUCE_MAX) {
      if constexpr (std::is_floating_point_v<T>)
        return -std::numeric_limits<Acc>::infinity();
      else
        return std::numeric_limits<Acc>::min();
    }
    if (fn == PIPE_REDUCE_MIN) {
      if constexpr (std::is_floating_point_v<T>)
        return std::numeric_limits<Acc>::infinity();
      else
        return std::numeric_limits<Acc>::max();
    }
    return Acc(0);
  }

  Acc combine(Acc acc, T value) const {
    const Acc v = static_cast<Acc>(value);
    switch (fn) {
    case PIPE_REDUCE_SUM:
    case PIPE_REDUCE_MEAN:
      if constexpr (std::is_integral_v<T>)
        return static_cast<Acc>(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v));
      else
        return acc + v;
    case PIPE_REDUCE_PROD:
      if constexpr (std::is_integral_v<T>)
        return static_cast<Acc>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v));
      else
        return acc * v;
    case PIPE_REDUCE_MAX:
      // NaN wins, as in torch.amax.
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(v) || std::isnan(acc))
          return std::numeric_limits<Acc>::quiet_NaN();
      return v > acc ? v : acc;
    case PIPE_REDUCE_MIN:
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(v) || std::isnan(acc))
          return std::numeric_limits<Acc>::quiet_NaN();
      return v < acc ? v : acc;
    default: return acc;
    }
  }

  T finish(Acc acc, int64_t count) const {
    if (fn == PIPE_REDUCE_MEAN)
      return static_cast<T>(acc / static_cast<Acc>(count));
    return static_cast<T>(acc);
  }
};

// x (contiguous) as groups of adjacent dims that are all kept or all reduced.
struct ReducePlan {
  int groups = 0;
  int64_t size[PIPE_MAX_RANK] = {};
  int64_t stride[PIPE_MAX_RANK] = {};
  bool reduced[PIPE_MAX_RANK] = {};
};

template <typename T>
void reduceLoop(pipe_rank *r, int32_t fn, const ReducePlan &plan, const T *x, T *y,
                int64_t reduceCount) {
  using Acc = typename Accumulate<T>::Acc;
  const Accumulate<T> acc{fn};
  const int last = plan.groups - 1;
  const bool innerReduced = plan.reduced[last];
  const int64_t innerLength = plan.size[last];
  const int64_t outputsPerBlock = innerReduced ? 1 : innerLength;
  // Outer groups: kept ones pick the block, reduced ones are walked per block.
  int kept[PIPE_MAX_RANK], walked[PIPE_MAX_RANK];
  int keptCount = 0, walkedCount = 0;
  int64_t blocks = 1, walks = 1;
  for (int g = 0; g < last; ++g) {
    if (plan.reduced[g]) {
      walked[walkedCount++] = g;
      walks *= plan.size[g];
    } else {
      kept[keptCount++] = g;
      blocks *= plan.size[g];
    }
  }
  const int threads = threadsFor(r, blocks * walks * innerLength);
  Scratch accumulators(r, PIPE_F64, static_cast<int64_t>(threads) * outputsPerBlock);
  static_assert(sizeof(Acc) == sizeof(double), "accumulators are 8 bytes");
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    int team = 1, id = 0;
#ifdef _OPENMP
    team = omp_get_num_threads();
    id = omp_get_thread_num();
#endif
    Acc *sums = reinterpret_cast<Acc *>(accumulators.as<double>()) + id * outputsPerBlock;
    for (int64_t block = blocks * id / team; block < blocks * (id + 1) / team; ++block) {
      int64_t base = 0, rest = block;
      for (int i = keptCount - 1; i >= 0; --i) {
        base += (rest % plan.size[kept[i]]) * plan.stride[kept[i]];
        rest /= plan.size[kept[i]];
      }
      for (int64_t j = 0; j < outputsPerBlock; ++j)
        sums[j] = acc.initial();
      int64_t index[PIPE_MAX_RANK] = {};
      int64_t offset = base;
      for (int64_t walk = 0; walk < walks; ++walk) {
        const T *run = x + offset;
        if (innerReduced) {
          Acc total = sums[0];
          for (int64_t i = 0; i < innerLength; ++i)
            total = acc.combine(total, run[i]);
          sums[0] = total;
        } else {
          for (int64_t j = 0; j < innerLength; ++j)
            sums[j] = acc.combine(sums[j], run[j]);
        }
        for (int i = walkedCount - 1; i >= 0; --i) {
          const int g = walked[i];
          offset += plan.stride[g];
          if (++index[i] < plan.size[g])
            break;
          offset -= plan.stride[g] * plan.size[g];
          index[i] = 0;
        }
      }
      T *out = y + block * outputsPerBlock;
      for (int64_t j = 0; j < outputsPerBlock; ++j)
        out[j] = acc.finish(sums[j], reduceCount);
    }
  }
}

} // namespace

ReduceShape piperun::cpu::reduceChecks(pipe_rank *r, int32_t fn, const pipe_tensor *x,
                                       const pipe_tensor *y, const pipe_ints &axes) {
  const char *op = reduceName(fn);
  if (fn < PIPE_REDUCE_SUM || fn > PIPE_REDUCE_PROD)
    fail(r, "reduce: unknown function %d", fn);
  requireTensor(r, op, "x", x);
  requireTensor(r, op, "y", y);
  requireSameDtype(r, op, "x", x, "y", y);
  if (axes.n < 0 || axes.n > x->rank)
    fail(r, "%s: list 'axes' %s does not fit x of rank %d", op, intsText(axes).c_str(),
         x->rank);
  ReduceShape shape;
  for (int i = 0; i < axes.n; ++i) {
    const int64_t axis = axes.v[i];
    if (axis < 0 || axis >= x->rank || (i > 0 && axis <= axes.v[i - 1]))
      fail(r, "%s: list 'axes' %s must be sorted, unique and within [0, %d)", op,
           intsText(axes).c_str(), x->rank);
    shape.reduced[axis] = true;
  }
  for (int d = 0; d < x->rank; ++d)
    (shape.reduced[d] ? shape.reduceCount : shape.keptVolume) *= x->shape[d];
  if (y->numel != shape.keptVolume)
    fail(r, "%s: output 'y' has %lld elements (shape %s), expected %lld for x %s reduced "
            "over %s",
         op, static_cast<long long>(y->numel), shapeText(y).c_str(),
         static_cast<long long>(shape.keptVolume), shapeText(x).c_str(),
         intsText(axes).c_str());
  if (fn == PIPE_REDUCE_MEAN)
    requireFloat(r, op, "x", x);
  return shape;
}

extern "C" {

void pipe_k_reduce(pipe_rank *r, int32_t fn, const pipe_tensor *x, pipe_tensor *y,
                   pipe_ints axes) {
  PIPE_DEVICE_KERNEL(r, reduce, pipe_k_reduce, fn, x, y, axes);
  const char *op = reduceName(fn);
  const ReduceShape shape = reduceChecks(r, fn, x, y, axes);
  const bool *isReduced = shape.reduced;
  const int64_t keptVolume = shape.keptVolume, reduceCount = shape.reduceCount;

  dispatchDtype<kNumberDtypes>(r, op, "x", x->dtype, [&](auto tag) {
    using T = decltype(tag);
    T *out = static_cast<T *>(y->data);
    if (keptVolume == 0)
      return;
    if (reduceCount == 0) {
      // Reducing nothing: the identity of the reduction, as torch.
      if (fn == PIPE_REDUCE_MAX || fn == PIPE_REDUCE_MIN)
        fail(r, "%s: cannot reduce an empty axis (x %s)", op, shapeText(x).c_str());
      const Accumulate<T> acc{fn};
      for (int64_t i = 0; i < keptVolume; ++i)
        out[i] = fn == PIPE_REDUCE_MEAN
                     ? static_cast<T>(std::numeric_limits<double>::quiet_NaN())
                     : acc.finish(acc.initial(), 1);
      return;
    }
    // Merge neighbouring dims of the same kind; size-1 dims go with anything.
    ReducePlan plan;
    int64_t strides[PIPE_MAX_RANK];
    contiguousStrides(x->rank, x->shape, strides);
    for (int d = 0; d < x->rank; ++d) {
      if (x->shape[d] == 1)
        continue;
      if (plan.groups > 0 && plan.reduced[plan.groups - 1] == isReduced[d]) {
        plan.size[plan.groups - 1] *= x->shape[d];
        plan.stride[plan.groups - 1] = strides[d];
        continue;
      }
      plan.size[plan.groups] = x->shape[d];
      plan.stride[plan.groups] = strides[d];
      plan.reduced[plan.groups] = isReduced[d];
      ++plan.groups;
    }
    if (plan.groups == 0) {
      plan.groups = 1;
      plan.size[0] = 1;
      plan.stride[0] = 1;
    }
    reduceLoop<T>(r, fn, plan, static_cast<const T *>(x->data), out, reduceCount);
  });
}

} // extern "C"
