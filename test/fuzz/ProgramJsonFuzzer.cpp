// libFuzzer harness: pipe-run's program.json reader on arbitrary text. Every
// input is read or refused with a std::runtime_error naming the file and the
// field; nothing else may escape, crash or allocate without bound.
#include "ProgramInfo.h"

#include <cstdint>
#include <stdexcept>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    piperun::parseProgramInfo(std::string(reinterpret_cast<const char *>(data), size),
                              "out/program.json", "out");
  } catch (const std::runtime_error &) {
  }
  return 0;
}
