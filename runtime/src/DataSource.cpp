//===- DataSource.cpp - synthetic and .npz micro-batch data ----------------===//
//
// pipe_input / pipe_label / pipe_output_grad allocate the requested tensor
// (WORKSPACE) and fill it from the run's data source. Micro-batch k of an .npz
// array is rows [k*b, (k+1)*b) of its (step's) mini-batch, b the requested
// first dimension (docs/runtime-abi.md, "pipe-run").
//
//===----------------------------------------------------------------------===//
#include "DataSource.h"

#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

namespace piperun {

std::string dataArrayName(DataRole role, int32_t index) {
  const char *prefix = role == DataRole::Input   ? "input_"
                       : role == DataRole::Label ? "label_"
                                                 : "output_grad_";
  return prefix + std::to_string(index);
}

namespace {

/// Streams of data are keyed by negative ids, so they never meet a dropout
/// mask's (a node id, >= 0).
int64_t streamId(DataRole role, int32_t index) {
  int64_t base = role == DataRole::Input ? 0 : role == DataRole::Label ? 1 : 2;
  return -1 - (base << 24) - index;
}

/// Synthetic floats copy runs of kRun values from a table of 2^16 standard
/// normals drawn once per seed (Box-Muller), each run from an offset drawn
/// from the stream: about 1 ns per element where Box-Muller per element took
/// 30-40 ns, which made data generation a third of a small CNN's forward.
constexpr uint64_t kNormalTableSize = uint64_t(1) << 16;
constexpr int64_t kRun = 1024;

const std::vector<float> &normalTable(uint64_t seed) {
  static std::mutex mutex;
  static std::map<uint64_t, std::vector<float>> tables; // never erased
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, added] = tables.try_emplace(seed);
  if (added) {
    const uint64_t key = randomBits(randomBits(seed, 0), ~uint64_t(0));
    const double twoPi = 6.283185307179586;
    it->second.resize(kNormalTableSize);
    for (uint64_t i = 0; i < kNormalTableSize; ++i) {
      double u1 = uniform01(randomBits(key, 2 * i));
      double u2 = uniform01(randomBits(key, 2 * i + 1));
      it->second[i] = static_cast<float>(std::sqrt(-2 * std::log(1 - u1)) * std::cos(twoPi * u2));
    }
  }
  return it->second;
}

} // namespace

void fillSynthetic(pipe_rank *r, DataRole role, int32_t index, int32_t microbatch, int64_t range,
                   pipe_tensor *t) {
  const uint64_t key = streamKey(runSeed(r), currentStep(r), microbatch, streamId(role, index));
  const int64_t n = t->numel;
  switch (t->dtype) {
  case PIPE_F32:
  case PIPE_F64: {
    const std::vector<float> &table = normalTable(runSeed(r));
    for (int64_t start = 0; start < n; start += kRun) {
      const uint64_t offset = randomBits(key, static_cast<uint64_t>(start / kRun));
      const int64_t end = std::min(n, start + kRun);
      for (int64_t i = start; i < end; ++i) {
        float z = table[(offset + static_cast<uint64_t>(i - start)) & (kNormalTableSize - 1)];
        if (t->dtype == PIPE_F32)
          static_cast<float *>(t->data)[i] = z;
        else
          static_cast<double *>(t->data)[i] = z;
      }
    }
    break;
  }
  case PIPE_I64:
  case PIPE_I32: {
    // range 0 means unbounded: [0, 2^31).
    const double span = range > 0 ? static_cast<double>(range) : 2147483648.0;
    for (int64_t i = 0; i < n; ++i) {
      auto value =
          static_cast<int64_t>(uniform01(randomBits(key, static_cast<uint64_t>(i))) * span);
      if (t->dtype == PIPE_I64)
        static_cast<int64_t *>(t->data)[i] = value;
      else
        static_cast<int32_t *>(t->data)[i] = static_cast<int32_t>(value);
    }
    break;
  }
  case PIPE_BOOL:
    for (int64_t i = 0; i < n; ++i)
      static_cast<uint8_t *>(t->data)[i] = randomBits(key, static_cast<uint64_t>(i)) >> 63;
    break;
  default:
    fail(r, "synthetic %s data is not supported yet", dtypeName(t->dtype));
  }
}

NpzData::NpzData(const std::string &path, int microbatches)
    : path_(path), microbatches_(microbatches) {
  for (NpyArray &array : readNpz(path))
    arrays_[array.name] = std::move(array);
}

