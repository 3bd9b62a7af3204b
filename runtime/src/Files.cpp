//===- Files.cpp - writing output files whole or not at all ----------------===//
#include "Files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <unistd.h>

namespace piperun {

void writeFileAtomically(const std::string &path, const std::string &bytes,
                         const std::string &what) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  auto refuse = [&](const char *doing) {
    std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    throw std::runtime_error(path + ": " + doing + " the " + what + " failed (" + reason + ")");
  };
  std::FILE *file = std::fopen(temporary.c_str(), "wb");
  if (!file) {
    std::string reason = std::strerror(errno);
    throw std::runtime_error(path + ": cannot write the " + what + " (" + reason + ")");
  }
  bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  written = std::fflush(file) == 0 && written;
  written = std::fclose(file) == 0 && written;
  if (!written)
    refuse("writing");
  if (std::rename(temporary.c_str(), path.c_str()) != 0)
    refuse("renaming");
}

} // namespace piperun
