// libFuzzer harness: the runtime's .npz reader (pipe-run --data, and the
// reference weights of the equality tests) on arbitrary archives. Every input
// is read or refused with a std::runtime_error; a parsed array's byte count
// always matches its shape and dtype.
#include "Npz.h"

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<char> archive(reinterpret_cast<const char *>(data),
                            reinterpret_cast<const char *>(data) + size);
  std::vector<piperun::NpyArray> arrays;
  try {
    arrays = piperun::parseNpz(archive, "data.npz");
  } catch (const std::runtime_error &) {
    return 0;
  }
  for (const piperun::NpyArray &array : arrays) {
    size_t element = array.dtype == PIPE_F64 || array.dtype == PIPE_I64 ? 8
                     : array.dtype == PIPE_F32 || array.dtype == PIPE_I32 ? 4
                     : array.dtype == PIPE_BOOL ? 1
                                                : 2;
    if (array.bytes.size() != static_cast<size_t>(array.numel()) * element)
      std::abort();
  }
  // What was read writes back and reads again to the same arrays.
  std::vector<piperun::NpyArray> again = piperun::parseNpz(piperun::serializeNpz(arrays), "again");
  if (again.size() != arrays.size())
    std::abort();
  for (size_t i = 0; i < arrays.size(); ++i)
    if (again[i].name != arrays[i].name || again[i].shape != arrays[i].shape ||
        again[i].dtype != arrays[i].dtype || again[i].bytes != arrays[i].bytes)
      std::abort();
  return 0;
}
