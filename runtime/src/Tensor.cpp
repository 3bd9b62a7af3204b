//===- Tensor.cpp - allocation, constants, views and frees of tensors -----===//
//
// pipe_alloc, pipe_constant, pipe_splat, pipe_view and pipe_free: one
// reference per pipe_tensor, storages shared by views and charged once to
// their category (docs/runtime-abi.md, "Tensors and ownership").
//
//===----------------------------------------------------------------------===//
#include "Tensor.h"

#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace piperun {

namespace {

bool isKnownDtype(int32_t dtype) { return dtype >= PIPE_F32 && dtype <= PIPE_BOOL; }

/// Round to nearest even, as torch and numpy convert float to bfloat16 / half.
uint16_t toBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if (std::isnan(value))
    return 0x7FC0;
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

uint16_t toHalf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t sign = (bits >> 16) & 0x8000;
  int32_t exponent = static_cast<int32_t>((bits >> 23) & 0xFF) - 127 + 15;
  uint32_t mantissa = bits & 0x7FFFFF;
  if (std::isnan(value))
    return static_cast<uint16_t>(sign | 0x7E00);
  if (exponent >= 31)
    return static_cast<uint16_t>(sign | 0x7C00);
  if (exponent <= 0) {
    if (exponent < -10)
      return static_cast<uint16_t>(sign);
    mantissa |= 0x800000;
    int shift = 14 - exponent;
    uint32_t half = mantissa >> shift;
    uint32_t rest = mantissa & ((1u << shift) - 1), midpoint = 1u << (shift - 1);
    if (rest > midpoint || (rest == midpoint && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exponent) << 10) | (mantissa >> 13);
  uint32_t rest = mantissa & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half; // a carry into the exponent is the correct rounding
  return static_cast<uint16_t>(half);
}
} // namespace

size_t dtypeSize(pipe_rank *r, int32_t dtype) {
  const int bytes = dtypeBytes(dtype);
  if (bytes == 0)
    fail(r, "unknown dtype %d", dtype);
  return static_cast<size_t>(bytes);
}

const char *dtypeName(int32_t dtype) {
  switch (dtype) {
  case PIPE_F32:
    return "f32";
  case PIPE_F64:
    return "f64";
  case PIPE_F16:
    return "f16";
  case PIPE_BF16:
    return "bf16";
  case PIPE_I64:
    return "i64";
  case PIPE_I32:
    return "i32";
  case PIPE_BOOL:
    return "bool";
  default:
    return "unknown-dtype";
  }
}

int64_t checkedNumel(pipe_rank *r, const pipe_ints &shape, const char *what) {
  if (shape.n < 0 || shape.n > PIPE_MAX_RANK)
    fail(r, "%s: a shape of %d dims (at most %d)", what, shape.n, PIPE_MAX_RANK);
  int64_t numel = 1;
  for (int i = 0; i < shape.n; ++i) {
    if (shape.v[i] < 0)
      fail(r, "%s: negative dimension %lld in %s", what, static_cast<long long>(shape.v[i]),
           shapeText(shape).c_str());
    if (shape.v[i] != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / shape.v[i])
      fail(r, "%s: shape %s is too large", what, shapeText(shape).c_str());
    numel *= shape.v[i];
  }
  return numel;
}

pipe_tensor *tensorOver(pipe_rank *r, Storage *storage, void *data, int32_t dtype,
                        const pipe_ints &shape, int64_t numel) {
  auto *box = new TensorBox{};
  box->borrowed = false;
  box->inSlot = false;
  box->node = r->currentNode;
  r->tensors.insert(&box->tensor);
  pipe_tensor &t = box->tensor;
  t.data = data;
  t.dtype = dtype;
  t.rank = shape.n;
  for (int i = 0; i < shape.n; ++i)
    t.shape[i] = shape.v[i];
  t.numel = numel;
  t.storage = storage;
  return &t;
}

