// Outputs of a planning report: the human table, the plan JSON (stage_of, metrics,
// per-rank action lists with send/recv), a Chrome/Perfetto trace and an SVG Gantt;
// and the replay of a plan JSON on its problem.
//
// One of the partitioner's three public headers (Problem.h, Planner.h, Output.h).
#ifndef PARTITIONER_OUTPUT_H
#define PARTITIONER_OUTPUT_H

#include "partitioner/Planner.h"

#include <ostream>

namespace partitioner {

/// Version of the plan JSON format (docs/partitioner.md); raised when a field
/// changes meaning or disappears.
constexpr int kPlanSchemaVersion = 2;

/// "12 stages on 6 GPUs, up to 3 stages per GPU (general allocation)", "5 stages on
/// 5 of the 8 GPUs (3 idle), one stage per GPU".
std::string describeStages(const Problem &problem, const PlanResult &plan);

/// Per stage of the chosen plan: layers, time, memory vs limit; then period,
/// iteration time, bubble, gap to the bound; then one row per algorithm tried.
/// With `timings` false the planner times are left out, so that the output of
/// the same problem is the same byte for byte (the compiler's main job).
void writeTable(const Problem &problem, const PlanningReport &report, std::ostream &out,
                bool timings = true);

/// The plan JSON of the chosen plan (format in docs/partitioner.md), with a summary of
/// every algorithm tried. Writes {"error": ...} when no plan is valid.
void writePlanJson(const Problem &problem, const PlanningReport &report, std::ostream &out,
                   bool timings = true);

/// The (replicas x stages) splits tried, one row each, then the chosen one and
/// writeTable of its pipeline (docs/partitioner.md, "Data-parallel replicas").
void writeReplicaTable(const ReplicaReport &report, std::ostream &out, bool timings = true);

/// The chosen split's pipeline plan JSON (what writePlanJson writes for one
/// replica's problem) with a "data_parallel" member: replicas, layout, per-GPU
/// gradient bytes and all-reduce times, both iteration times, and every split tried.
void writeReplicaPlanJson(const ReplicaReport &report, std::ostream &out, bool timings = true);

/// Chrome trace-event JSON (chrome://tracing, ui.perfetto.dev): one track per GPU,
/// one slice per F/B/W, plus one track per link direction for transfers.
void writeTraceJson(const Problem &problem, const PlanResult &plan, std::ostream &out);

/// SVG Gantt chart of one simulated iteration.
void writeSvg(const Problem &problem, const PlanResult &plan, std::ostream &out);

/// Per-rank action lists lowered with explicit SEND/RECV entries, e.g.
/// "F0@s1", "SEND_F0@s1->s2", "RECV_B0@s2->s1".
std::vector<std::vector<std::string>> loweredActions(const Problem &problem, const PlanResult &plan);

/// A plan JSON (as writePlanJson writes it) replayed on its problem: the allocation
/// rebuilt from stage_of and gpu_of_stage, simulated with the same simulator, and
/// every reported figure the replay does not reproduce.
struct ReplayCheck {
  PlanResult replayed;
  /// One line per figure that differs (period, iteration time, a stage's memory).
  std::vector<std::string> mismatches;
  bool ok() const { return mismatches.empty(); }
};
/// An error when the JSON does not describe a plan of `problem` (a layer's nodes on
/// different stages, a node missing, an unknown schedule).
Expected<ReplayCheck> replayPlan(const Problem &problem, const std::string &planJson);

} // namespace partitioner

#endif
