//===- Npz.h - numpy .npy arrays in uncompressed .npz archives -----*- C++ -*-===//
//
// What np.savez writes and np.load reads: a zip of stored (not deflated)
// entries "<name>.npy", each a version 1-3 .npy header and C-order data. Used
// for --data, --save-weights and --save-grads.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_NPZ_H
#define PIPE_RUNTIME_NPZ_H

#include "pipe_runtime.h"

#include <cstdint>
#include <string>
#include <vector>

namespace piperun {

struct PIPE_EXPORT NpyArray {
  std::string name; ///< without ".npy"
  int32_t dtype = PIPE_F32;
  std::vector<int64_t> shape;
  std::vector<char> bytes; ///< little-endian, C order

  int64_t numel() const;
};

/// Errors throw std::runtime_error with one line naming the file and the array.
PIPE_EXPORT std::vector<NpyArray> readNpz(const std::string &path);
PIPE_EXPORT std::vector<NpyArray> parseNpz(const std::vector<char> &archive,
                                           const std::string &what);
PIPE_EXPORT std::vector<char> serializeNpz(const std::vector<NpyArray> &arrays);
PIPE_EXPORT void writeNpz(const std::string &path, const std::vector<NpyArray> &arrays);

/// "[2, 16]".
PIPE_EXPORT std::string shapeString(const std::vector<int64_t> &shape);

} // namespace piperun

#endif // PIPE_RUNTIME_NPZ_H