pipe_tensor *newTensor(pipe_rank *r, int32_t dtype, const pipe_ints &shape, int32_t category,
                       const char *what) {
  if (!isKnownDtype(dtype))
    fail(r, "%s: unknown dtype %d", what, dtype);
  if (category < 0 || category >= PIPE_MEM_CATEGORIES)
    fail(r, "%s: unknown memory category %d", what, category);
  int64_t numel = checkedNumel(r, shape, what);
  int64_t bytes = numel * static_cast<int64_t>(dtypeSize(r, dtype));
  Device *device = deviceOf(r);
  Storage *storage = nullptr;
  if (device)
    storage = onDevice(r, [&] { return allocateDeviceStorage(r->memory, bytes, category); });
  else if (r->device)
    // A staged kernel's own scratch: host memory, not the device's, so uncharged.
    storage = allocateStorage(r->memory, 0, category, bytes);
  else
    storage = allocateStorage(r->memory, bytes, category);
  if (!storage)
    failOutOfMemory(r, what, bytes, category, describe(dtype, shape));
  return tensorOver(r, storage, storage->data, dtype, shape, numel);
}

const char *categoryName(int32_t category) {
  static const char *const kNames[PIPE_MEM_CATEGORIES] = {
      "parameters", "gradients", "optimizer", "saved", "comm", "workspace", "constants"};
  return category >= 0 && category < PIPE_MEM_CATEGORIES ? kNames[category] : "unknown";
}

void failOutOfMemory(pipe_rank *r, const char *what, int64_t bytes, int32_t category,
                     const std::string &tensor) {
  Device *device = deviceOf(r);
  std::string held;
  for (int32_t c = 0; c < PIPE_MEM_CATEGORIES; ++c)
    if (r->memory.live(c) > 0)
      held += std::string(held.empty() ? "" : ", ") + categoryName(c) + " " +
              std::to_string(r->memory.live(c));
  std::string stage = r->inAction && r->action.stage >= 0
                          ? " in stage " + std::to_string(r->action.stage)
                          : std::string();
  std::string where = device ? device->name() : std::string("the host");
  fail(r,
       "%s: out of memory on %s: %lld bytes of %s asked for %s%s; this rank holds %lld bytes "
       "(%s)",
       what, where.c_str(), static_cast<long long>(bytes), categoryName(category), tensor.c_str(),
       stage.c_str(), static_cast<long long>(r->memory.liveTotal()),
       held.empty() ? "none" : held.c_str());
}

TensorBox *boxOf(pipe_rank *r, const pipe_tensor *t, const char *what) {
  if (!t)
    fail(r, "%s: a NULL tensor", what);
  if (!r->tensors.count(t))
    fail(r, "%s: not a live tensor of this rank (freed already, or never made by it)", what);
  return reinterpret_cast<TensorBox *>(const_cast<pipe_tensor *>(t));
}

void destroyTensor(pipe_rank *r, pipe_tensor *t) {
  if (!t)
    return;
  r->tensors.erase(t);
  release(r->memory, static_cast<Storage *>(t->storage));
  delete reinterpret_cast<TensorBox *>(t);
}

const TensorBox *anyTransientTensor(pipe_rank *r) {
  for (const pipe_tensor *t : r->tensors) {
    int32_t category = static_cast<const Storage *>(t->storage)->category;
    if (category == PIPE_MEM_WORKSPACE || category == PIPE_MEM_COMM || category == PIPE_MEM_SAVED)
      return reinterpret_cast<const TensorBox *>(t);
  }
  return nullptr;
}

int64_t tensorBytes(pipe_rank *r, const pipe_tensor *t) {
  return t->numel * static_cast<int64_t>(dtypeSize(r, t->dtype));
}

pipe_ints shapeOf(const pipe_tensor *t) {
  pipe_ints shape{};
  shape.n = t->rank;
  for (int i = 0; i < t->rank; ++i)
    shape.v[i] = t->shape[i];
  return shape;
}

std::vector<int64_t> shapeVector(const pipe_tensor *t) {
  return std::vector<int64_t>(t->shape, t->shape + t->rank);
}

std::string shapeText(const pipe_ints &shape) {
  std::string text = "[";
  for (int i = 0; i < shape.n && i < PIPE_MAX_INTS; ++i)
    text += (i ? ", " : "") + std::to_string(shape.v[i]);
  return text + "]";
}

std::string describe(int32_t dtype, const pipe_ints &shape) {
  return std::string(dtypeName(dtype)) + " " + shapeText(shape);
}