std::string NpzData::check(DataRole role, int32_t index, int32_t dtype,
                           const std::vector<int64_t> &shape, int64_t steps) const {
  const std::string name = dataArrayName(role, index);
  auto it = arrays_.find(name);
  std::string expected = std::string(dtypeName(dtype)) + " " + shapeString([&] {
                           std::vector<int64_t> batch = shape;
                           if (!batch.empty())
                             batch[0] *= microbatches_;
                           return batch;
                         }());
  if (it == arrays_.end())
    return path_ + ": no array " + name + " (expected " + expected + ")";
  const NpyArray &array = it->second;
  if (shape.empty())
    return path_ + ": array " + name + ": the program asks for a scalar per micro-batch";
  if (array.dtype != dtype)
    return path_ + ": array " + name + " is " + dtypeName(array.dtype) + ", the program expects " +
           expected;
  std::vector<int64_t> batch = shape;
  batch[0] *= microbatches_;
  std::vector<int64_t> rows = array.shape;
  bool perStep = rows.size() == batch.size() + 1;
  if (perStep)
    rows.erase(rows.begin());
  if (rows != batch)
    return path_ + ": array " + name + " has shape " + shapeString(array.shape) + ", expected " +
           shapeString(batch) + " or [steps, " + shapeString(batch).substr(1) + " (" +
           std::to_string(microbatches_) + " micro-batches of " + shapeString(shape) + ")";
  if (perStep && array.shape[0] < steps)
    return path_ + ": array " + name + " holds " + std::to_string(array.shape[0]) +
           " steps, the run takes " + std::to_string(steps);
  return "";
}

void NpzData::fill(pipe_rank *r, DataRole role, int32_t index, int32_t microbatch, int64_t range,
                   pipe_tensor *t) const {
  (void)range;
  std::vector<int64_t> shape = shapeVector(t);
  std::string problem = check(role, index, t->dtype, shape, currentStep(r) + 1);
  if (!problem.empty())
    fail(r, "%s", problem.c_str());
  if (microbatch < 0 || microbatch >= microbatches_)
    fail(r, "%s: micro-batch %d of %d", dataArrayName(role, index).c_str(), microbatch,
         microbatches_);
  const NpyArray &array = arrays_.at(dataArrayName(role, index));
  const int64_t bytes = tensorBytes(r, t);
  const int64_t batchBytes = bytes * microbatches_;
  const bool perStep = array.shape.size() == shape.size() + 1;
  int64_t offset = (perStep ? currentStep(r) * batchBytes : 0) + microbatch * bytes;
  std::memcpy(t->data, array.bytes.data() + offset, static_cast<size_t>(bytes));
}

} // namespace piperun

using namespace piperun;

static pipe_tensor *provide(pipe_rank *r, DataRole role, const char *what, int32_t microbatch,
                            int32_t index, int32_t dtype, pipe_ints shape, int64_t range) {
  if (microbatch < 0 || index < 0)
    fail(r, "%s: micro-batch %d, index %d", what, microbatch, index);
  if (r->transport && microbatch >= r->settings.microbatches)
    fail(r, "%s: micro-batch %d of a step of %d", what, microbatch, r->settings.microbatches);
  pipe_tensor *t = newTensor(r, dtype, shape, PIPE_MEM_WORKSPACE, what);
  try {
    HostAccess host(r);
    pipe_tensor *data = host.mirrorOverwrite(t);
    const int32_t ofStep = stepMicrobatch(r, microbatch);
    if (r->settings.data)
      r->settings.data->fill(r, role, index, ofStep, range, data);
    else
      fillSynthetic(r, role, index, ofStep, range, data);
    host.commit();
  } catch (...) {
    destroyTensor(r, t);
    throw;
  }
  return t;
}

extern "C" {

pipe_tensor *pipe_input(pipe_rank *r, int32_t microbatch, int32_t index, int32_t dtype,
                        pipe_ints shape, int64_t range) {
  return provide(r, DataRole::Input, "pipe_input", microbatch, index, dtype, shape, range);
}

pipe_tensor *pipe_label(pipe_rank *r, int32_t microbatch, int32_t index, int32_t dtype,
                        pipe_ints shape, int64_t range) {
  return provide(r, DataRole::Label, "pipe_label", microbatch, index, dtype, shape, range);
}

pipe_tensor *pipe_output_grad(pipe_rank *r, int32_t microbatch, int32_t index, int32_t dtype,
                              pipe_ints shape) {
  return provide(r, DataRole::OutputGrad, "pipe_output_grad", microbatch, index, dtype, shape, 0);
}

} // extern "C"
