//===- Report.h - measured beside predicted: memory, period, trace --*- C++ -*-===//
//
// What pipe-run prints and writes at the end of a run, from the ranks'
// RankReports and program.json's predictions.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUN_REPORT_H
#define PIPE_RUN_REPORT_H

#include "ProgramInfo.h"
#include "Run.h"

#include <optional>
#include <string>
#include <vector>

namespace piperun {

/// Steady-state mean time between successive forward starts of a stage
/// (docs/runtime.md, "The measured period").
struct MeasuredPeriod {
  double ms = 0;
  int64_t gaps = 0;   ///< forward-to-forward intervals averaged
  bool steady = true; ///< false: no steady-state forward, every gap was used
};
std::optional<MeasuredPeriod> measurePeriod(const std::vector<RankReport> &reports);

/// Per rank, category by category: measured peak, prediction, ratio; then the
/// period and the nodes that took the most time.
void printReport(const ProgramInfo &program, const std::vector<RankReport> &reports, int64_t steps);

/// The measured actions as a Chrome/Perfetto trace, laid out like the plan's
/// schedule.trace.json (pid 0, one thread "GPU k" per rank, X events "F3@s1").
void writeTrace(const std::string &path, const std::vector<RankReport> &reports);

/// A report as bytes and back (MPI ranks send theirs to rank 0).
std::vector<char> encodeReport(const RankReport &report);
RankReport decodeReport(const std::vector<char> &bytes);

/// "1.5 KiB".
std::string formatBytes(double bytes);

} // namespace piperun

#endif // PIPE_RUN_REPORT_H
