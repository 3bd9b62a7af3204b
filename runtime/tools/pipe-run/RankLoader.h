//===- RankLoader.h - compiling and loading OUT/rankK.cpp ------------*- C++ -*-===//
//
// Each rank program is compiled by the system C++ compiler into OUT/rankK.so
// (when missing or older than its source or the runtime header) and loaded with
// dlopen; its ABI version and rank are checked.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUN_RANKLOADER_H
#define PIPE_RUN_RANKLOADER_H

#include "Run.h"

#include <string>
#include <vector>

namespace piperun {

/// The directory holding pipe_runtime.h: the source tree's when this pipe-run
/// was built there, else <pipe-run's folder>/../include (an install).
std::string runtimeIncludeDir();

/// Builds OUT/rankK.so for each K in `ranks` that needs it, at most `jobs` at
/// a time, printing a line per rank. Throws std::runtime_error "rank K: ...".
void buildRanks(const std::string &directory, const std::vector<int> &ranks, int jobs);

/// dlopens OUT/rankK.so and checks it (RTLD_LOCAL: rank programs share names).
RankProgram loadRank(const std::string &directory, int rank);

} // namespace piperun

#endif // PIPE_RUN_RANKLOADER_H
