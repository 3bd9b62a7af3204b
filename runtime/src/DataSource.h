//===- DataSource.h - where pipe_input, pipe_label and pipe_output_grad read -*- C++ -*-===//
//
// The data of a micro-batch: drawn from the seed (synthetic), or rows of the
// arrays of an .npz file (--data). Shared read-only by every rank of a process.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_DATASOURCE_H
#define PIPE_RUNTIME_DATASOURCE_H

#include "Npz.h"
#include "pipe_runtime.h"

#include <map>
#include <string>
#include <vector>

namespace piperun {

enum class DataRole { Input, Label, OutputGrad };

/// "input_0", "label_1", "output_grad_0": the array names of --data.
PIPE_EXPORT std::string dataArrayName(DataRole role, int32_t index);

class PIPE_EXPORT DataSource {
public:
  virtual ~DataSource() = default;
  /// Fills `t` (allocated with the requested dtype and per-micro-batch shape)
  /// with micro-batch `microbatch` of the current step; fails on the rank.
  virtual void fill(pipe_rank *r, DataRole role, int32_t index, int32_t microbatch, int64_t range,
                    pipe_tensor *t) const = 0;
};

/// Floats ~ N(0, 1) by Box-Muller, integers uniform in [0, range), booleans
/// fair, keyed by (seed, step, micro-batch, stream of the role and index).
PIPE_EXPORT void fillSynthetic(pipe_rank *r, DataRole role, int32_t index, int32_t microbatch,
                               int64_t range, pipe_tensor *t);

/// The arrays of an .npz: [microbatches * b, ...] (the same every step) or
/// [steps, microbatches * b, ...] (one mini-batch per step).
class PIPE_EXPORT NpzData : public DataSource {
public:
  /// Throws std::runtime_error when the file cannot be read.
  NpzData(const std::string &path, int microbatches);
  /// "" when array `role`/`index` can serve requests of `dtype` and the
  /// per-micro-batch `shape` for `steps` steps, else one line saying why.
  std::string check(DataRole role, int32_t index, int32_t dtype, const std::vector<int64_t> &shape,
                    int64_t steps) const;
  void fill(pipe_rank *r, DataRole role, int32_t index, int32_t microbatch, int64_t range,
            pipe_tensor *t) const override;

private:
  std::string path_;
  int microbatches_;
  std::map<std::string, NpyArray> arrays_;
};

} // namespace piperun

#endif // PIPE_RUNTIME_DATASOURCE_H