std::string describe(const pipe_tensor *t) { return describe(t->dtype, shapeOf(t)); }

} // namespace piperun

using namespace piperun;

extern "C" {

pipe_tensor *pipe_alloc(pipe_rank *r, int32_t dtype, pipe_ints shape, int32_t category) {
  return newTensor(r, dtype, shape, category, "pipe_alloc");
}

pipe_tensor *pipe_constant(pipe_rank *r, int32_t dtype, pipe_ints shape, const void *data) {
  if (!isKnownDtype(dtype))
    fail(r, "pipe_constant: unknown dtype %d", dtype);
  int64_t numel = checkedNumel(r, shape, "pipe_constant");
  if (!data && numel > 0)
    fail(r, "pipe_constant: NULL data for %s", describe(dtype, shape).c_str());
  if (deviceOf(r)) {
    // Copied to the device once, on first use, and kept for the run.
    const int64_t bytes = numel * static_cast<int64_t>(dtypeSize(r, dtype));
    const std::pair<const void *, int64_t> key{data, bytes};
    auto found = r->deviceConstants.find(key);
    if (found == r->deviceConstants.end()) {
      pipe_tensor *t = newTensor(r, dtype, shape, PIPE_MEM_CONSTANTS, "pipe_constant");
      uploadTensor(r, t, data);
      auto *uploaded = static_cast<Storage *>(t->storage);
      retain(uploaded);
      r->deviceConstants[key] = uploaded; // only once uploaded: teardown releases it
      return t;
    }
    retain(found->second);
    return tensorOver(r, found->second, found->second->data, dtype, shape, numel);
  }
  Storage *storage = externalStorage(r->memory, data, PIPE_MEM_CONSTANTS);
  return tensorOver(r, storage, storage->data, dtype, shape, numel);
}

pipe_tensor *pipe_splat(pipe_rank *r, int32_t dtype, pipe_ints shape, double value) {
  pipe_tensor *t = newTensor(r, dtype, shape, PIPE_MEM_CONSTANTS, "pipe_splat");
  HostAccess host(r);
  void *data = host.overwrite(t);
  for (int64_t i = 0; i < t->numel; ++i) {
    switch (dtype) {
    case PIPE_F32:
      static_cast<float *>(data)[i] = static_cast<float>(value);
      break;
    case PIPE_F64:
      static_cast<double *>(data)[i] = value;
      break;
    case PIPE_F16:
      static_cast<uint16_t *>(data)[i] = toHalf(static_cast<float>(value));
      break;
    case PIPE_BF16:
      static_cast<uint16_t *>(data)[i] = toBfloat16(static_cast<float>(value));
      break;
    case PIPE_I64:
      static_cast<int64_t *>(data)[i] = static_cast<int64_t>(value);
      break;
    case PIPE_I32:
      static_cast<int32_t *>(data)[i] = static_cast<int32_t>(value);
      break;
    case PIPE_BOOL:
      static_cast<uint8_t *>(data)[i] = value != 0;
      break;
    }
  }
  host.commit();
  return t;
}

pipe_tensor *pipe_view(pipe_rank *r, pipe_tensor *t, pipe_ints shape) {
  boxOf(r, t, "pipe_view");
  int64_t numel = checkedNumel(r, shape, "pipe_view");
  if (numel != t->numel)
    fail(r, "pipe_view: %s has %lld elements, the view %s wants %lld", describe(t).c_str(),
         static_cast<long long>(t->numel), shapeText(shape).c_str(), static_cast<long long>(numel));
  auto *storage = static_cast<Storage *>(t->storage);
  retain(storage);
  return tensorOver(r, storage, t->data, t->dtype, shape, numel);
}

void pipe_free(pipe_rank *r, pipe_tensor *t) {
  if (!t)
    return;
  TensorBox *box = boxOf(r, t, "pipe_free");
  if (box->borrowed)
    fail(r, "pipe_free: %s is a parameter (pipe_param returns a borrowed tensor)",
         describe(t).c_str());
  if (box->inSlot)
    fail(r, "pipe_free: %s was handed to a saved slot (pipe_save takes the reference)",
         describe(t).c_str());
  destroyTensor(r, t);
}

} // extern "C"
