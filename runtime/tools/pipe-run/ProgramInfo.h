//===- ProgramInfo.h - what pipe-run reads from OUT/program.json ----*- C++ -*-===//
//
// The run-time facts of a generated program (ranks, micro-batches, data
// arrays, the model file) and the plan's predictions pipe-run compares with.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUN_PROGRAMINFO_H
#define PIPE_RUN_PROGRAMINFO_H

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace piperun {

struct DataArrayInfo {
  int32_t index = 0;
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape; ///< per micro-batch
  int64_t range = 0;
};

struct ParameterInfo {
  int32_t id = 0;
  std::string name;
  int32_t ownerRank = 0;
};

/// The most ranks a run may have, replicas included.
constexpr int64_t kMaxRanks = 4096;

struct ProgramInfo {
  std::string directory;
  int ranks = 0;
  int microbatches = 1; ///< per replica
  int replicas = 1;     ///< data-parallel copies of the pipeline pipe-opt planned
  /// The plan's largest bucket of one gradient all-reduce ring (0: the runtime's).
  int64_t allReduceBucketBytes = 0;
  /// How the replicas' ranks are placed: "pipeline-major" or "stage-major".
  std::string replicaLayout = "pipeline-major";
  int64_t microBatchSize = 1;
  std::string model; ///< absolute, or empty when the program names none
  std::string loss;  ///< "" when the program has none
  std::vector<DataArrayInfo> inputs, labels, outputGrads;
  std::vector<ParameterInfo> parameters;
  std::optional<double> predictedPeriodMs, predictedIterationMs;
  std::string predictedTarget; ///< the target the plan was made for (empty: not given)
  /// Per rank: category name ("parameters", ..., "total") -> bytes.
  std::map<int, std::map<std::string, double>> predictedMemory;
  /// Per rank: the plan's gradient all-reduce over the replicas (ms a step),
  /// and the host bytes its messages hold at once (COMM on the CPU backend).
  std::map<int, double> predictedAllReduceMs, predictedAllReduceMessageBytes;
};

/// Reads DIR/program.json; throws std::runtime_error naming the file and field.
ProgramInfo readProgramInfo(const std::string &directory);

/// The same on the file's text (`file` names it in messages; a relative `model`
/// is taken relative to `directory`).
ProgramInfo parseProgramInfo(const std::string &text, const std::string &file,
                             const std::string &directory);

} // namespace piperun

#endif // PIPE_RUN_PROGRAMINFO_H
