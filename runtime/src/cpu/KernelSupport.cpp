//===- KernelSupport.cpp - shared checks and loops of the CPU kernels -----===//
//
// Argument checks, broadcasting plans and strided copies used by every kernel
// family (see KernelSupport.h).
//
//===----------------------------------------------------------------------===//
#include "KernelSupport.h"

namespace piperun::cpu {

int threadsFor(pipe_rank *r, int64_t work) {
  if (work < kParallelGrain)
    return 1;
  int64_t threads = std::max(1, kernelThreads(r));
  threads = std::min<int64_t>(threads, work / (kParallelGrain / 4));
  return static_cast<int>(std::max<int64_t>(1, threads));
}

std::string shapeText(int rank, const int64_t *shape) {
  std::string text = "[";
  for (int d = 0; d < rank; ++d) {
    if (d)
      text += ", ";
    text += std::to_string(shape[d]);
  }
  return text + "]";
}

std::string shapeText(const pipe_tensor *t) { return shapeText(t->rank, t->shape); }

std::string intsText(const pipe_ints &list) {
  if (list.n < 0 || list.n > PIPE_MAX_INTS)
    return "<invalid list>";
  return shapeText(list.n, list.v);
}

void requireTensor(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t) {
  if (!t)
    fail(r, "%s: argument '%s' is missing (NULL)", op, arg);
  if (t->rank < 0 || t->rank > PIPE_MAX_RANK)
    fail(r, "%s: argument '%s' has rank %d, expected 0..%d", op, arg, t->rank, PIPE_MAX_RANK);
  int64_t numel = 1;
  for (int d = 0; d < t->rank; ++d) {
    if (t->shape[d] < 0)
      fail(r, "%s: argument '%s' has a negative dim in shape %s", op, arg,
           shapeText(t).c_str());
    numel *= t->shape[d];
  }
  if (numel != t->numel)
    fail(r, "%s: argument '%s' has numel %lld but shape %s", op, arg,
         static_cast<long long>(t->numel), shapeText(t).c_str());
  if (numel > 0 && !t->data)
    fail(r, "%s: argument '%s' has no data", op, arg);
}

void failDtype(pipe_rank *r, const char *op, const char *arg, int32_t dtype,
               uint32_t allowed) {
  std::string names;
  for (int32_t d = PIPE_F32; d <= PIPE_BOOL; ++d)
    if (allowed & bit(d)) {
      if (!names.empty())
        names += ", ";
      names += dtypeName(d);
    }
  fail(r, "%s: argument '%s' has dtype %s, expected one of %s", op, arg, dtypeName(dtype),
       names.c_str());
}

void requireDtype(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                  int32_t dtype) {
  if (t->dtype != dtype)
    fail(r, "%s: argument '%s' has dtype %s, expected %s", op, arg, dtypeName(t->dtype),
         dtypeName(dtype));
}

void requireSameDtype(pipe_rank *r, const char *op, const char *argA, const pipe_tensor *a,
                      const char *argB, const pipe_tensor *b) {
  if (a->dtype != b->dtype)
    fail(r, "%s: argument '%s' has dtype %s, expected %s (the dtype of '%s')", op, argB,
         dtypeName(b->dtype), dtypeName(a->dtype), argA);
}

void requireSameShape(pipe_rank *r, const char *op, const char *argA, const pipe_tensor *a,
                      const char *argB, const pipe_tensor *b) {
  bool same = a->rank == b->rank;
  for (int d = 0; same && d < a->rank; ++d)
    same = a->shape[d] == b->shape[d];
  if (!same)
    fail(r, "%s: argument '%s' has shape %s, expected %s (the shape of '%s')", op, argB,
         shapeText(b).c_str(), shapeText(a).c_str(), argA);
}

void requireShape(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t, int rank,
                  const int64_t *shape) {
  bool same = t->rank == rank;
  for (int d = 0; same && d < rank; ++d)
    same = t->shape[d] == shape[d];
  if (!same)
    fail(r, "%s: argument '%s' has shape %s, expected %s", op, arg, shapeText(t).c_str(),
         shapeText(rank, shape).c_str());
}

void requireRank(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                 int rank) {
  if (t->rank != rank)
    fail(r, "%s: argument '%s' has rank %d (shape %s), expected rank %d", op, arg, t->rank,
         shapeText(t).c_str(), rank);
}

void requireMinRank(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                    int rank) {
  if (t->rank < rank)
    fail(r, "%s: argument '%s' has rank %d (shape %s), expected at least %d", op, arg,
         t->rank, shapeText(t).c_str(), rank);
}

void requireNumel(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t,
                  int64_t numel) {
  if (t->numel != numel)
    fail(r, "%s: argument '%s' has %lld elements (shape %s), expected %lld", op, arg,
         static_cast<long long>(t->numel), shapeText(t).c_str(),
         static_cast<long long>(numel));
}

void requireInts(pipe_rank *r, const char *op, const char *arg, const pipe_ints &list,
                 int count) {
  if (list.n < 0 || list.n > PIPE_MAX_INTS)
    fail(r, "%s: list '%s' is invalid (too long for pipe_ints)", op, arg);
  if (list.n != count)
    fail(r, "%s: list '%s' has %d entries %s, expected %d", op, arg, list.n,
         intsText(list).c_str(), count);
}

void requireFloat(pipe_rank *r, const char *op, const char *arg, const pipe_tensor *t) {
  if (!isFloat(t->dtype))
    failDtype(r, op, arg, t->dtype, bit(PIPE_F32) | bit(PIPE_F64));
}

void contiguousStrides(int rank, const int64_t *shape, int64_t *strides) {
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= shape[d];
  }
}

