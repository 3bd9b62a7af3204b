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

#include <nlohmann/json.hpp>

#include <map>
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

/// How the run ran: what measured.json and the profile's meta record.
struct RunFacts {
  std::string transport = "threads"; ///< "threads" or "mpi"
  int threadsPerRank = 1;
  int64_t steps = 0;
  std::string blasKernels; ///< OpenBLAS's kernel set ("SkylakeX", ...)
  std::string backend = "cpu"; ///< "cpu", "cuda" or "emulated"
  /// Data-parallel replicas of the pipeline (pipe-run --replicas); the report's
  /// memory and period are replica 0's, the iteration the slowest rank's.
  int replicas = 1;
};

/// One memory row of a rank: a category (or "total"), its measured peak and
/// program.json's prediction.
struct MemoryRow {
  std::string category;
  double measuredBytes = 0;
  std::optional<double> predictedBytes;
};

struct RankSummary {
  int rank = 0;
  std::vector<MemoryRow> memory; ///< the pipe_mem categories in order, then "total"
  double waitMsPerStep = 0;
  std::vector<std::pair<std::string, double>> slowestNodes; ///< name, ms per step; at most 3
  /// The gradient all-reduce over replicas: measured mean per step (steps after
  /// the first), and the plan's (program.json's predicted.ranks[].all_reduce_ms).
  double allReduceMsPerStep = 0;
  std::optional<double> predictedAllReduceMs;
};

/// Everything the end-of-run report shows, computed once; printReport and
/// summaryJson are two renderings of it.
struct RunSummary {
  RunFacts facts;
  std::vector<RankSummary> ranks;
  std::optional<MeasuredPeriod> period;
  std::optional<double> predictedPeriodMs;
  std::string predictedTarget; ///< the plan's target: its times are that machine's
  std::optional<double> iterationMs; ///< mean step of the slowest rank, steps after the first
  std::optional<double> predictedIterationMs;
  std::vector<std::optional<double>> losses; ///< per step; none when no rank computed one
};
RunSummary summarize(const ProgramInfo &program, const std::vector<RankReport> &reports,
                     const RunFacts &facts);

/// Per rank, category by category: measured peak, prediction, ratio; then the
/// period and the nodes that took the most time.
void printReport(const RunSummary &summary);

/// measured.json (docs/runtime.md, "measured.json").
nlohmann::json summaryJson(const RunSummary &summary);

/// One micro-batch's forward and backward time of an ONNX node.
struct NodeProfile {
  double forwardMs = 0, backwardMs = 0;
};
/// Per declared node name timed in forward or backward actions, over the
/// measured steps (every step after the first when there are two or more):
/// the median over steps of the node's time in the step divided by the step's
/// micro-batches (the mean over the ranks that ran it, when several did).
std::map<std::string, NodeProfile> measureProfile(const std::vector<RankReport> &reports,
                                                  int microbatches, int64_t steps);
/// Steps the profile and the period use: [first, steps).
int64_t firstMeasuredStep(int64_t steps);

/// The profile in the compiler's --profile format: {"meta": {...}, "ops": {...}}.
nlohmann::json profileJson(const std::map<std::string, NodeProfile> &profile,
                           const ProgramInfo &program, const RunFacts &facts);

/// Writes a JSON document (two-space indent); throws naming the file.
void writeJson(const std::string &path, const nlohmann::json &document, const std::string &what);

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
