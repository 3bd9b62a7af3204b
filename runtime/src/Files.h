//===- Files.h - writing output files whole or not at all ----------*- C++ -*-===//
#ifndef PIPE_RUNTIME_FILES_H
#define PIPE_RUNTIME_FILES_H

#include "pipe_runtime.h"

#include <string>

namespace piperun {

/// Writes `bytes` to a temporary file beside `path`, then renames it over
/// `path`: a reader sees the old file or the new one, never a part. Throws
/// std::runtime_error naming the path and `what` (and leaves no temporary).
PIPE_EXPORT void writeFileAtomically(const std::string &path, const std::string &bytes,
                                     const std::string &what);

} // namespace piperun

#endif // PIPE_RUNTIME_FILES_H