void StridedLoop::coalesce() {
  // Size-1 dims contribute nothing to any offset.
  int kept = 0;
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1)
      continue;
    shape[kept] = shape[d];
    for (int o = 0; o < operands; ++o)
      strides[o][kept] = strides[o][d];
    ++kept;
  }
  rank = kept;
  if (rank == 0)
    return;
  // Merge dim d into the run ending at `last` when every operand steps
  // through both as through one.
  int last = 0;
  for (int d = 1; d < rank; ++d) {
    bool mergeable = true;
    for (int o = 0; o < operands && mergeable; ++o)
      mergeable = strides[o][last] == strides[o][d] * shape[d];
    if (mergeable) {
      shape[last] *= shape[d];
      for (int o = 0; o < operands; ++o)
        strides[o][last] = strides[o][d];
    } else {
      ++last;
      shape[last] = shape[d];
      for (int o = 0; o < operands; ++o)
        strides[o][last] = strides[o][d];
    }
  }
  rank = last + 1;
}

int64_t StridedLoop::numel() const {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    n *= shape[d];
  return n;
}

void planBroadcast(pipe_rank *r, const char *op, const pipe_tensor *y, const char *yName,
                   int count, const pipe_tensor *const *inputs, const char *const *names,
                   StridedLoop &loop) {
  int maxRank = 0;
  for (int i = 0; i < count; ++i)
    maxRank = std::max(maxRank, inputs[i]->rank);
  if (y->rank != maxRank)
    fail(r, "%s: output '%s' has rank %d (shape %s), expected %d, the largest input rank", op,
         yName, y->rank, shapeText(y).c_str(), maxRank);
  loop = StridedLoop();
  loop.rank = y->rank;
  loop.operands = count + 1;
  for (int d = 0; d < y->rank; ++d)
    loop.shape[d] = y->shape[d];
  contiguousStrides(y->rank, y->shape, loop.strides[0]);
  for (int d = 0; d < y->rank; ++d) {
    // numpy: each input's dim (right-aligned) is 1 or the common size, and
    // the result is that common size (1 only when every input has 1).
    int64_t common = 1;
    for (int i = 0; i < count; ++i) {
      const pipe_tensor *t = inputs[i];
      int dim = d - (y->rank - t->rank);
      int64_t size = dim >= 0 ? t->shape[dim] : 1;
      if (size != 1) {
        if (common != 1 && size != common)
          fail(r, "%s: shapes do not broadcast: '%s' %s against the other inputs at output "
                  "dim %d (size %lld vs %lld)",
               op, names[i], shapeText(t).c_str(), d, static_cast<long long>(size),
               static_cast<long long>(common));
        common = size;
      }
    }
    if (y->shape[d] != common)
      fail(r, "%s: output '%s' has shape %s; dim %d should be %lld, the broadcast of the "
              "inputs",
           op, yName, shapeText(y).c_str(), d, static_cast<long long>(common));
  }
  for (int i = 0; i < count; ++i) {
    const pipe_tensor *t = inputs[i];
    int64_t strides[PIPE_MAX_RANK];
    contiguousStrides(t->rank, t->shape, strides);
    for (int d = 0; d < y->rank; ++d) {
      int dim = d - (y->rank - t->rank);
      loop.strides[i + 1][d] = (dim >= 0 && t->shape[dim] != 1) ? strides[dim] : 0;
    }
  }
  loop.coalesce();
}

