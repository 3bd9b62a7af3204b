//===- Parameters.cpp - parameters, their gradients and loading ------------===//
//
// pipe_declare_param loads a parameter's bytes from the model (ONNX raw_data or
// external data: little-endian, row-major) or, for a textual model without
// values, draws them from the seed; it makes the fp32 gradient buffer of a
// trainable parameter and, on its owner, the optimizer state.
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <climits>
#include <cstdlib>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the runtime reads little-endian tensor data as it is: a big-endian host needs byte swaps"
#endif

namespace piperun {

namespace {

std::string folderOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string realPath(const std::string &path) {
  char resolved[PATH_MAX];
  return ::realpath(path.c_str(), resolved) ? std::string(resolved) : std::string();
}

/// The file an external-data location names, under the rules the importer
/// applies (docs/reliability.md): relative, no ".." component, and its real
/// path (symbolic links resolved) a file inside the real path of the model's
/// folder. Anything else stops the rank; nothing outside is opened.
std::string externalDataFile(pipe_rank *r, const std::string &label, const std::string &location) {
  if (location[0] == '/')
    fail(r, "parameter %s: external data location '%s' is absolute; it must be relative to the "
            "model's folder", label.c_str(), location.c_str());
  size_t start = 0;
  while (start <= location.size()) {
    size_t end = location.find('/', start);
    if (end == std::string::npos)
      end = location.size();
    if (location.compare(start, end - start, "..") == 0 && end - start == 2)
      fail(r, "parameter %s: external data location '%s' contains '..'; it must stay inside the "
              "model's folder", label.c_str(), location.c_str());
    start = end + 1;
  }
  const std::string folder = folderOf(r->settings.modelPath);
  const std::string realFolder = realPath(folder), realFile = realPath(folder + "/" + location);
  if (realFolder.empty())
    fail(r, "parameter %s: the model's folder %s does not exist", label.c_str(), folder.c_str());
  if (realFile.empty())
    fail(r, "parameter %s: cannot open external data '%s' in %s (%s)", label.c_str(),
         location.c_str(), folder.c_str(), std::strerror(errno));
  if (realFile.compare(0, realFolder.size() + 1, realFolder + "/") != 0)
    fail(r, "parameter %s: external data location '%s' leaves the model's folder (through a "
            "symbolic link)", label.c_str(), location.c_str());
  return realFile;
}

void loadBytes(pipe_rank *r, const std::string &name, const std::string &path, int64_t offset,
               int64_t bytes, void *into) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail(r, "parameter %s: cannot open %s (%s)", name.c_str(), path.c_str(), std::strerror(errno));
  in.seekg(0, std::ios::end);
  int64_t size = static_cast<int64_t>(in.tellg());
  if (offset < 0 || offset + bytes > size)
    fail(r, "parameter %s: needs bytes [%lld, %lld) of %s, which has %lld", name.c_str(),
         static_cast<long long>(offset), static_cast<long long>(offset + bytes), path.c_str(),
         static_cast<long long>(size));
  in.seekg(offset);
  in.read(static_cast<char *>(into), bytes);
  if (!in)
    fail(r, "parameter %s: reading %s failed", name.c_str(), path.c_str());
}

/// Uniform in [-1/sqrt(fan_in), 1/sqrt(fan_in)) for floats (fan_in: the
/// elements per leading index, or all of a vector), zero for the rest; keyed
/// by the parameter id, so tied copies on several ranks agree.
void initialise(pipe_rank *r, int32_t id, pipe_tensor *t) {
  if (t->dtype != PIPE_F32 && t->dtype != PIPE_F64) {
    zeroTensor(r, t);
    return;
  }
  HostAccess host(r);
  void *data = host.overwrite(t);
  int64_t fanIn = t->rank >= 2 ? t->numel / t->shape[0] : t->numel;
  double bound = 1.0 / std::sqrt(static_cast<double>(fanIn > 0 ? fanIn : 1));
  uint64_t key = streamKey(runSeed(r), -1, -1, id);
  for (int64_t i = 0; i < t->numel; ++i) {
    double value = (2 * uniform01(randomBits(key, static_cast<uint64_t>(i))) - 1) * bound;
    if (t->dtype == PIPE_F32)
      static_cast<float *>(data)[i] = static_cast<float>(value);
    else
      static_cast<double *>(data)[i] = value;
  }
  host.commit();
}

pipe_tensor *borrowed(pipe_tensor *t) {
  reinterpret_cast<TensorBox *>(t)->borrowed = true;
  return t;
}

NpyArray arrayOf(pipe_rank *r, const std::string &name, const pipe_tensor *t) {
  NpyArray array;
  array.name = name;
  array.dtype = t->dtype;
  array.shape = shapeVector(t);
  array.bytes.resize(static_cast<size_t>(tensorBytes(r, t)));
  downloadTensor(r, array.bytes.data(), t);
  return array;
}

} // namespace

Parameter &parameterOf(pipe_rank *r, int32_t id, const char *what) {
  if (id < 0 || id >= static_cast<int32_t>(r->params.size()) || !r->params[id].declared)
    fail(r, "%s: parameter %d is not declared on this rank", what, id);
  return r->params[id];
}

std::vector<NpyArray> ownedParameters(pipe_rank *r) {
  std::vector<NpyArray> arrays;
  for (const Parameter &p : r->params)
    if (p.declared && p.owner == r->id)
      arrays.push_back(arrayOf(r, p.name, p.value));
  return arrays;
}

