//===- Report.h - the main job's report and the plan's settings -*- C++ -*-===//
//
// What the main job tells the user: the report's header (every assumption
// the plan rests on), the stages of the IR, why each boundary sits where it
// does, and the same assumptions as JSON for plan.json and problem.json.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_LIB_DRIVER_REPORT_H
#define PIPE_LIB_DRIVER_REPORT_H

#include "pipe/Dialect/Pipe/IR/PipeDialect.h"
#include "pipe/Dialect/Pipe/Transforms/Partition.h"
#include "pipe/Driver/MainJob.h"

#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <string>

namespace pipe::driver {

/// The report's header: what was planned, under which assumptions.
void writeHeader(const pipeline::PartitionOutcome &outcome, const MainJobOptions &options,
                 llvm::raw_ostream &os);

/// Operations, parameters (owned), sends and receives of each stage.
void stageSummary(pipeline::PipelineOp pipelineOp, llvm::raw_ostream &os);

/// Why each boundary sits where it is: the plan with the boundary moved one
/// layer either way, evaluated by the same simulator.
void explainBoundaries(const partitioner::Problem &problem,
                       const partitioner::PlanningReport &report, llvm::raw_ostream &os);

/// The assumptions of the plan, for plan.json and problem.json (`settings`).
nlohmann::ordered_json settingsJson(const pipeline::PartitionOutcome &outcome,
                                    const MainJobOptions &options);

/// "10", "2.5": a number of seconds as a user writes it.
std::string formatSeconds(double value);

/// How to plan the written problem again with the partitioner alone.
std::string replayCommand(const std::string &problemPath, const MainJobOptions &options);

} // namespace pipe::driver

#endif // PIPE_LIB_DRIVER_REPORT_H