void planExpand(pipe_rank *r, const char *op, const pipe_tensor *y, const char *yName,
                const pipe_tensor *x, const char *xName, StridedLoop &loop) {
  if (x->rank > y->rank)
    fail(r, "%s: '%s' %s has more dims than '%s' %s", op, xName, shapeText(x).c_str(), yName,
         shapeText(y).c_str());
  loop = StridedLoop();
  loop.rank = y->rank;
  loop.operands = 2;
  int64_t strides[PIPE_MAX_RANK];
  contiguousStrides(x->rank, x->shape, strides);
  contiguousStrides(y->rank, y->shape, loop.strides[0]);
  for (int d = 0; d < y->rank; ++d) {
    loop.shape[d] = y->shape[d];
    const int dim = d - (y->rank - x->rank);
    const int64_t size = dim >= 0 ? x->shape[dim] : 1;
    if (size != 1 && size != y->shape[d])
      fail(r, "%s: '%s' %s does not broadcast to '%s' %s (dim %d)", op, xName,
           shapeText(x).c_str(), yName, shapeText(y).c_str(), d);
    loop.strides[1][d] = size == 1 ? 0 : strides[dim];
  }
  loop.coalesce();
}

namespace {
template <typename U>
void copyRows(pipe_rank *r, const StridedLoop &loop, U *dst, const U *src) {
  forEachRow(r, loop, [&](const int64_t *offsets, int64_t length, const int64_t *step) {
    U *out = dst + offsets[0];
    const U *in = src + offsets[1];
    if (step[0] == 1 && step[1] == 1) {
      std::memcpy(out, in, static_cast<size_t>(length) * sizeof(U));
    } else {
      for (int64_t i = 0; i < length; ++i)
        out[i * step[0]] = in[i * step[1]];
    }
  });
}
} // namespace

void copyStrided(pipe_rank *r, const char *op, const StridedLoop &loop, void *dst,
                 const void *src, size_t elementSize) {
  switch (elementSize) {
  case 1: copyRows(r, loop, static_cast<uint8_t *>(dst), static_cast<const uint8_t *>(src)); return;
  case 2: copyRows(r, loop, static_cast<uint16_t *>(dst), static_cast<const uint16_t *>(src)); return;
  case 4: copyRows(r, loop, static_cast<uint32_t *>(dst), static_cast<const uint32_t *>(src)); return;
  case 8: copyRows(r, loop, static_cast<uint64_t *>(dst), static_cast<const uint64_t *>(src)); return;
  default: fail(r, "%s: unsupported element size %zu", op, elementSize);
  }
}

Scratch::Scratch(pipe_rank *r, int32_t dtype, int64_t count) : rank(r), tensor(nullptr) {
  pipe_ints shape{};
  shape.n = 1;
  shape.v[0] = std::max<int64_t>(count, 1);
  tensor = pipe_alloc(r, dtype, shape, PIPE_MEM_WORKSPACE);
}

Scratch::~Scratch() { pipe_free(rank, tensor); }

} // namespace piperun::cpu