std::vector<NpyArray> ownedGradients(pipe_rank *r) {
  std::vector<NpyArray> arrays;
  for (const Parameter &p : r->params)
    if (p.declared && p.owner == r->id && p.gradient)
      arrays.push_back(arrayOf(r, p.name, p.gradient));
  return arrays;
}

} // namespace piperun

using namespace piperun;

extern "C" {

void pipe_declare_param(pipe_rank *r, int32_t id, const char *name, int32_t dtype, pipe_ints shape,
                        int32_t source, const char *path, int64_t offset, int64_t length,
                        int32_t trainable, int32_t owner_rank) {
  std::string label = name ? name : "#" + std::to_string(id);
  if (id < 0 || id > (1 << 24))
    fail(r, "pipe_declare_param: parameter %s has id %d", label.c_str(), id);
  if (id >= static_cast<int32_t>(r->params.size()))
    r->params.resize(static_cast<size_t>(id) + 1);
  Parameter &p = r->params[id];
  if (p.declared)
    fail(r, "pipe_declare_param: parameter %d (%s) is declared twice", id, label.c_str());
  if (owner_rank < 0 || owner_rank >= r->settings.ranks)
    fail(r, "parameter %s: owner rank %d is not a rank of this run (%d ranks)", label.c_str(),
         owner_rank, r->settings.ranks);
  if (trainable && dtype != PIPE_F32)
    fail(r, "parameter %s: a trainable %s parameter (only f32 ones train yet)", label.c_str(),
         dtypeName(dtype));
  if (trainable && owner_rank == r->id && !r->optimizer.set)
    fail(r, "parameter %s: declared before pipe_set_optimizer (it decides the state size)",
         label.c_str());

  pipe_tensor *value =
      borrowed(newTensor(r, dtype, shape, PIPE_MEM_PARAMETERS, "pipe_declare_param"));
  p.declared = true;
  p.name = label;
  p.value = value;
  p.trainable = trainable != 0;
  p.owner = owner_rank;
  const int64_t bytes = tensorBytes(r, value);

  switch (r->settings.randomParameters ? PIPE_SOURCE_INLINE : source) {
  case PIPE_SOURCE_FILE:
  case PIPE_SOURCE_EXTERNAL: {
    if (length >= 0 && length != bytes)
      fail(r, "parameter %s: %lld stored bytes, but %s needs %lld", label.c_str(),
           static_cast<long long>(length), describe(value).c_str(), static_cast<long long>(bytes));
    std::string file = r->settings.modelPath;
    if (source == PIPE_SOURCE_EXTERNAL) {
      if (!path || !*path)
        fail(r, "parameter %s: external data without a path", label.c_str());
      file = externalDataFile(r, label, path);
    } else if (file.empty()) {
      fail(r, "parameter %s: no model file to read it from", label.c_str());
    }
    HostAccess host(r);
    loadBytes(r, label, file, offset, bytes, host.overwrite(value));
    host.commit();
    break;
  }
  case PIPE_SOURCE_INLINE: {
    initialise(r, id, value);
    if (!r->settings.randomParameters && r->inlineParams++ == 0) {
      static std::atomic<bool> warned{false};
      if (!warned.exchange(true))
        std::fprintf(stderr,
                     "warning: rank %d: parameter %s has no stored values (a textual model); "
                     "parameters like it are drawn from the seed\n",
                     r->id, label.c_str());
    }
    break;
  }
  default:
    fail(r, "parameter %s: unknown source %d", label.c_str(), source);
  }

  if (p.trainable) {
    p.gradient = borrowed(newTensor(r, PIPE_F32, shape, PIPE_MEM_GRADIENTS, "pipe_declare_param"));
    zeroTensor(r, p.gradient);
    if (owner_rank == r->id) {
      int states = r->optimizer.kind == PIPE_MOMENTUM                                  ? 1
                   : r->optimizer.kind == PIPE_ADAM || r->optimizer.kind == PIPE_ADAMW ? 2
                                                                                       : 0;
      for (int k = 0; k < states; ++k) {
        p.state[k] =
            borrowed(newTensor(r, PIPE_F32, shape, PIPE_MEM_OPTIMIZER, "pipe_declare_param"));
        zeroTensor(r, p.state[k]);
      }
    }
  }
}

pipe_tensor *pipe_param(pipe_rank *r, int32_t id) { return parameterOf(r, id, "pipe_param").value; }

void pipe_accumulate_grad(pipe_rank *r, int32_t id, const pipe_tensor *t) {
  Parameter &p = parameterOf(r, id, "pipe_accumulate_grad");
  boxOf(r, t, "pipe_accumulate_grad");
  if (!p.gradient)
    fail(r, "pipe_accumulate_grad: parameter %s is not trainable", p.name.c_str());
  if (t->dtype != PIPE_F32 || t->numel != p.gradient->numel)
    fail(r, "pipe_accumulate_grad: a gradient %s for parameter %s %s", describe(t).c_str(),
         p.name.c_str(), describe(p.value).c_str());
  if (r->settings.replicas > 1 && r->averagedStep == r->step)
    fail(r,
         "pipe_accumulate_grad: parameter %s after this step's pipe_all_reduce_grads (the "
         "replicas would not average it)",
         p.name.c_str());
  if (Device *device = deviceOf(r))
    if (const DeviceKernels *native = nativeKernels(device);
        native && native->accumulate &&
        onDevice(r, [&] { return native->accumulate(r, p.gradient, t); }))
      return;
  HostAccess host(r);
  float *into = static_cast<float *>(host.write(p.gradient));
  const float *from = static_cast<const float *>(host.read(t));
  for (int64_t i = 0; i < t->numel; ++i)
    into[i] += from[i];
  host.commit();
}

} // extern "C"
