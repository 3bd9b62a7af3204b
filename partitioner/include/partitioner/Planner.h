// The partitioner's entry point: plan(problem, options) runs the requested
// algorithms (or every applicable one for `best`), schedules and simulates each
// allocation, and keeps the best valid plan whose schedule passes the checker:
// smallest period (or iteration time, by the objective), then the other of the
// two, bytes crossing stages and memory headroom. Also here: one allocation
// evaluated, a schedule generated or checked, and every type a plan holds.
//
// One of the partitioner's three public headers (Problem.h, Planner.h, Output.h).
// No function here throws: errors come back as values (Problem.h).
#ifndef PARTITIONER_PLANNER_H
#define PARTITIONER_PLANNER_H

#include "partitioner/Problem.h"

#include <functional>
#include <utility>
#include <string>
#include <vector>

namespace partitioner {

/// The order of one stage of a k-periodic 1F1B schedule with one stage per GPU
/// (docs/partitioner.md, "k-periodic schedules"): `warmup` forwards, then `word`
/// over and over ('B' the backward of the oldest micro-batch alive on the stage,
/// 'F' the next forward), forwards dropped once every micro-batch is in, the
/// backwards left run at the end. A word holds k 'B's and k 'F's and starts with
/// 'B'; "BF" is the 1-periodic order.
struct StageOrder {
  int warmup = 1;
  std::string word = "BF";
  bool operator==(const StageOrder &other) const {
    return warmup == other.warmup && word == other.word;
  }
};
/// "3:BFBBFF" (warm-up, colon, word).
std::string toString(const StageOrder &order);
/// The reverse of toString; an error unless the word is k 'B's and k 'F's
/// starting with 'B', 1 <= k <= 4, and the warm-up is 1 .. 4096.
Expected<StageOrder> parseStageOrder(const std::string &text);

/// An allocation maps layers to stages and stages to GPUs. Stages are numbered in
/// pipeline order; a GPU may hold several stages (interleaved / general allocations).
struct Allocation {
  std::vector<int> stageOfLayer;
  std::vector<int> gpuOfStage;
  /// Optional per-stage caps on the micro-batches a stage keeps alive: 1F1B with one
  /// stage per GPU slows its periodic pattern until no stage keeps more (the memory
  /// a DP priced each stage with); periodic plans record their pattern's counts.
  /// Empty means the schedule's own rule.
  std::vector<int> inFlightLimit;
  /// Period the allocation was planned for (periodic schedules); 0 = its bottleneck.
  double targetPeriodMs = 0;
  /// Per stage: true when the stage recomputes its forward in the backward
  /// (RecomputePolicy); empty means no stage does.
  std::vector<bool> recompute;
  /// 1F1B (with flush or stashing) with one stage per GPU: each stage's order, a
  /// k-periodic schedule that replaces the 1F1B pattern's order (and its caps);
  /// empty means the pattern's.
  std::vector<StageOrder> stageOrders;

  int numStages() const { return static_cast<int>(gpuOfStage.size()); }
  bool recomputes(int stage) const {
    return static_cast<size_t>(stage) < recompute.size() && recompute[static_cast<size_t>(stage)];
  }
  /// Distinct GPUs that hold a stage.
  int numGpusUsed() const;
  /// True when every GPU holds at most one stage.
  bool oneStagePerGpu() const;
};

enum class ActionKind {
  Forward,        ///< F of a stage for one micro-batch
  Backward,       ///< full backward (input and weight gradients)
  BackwardInput,  ///< input gradient only (zero-bubble "B")
  BackwardWeight, ///< weight gradient only (zero-bubble "W")
};

struct Action {
  ActionKind kind = ActionKind::Forward;
  int stage = 0;
  int microbatch = 0;
  bool operator==(const Action &other) const {
    return kind == other.kind && stage == other.stage && microbatch == other.microbatch;
  }
};

/// One transfer between the GPUs of two stages: micro-batch `microbatch`'s
/// activations from `fromStage` to `toStage` (gradient = false), or their gradients
/// from `fromStage` back to `toStage` (gradient = true; fromStage is the later stage).
struct Transfer {
  int fromStage = 0, toStage = 0, microbatch = 0;
  bool gradient = false;
  bool operator==(const Transfer &other) const {
    return fromStage == other.fromStage && toStage == other.toStage &&
           microbatch == other.microbatch && gradient == other.gradient;
  }
};

/// Per-GPU ordered action lists (F, B, or B split into input/weight parts).
struct Schedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  int microbatches = 0;
  bool splitBackward = false;
  std::vector<std::vector<Action>> actions; ///< per GPU, in execution order
  /// Port orders, optional (docs/partitioner.md, "Port orders"): per GPU, the
  /// transfers its send port carries, in order, and those its receive port carries.
  /// When given, they list every transfer that holds ports (its GPUs differ and its
  /// link's occupancy is above 0), and a transfer starts when its data is ready and
  /// the transfers before it on both its ports have ended. Both empty: a transfer
  /// takes the first interval free on both ports once its producer has ended.
  std::vector<std::vector<Transfer>> sendOrder, receiveOrder;
  bool hasPortOrders() const { return !sendOrder.empty() || !receiveOrder.empty(); }
};

struct TimedAction {
  Action action;
  int gpu = 0;
  double startMs = 0, endMs = 0;
};

struct TimedTransfer {
  int fromStage = 0, toStage = 0, microbatch = 0;
  bool gradient = false;
  int fromGpu = 0, toGpu = 0;
  double bytes = 0, startMs = 0, endMs = 0;
};

/// Peak memory of one GPU and what it is made of.
struct GpuMemory {
  double stateBytes = 0;       ///< parameters x state multiplier
  double extraWeightBytes = 0; ///< weight versions beyond the first
  double bufferBytes = 0;      ///< communication buffers, kBuffersPerCutTensor per cut tensor
  /// Peak of the message bytes held at once along the simulated timeline, as the
  /// runtime holds them (docs/partitioner.md, "Memory of a GPU"); not in peakBytes.
  double messageBytes = 0;
  /// The largest workspace of the GPU's stages (it runs one at a time).
  double workspaceBytes = 0;
  double activationPeakBytes = 0;
  /// Peak of the bytes kept from F to B alone, without the activations that
  /// recomputing stages hold during their backward (= activationPeakBytes when no
  /// stage recomputes). A runtime counts those as transient workspace.
  double keptPeakBytes = 0;
  double peakBytes = 0;
};

struct SimulationResult {
  bool completed = false;
  std::string error; ///< deadlock description when !completed
  double iterationMs = 0; ///< makespan of the m micro-batches
  double periodMs = 0;    ///< steady-state time per micro-batch (simulatePlan only)
  double bubbleFraction = 0;
  std::vector<GpuMemory> memory;  ///< per GPU of the platform
  std::vector<int> stageInFlight; ///< peak micro-batches alive per stage
  std::vector<double> gpuBusyMs;
  std::vector<TimedAction> timeline;
  std::vector<TimedTransfer> transfers;
};

/// Lower bounds on the period (docs/partitioner.md, "Lower bounds"), reported with
/// every plan as its optimality gap.
struct LowerBounds {
  double workMs = 0;         ///< total work / total GPU speed
  double largestLayerMs = 0; ///< one layer cannot be split (contiguous or not)
  /// Little's law: on average a layer keeps span(l)/T copies alive, span(l) >= its
  /// downstream critical path, so ceil(span/T) copies (at most m) of s(l) plus its
  /// state must fit one GPU, and the time-averaged total must fit all GPUs.
  double memoryMs = 0;
  /// Over every general allocation (map layer -> GPU), proven with CBC when
  /// PlanOptions::generalBoundSeconds asks for it (0: not computed): per-GPU load
  /// and per-GPU memory by Little's law (docs/partitioner.md, "A bound over every
  /// general allocation"). Without recomputation only.
  double generalMs = 0;
  std::string generalNotes;        ///< how it was obtained (CBC's solves), or why not
  double generalSeconds = 0;       ///< the time it took
  double bestMs = 0;               ///< the largest of the above
  bool memoryInfeasible = false;   ///< some layer cannot fit even with one copy
  std::string memoryReason;        ///< names the layer and its bytes when infeasible
};

/// What the checker found wrong with a schedule (empty: nothing).
struct CheckReport {
  std::vector<std::string> violations;
  bool ok() const { return violations.empty(); }
};

struct PlanResult;

/// What `best` minimises first.
enum class Objective {
  Period,        ///< the steady-state period (throughput of an endless pipeline)
  IterationTime, ///< one iteration of m micro-batches, fill and drain included
};
std::string toString(Objective objective);
/// "period" or "iteration".
Expected<Objective> parseObjective(const std::string &text);

struct PlanOptions {
  /// Algorithm names, or {"best"} for every algorithm whose partOfBest() is true.
  std::vector<std::string> algorithms{"best"};
  /// Use DAG-aware cuts (all downsets) when the graph has at most this many.
  size_t maxDownsets = 20000;
  bool dagAware = true;
  /// Only plans of the problem's own schedule family compete for the best (a
  /// user who asked for 1F1B does not get an interleaved plan). The others are
  /// still run and reported.
  bool requireSchedule = false;
  /// Time limit of each of the `ilp` and `ilp-general` algorithms (wall clock, from
  /// the algorithm's start: warm start, model building and CBC together), and of
  /// `madpipe-span`'s search over the period (which then keeps the best it reached).
  double ilpTimeLimitSeconds = 10;
  Objective objective = Objective::Period;
  /// Improve the chosen plan by one-layer boundary moves (boundaryMoves) under its
  /// schedule, keeping each move that makes it strictly better by the objective,
  /// until none does: no plan plan() returns can then be improved by one such move.
  bool improveByBoundaryMoves = true;
  /// With `best` (or `all`): then move blocks of layers of the chosen plan to other
  /// GPUs while the simulated plan improves and every GPU fits (the `general-moves`
  /// search, from the chosen plan, within a budget of simulations); a better plan
  /// joins the results as `block-moves`.
  bool improveByBlockMoves = true;
  /// With `best` (or `all`): search the k-periodic orders (k <= 4) of the 1F1B
  /// splits with one stage per GPU whose memory keeps a stage below 1F1B's counts
  /// (min(S - s, m)), the chosen one and up to two others whose bottleneck is below
  /// the chosen period (a split that does not fit under 1F1B's counts may fit with
  /// other orders); orders better than the chosen plan join the results as
  /// `k-periodic` (docs/partitioner.md, "k-periodic schedules").
  bool improveByKPeriodicOrders = true;
  /// When positive: after choosing, prove a lower bound over every general
  /// allocation (LowerBounds::generalMs) within this many seconds, by bisection
  /// between the other bounds and the chosen period. It raises the bound, and so
  /// the gap, of every plan; when it reaches the chosen period, no allocation,
  /// contiguous or not, beats the chosen plan by more than 0.1 %.
  double generalBoundSeconds = 0;
  /// Algorithms run at once, each on its own thread (0: one per core of the machine;
  /// 1: one after the other). The results, and the plan chosen, do not depend on it,
  /// except through the time limits of `ilp`, `ilp-general` and `madpipe-span`
  /// (a busier machine gets less done by them).
  int threads = 0;
  /// Called with each algorithm's result once it and those before it in the list are
  /// evaluated (progress), in the list's order, on the calling thread.
  std::function<void(const PlanResult &)> onResult;
};

struct StageMetrics {
  int gpu = 0;
  std::vector<int> layers;
  /// backwardMs includes the recomputed forward when `recompute` is set.
  double forwardMs = 0, backwardMs = 0, computeMs = 0;
  bool recompute = false;
  double inBytes = 0, outBytes = 0;
  int inFlight = 0;
};

struct GpuMetrics {
  double memoryBytes = 0, memoryLimitBytes = 0;
  GpuMemory breakdown;
};

struct PlanResult {
  std::string algorithm;
  bool valid = false;  ///< an allocation exists, its schedule checks, and it fits
  std::string reason;  ///< why not valid
  std::string notes;
  ScheduleKind scheduleKind = ScheduleKind::OneFOneB;
  Allocation allocation;
  Schedule schedule;
  SimulationResult simulation;
  std::vector<StageMetrics> stages;
  std::vector<GpuMetrics> gpus;
  double periodMs = kInfinity, iterationMs = kInfinity, bubbleFraction = 0;
  /// The algorithm's own estimate of the period of the plan it returned (before
  /// any boundary moves), where it has one.
  double predictedPeriodMs = kInfinity;
  /// Where boundary moves changed the plan: the simulated period of the plan the
  /// algorithm returned (the plan predictedPeriodMs describes).
  double periodBeforeMovesMs = kInfinity;
  double lowerBoundMs = 0, gap = kInfinity; ///< gap = period / lower bound - 1
  double crossingBytes = 0;
  double maxMemoryFraction = 0; ///< max over GPUs of peak / limit
  double plannerSeconds = 0;
};

struct PlanningReport {
  std::string problemName;
  LowerBounds bounds;
  std::vector<PlanResult> results;
  Objective objective = Objective::Period;
  int chosen = -1; ///< index into results, -1 when nothing is valid
  /// The result `chosen` would be under the other objective (-1: none valid).
  int bestByOtherObjective = -1;
  const PlanResult *best() const {
    return chosen >= 0 ? &results[static_cast<size_t>(chosen)] : nullptr;
  }
};

/// One line saying why no plan is valid: madpipe's reason when it has one (it
/// names the stage, bytes and limit of the most memory-balanced split), else the
/// first algorithm's.
std::string noPlanReason(const PlanningReport &report);

/// The peak, per GPU of the platform, of bytesPerStage[s] held per micro-batch
/// from the start of stage s's forward to the end of its backward (or W) along
/// the plan's simulated timeline: GpuMemory::keptPeakBytes for other per-stage
/// byte counts (the main job checks a lowered program's exact saved bytes).
std::vector<double> peakHeldBytes(const PlanResult &plan, const std::vector<double> &bytesPerStage);

/// One layer moved to a neighbouring stage: across the boundary between stages
/// `fromStage` and `toStage` (= fromStage + 1 or fromStage - 1).
struct BoundaryMove {
  int layer = 0;
  int fromStage = 0, toStage = 0;
};

/// Every one-layer move across a stage boundary that keeps `allocation` valid on a
/// finalized problem: a layer of stage s whose consumers all sit in stages after s
/// moves to s + 1, one whose producers all sit in stages before s moves to s - 1,
/// and no stage is left empty. On a chain these are the two moves of each boundary
/// (the last layer of stage s later, the first layer of stage s + 1 earlier). In
/// order of stage, then layer. An allocation that does not cover the problem's
/// layers has none.
std::vector<BoundaryMove> boundaryMoves(const Problem &problem, const Allocation &allocation);

/// `allocation` with `move` applied (stages, GPUs and flags as they were).
Allocation applyMove(const Allocation &allocation, const BoundaryMove &move);

/// Runs the algorithms on a finalized problem; an unknown algorithm name is an error.
Expected<PlanningReport> plan(const Problem &problem, const PlanOptions &options = {});

/// Asks the C library's allocator (glibc) to keep freed blocks of up to 32 MiB for
/// reuse instead of handing them back to the system. Each simulation allocates a
/// few blocks of that size (its timeline, the times of every action); fresh from
/// the system, their pages fault in again every time: a fifth of `best`'s time on
/// a 1,000-layer chain at 64 GPUs (1.03 -> 0.82 s). Process-wide, so the tools
/// call it at start-up; a program that embeds the planner decides for itself.
/// Does nothing elsewhere than glibc.
void reuseFreedMemory();

/// Schedules, simulates and checks one allocation (what plan() does per algorithm),
/// after checking it: every layer on a stage, no empty stage, GPUs in range, no
/// tensor flowing from a later stage to an earlier one.
Expected<PlanResult> evaluateAllocation(const Problem &problem, const Allocation &allocation,
                                        ScheduleKind kind, const LowerBounds &bounds);

/// The action lists of `kind` for `allocation` and `microbatches` micro-batches
/// (docs/partitioner.md, "Schedules"); an error when the kind does not apply (periodic
/// needs one stage per GPU, interleaved stage s on GPU s mod G).
Expected<Schedule> makeSchedule(ScheduleKind kind, const Problem &problem,
                                const Allocation &allocation, int microbatches);

/// Static checks of a schedule: coverage (each F and B, or Bi and W, of every stage
/// and micro-batch exactly once, on the stage's GPU) and deadlock freedom.
CheckReport checkSchedule(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule);

/// A pipeline as a compiler holds it after splitting a model into stages: the GPU
/// of each stage and which stages send activations to which. Its schedules and
/// their checks need no layer costs.
struct StagePipeline {
  std::vector<int> gpuOfStage;
  std::vector<std::pair<int, int>> activationEdges; ///< (from stage, to stage)
  int microbatches = 1;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
};
/// makeSchedule for a stage pipeline.
Expected<Schedule> makeSchedule(const StagePipeline &pipeline);
/// checkSchedule for a stage pipeline: every F and B (or Bi and W) of every stage
/// and micro-batch exactly once, on its stage's GPU, and no deadlock along the
/// pipeline's own edges (stages on parallel branches do not wait for each other).
CheckReport checkSchedule(const StagePipeline &pipeline, const Schedule &schedule);

/// Where the GPUs of r data-parallel replicas of an S-stage pipeline sit, the
/// G = r x S GPUs numbered node by node (docs/partitioner.md, "Data-parallel
/// replicas").
enum class ReplicaLayout {
  /// Replica j's stages on GPUs j*S .. j*S+S-1: a pipeline's transfers stay in
  /// its node(s), each stage's all-reduce crosses nodes.
  PipelineMajor,
  /// Stage s's replicas on GPUs s*r .. s*r+r-1: each all-reduce stays in its
  /// node(s), the pipeline's transfers cross nodes.
  StageMajor,
};
std::string toString(ReplicaLayout layout);

/// The GPUs of one all-reduce: `perNode` on each of `nodes` nodes.
struct AllReduceGroup {
  int nodes = 1, perNode = 1;
  int size() const { return nodes * perNode; }
};

/// The gradients a GPU all-reduces are laid end to end and cut into buckets of
/// at most this many bytes, one all-reduce each (the runtime's
/// RunSettings::allReduceBucketBytes; pipe-opt writes it to program.json). It
/// bounds the messages' memory to a few chunks of a bucket.
constexpr double kAllReduceBucketBytes = 25.0 * 1024 * 1024;

/// Time of an all-reduce of `bytes` (each GPU's gradient) over `group` on
/// `platform`'s links, each GPU on its own link, one bucket
/// (kAllReduceBucketBytes) after the other. A bucket takes a ring inside one
/// node, a ring across nodes with one GPU each, else the faster of a flat ring
/// (every step at the slower link's pace) and the hierarchical all-reduce
/// (reduce-scatter inside each node, a ring across nodes on 1/perNode of the
/// bytes, all-gather inside each node). A ring over k GPUs is 2(k-1) steps of
/// bytes/k.
double allReduceMs(const Platform &platform, const AllReduceGroup &group, double bytes);

struct ReplicaPlan;
/// "R x S", and its layout where it matters (several replicas of several
/// stages): "2 x 4 stage-major".
std::string describeSplit(const ReplicaPlan &split);

/// One (replicas x stages) split of the problem's GPUs.
struct ReplicaPlan {
  int stages = 0, replicas = 0;
  ReplicaLayout layout = ReplicaLayout::PipelineMajor;
  /// GPUs per node of the whole platform (the pipeline problem's may be fewer).
  int gpusPerNode = 8;
  bool valid = false;
  std::string reason; ///< why not valid
  /// What each replica plans: the problem on `stages` GPUs, microbatches /
  /// replicas micro-batches, its transfers on the links the layout gives them.
  Problem pipelineProblem;
  /// plan() of pipelineProblem; `chosen` is the result with the shortest
  /// iteration once the all-reduces are added.
  PlanningReport pipeline;
  AllReduceGroup group; ///< the replicas of the pipeline's first GPU
  std::vector<double> gradientBytes; ///< per GPU of the pipeline
  std::vector<double> allReduceMs;   ///< per GPU of the pipeline
  double pipelineIterationMs = kInfinity; ///< one replica's micro-batches, fill and drain
  /// With the all-reduces, each GPU's from the end of its last backward.
  double iterationMs = kInfinity;
  double plannerSeconds = 0;
};

struct ReplicaReport {
  std::string problemName;
  int gpus = 0, microbatches = 0;
  std::vector<ReplicaPlan> candidates;
  int chosen = -1; ///< shortest iteration (the mini-batch's time), -1 when none is valid
  const ReplicaPlan *best() const {
    return chosen >= 0 ? &candidates[static_cast<size_t>(chosen)] : nullptr;
  }
};

/// The problem's GPUs as r replicas of an S-stage pipeline, for each S of
/// `stageCounts` (empty: every divisor of the GPUs) and each of `layouts`: each
/// replica runs microbatches / r of the mini-batch's micro-batches, and the
/// replicas of each stage all-reduce its gradients once per iteration. Keeps the
/// split with the shortest iteration. Splits are planned from the lowest bound
/// up ((m / r) x the larger of the work over S and the largest layer); one whose
/// bound is not below the best iteration so far is not planned (its reason says
/// so). An error when no S divides the GPUs or
/// the GPUs differ in speed. Each pipeline is planned for the iteration time
/// (options.objective is ignored): the mini-batch's time is what replicas change.
/// `layouts`: the layouts tried (a runtime that places its ranks one way asks
/// for that one; one replica or one stage is tried once, as pipeline-major, the
/// same GPUs either way). A split applies only where each stage's replicas sit
/// as many on every node they use (the all-reduce model's groups); its reason
/// says which GPU does not. Of each pipeline's valid plans (of the problem's
/// schedule under options.requireSchedule), the one with the shortest iteration
/// with the all-reduces is kept, after checkSchedule, as plan() keeps its own.
/// `onSplit` (progress) is called with each split that applies as it is planned
/// or skipped by its bound, in planning order.
Expected<ReplicaReport>
planReplicas(const Problem &problem, const std::vector<int> &stageCounts,
             const PlanOptions &options = {},
             const std::vector<ReplicaLayout> &layouts = {ReplicaLayout::PipelineMajor,
                                                          ReplicaLayout::StageMajor},
             const std::function<void(const ReplicaPlan &)> &onSplit = {});

/// The problem one of the G / stages replicas plans (G = problem.platform.gpus):
/// `stages` GPUs, microbatches / replicas micro-batches, the links between the
/// global GPUs of its positions under `layout`. An error when the micro-batches
/// do not split evenly, the layout does not tile the nodes, or it puts some
/// GPU's replicas more on one node than on another.
Expected<Problem> replicaPipelineProblem(const Problem &problem, int stages, ReplicaLayout layout);
/// "pipeline-major" or "stage-major".
Expected<ReplicaLayout> parseReplicaLayout(const std::string &text);

/// A registered algorithm: `best` tries those with partOfBest.
struct AlgorithmInfo {
  std::string name, summary;
  bool partOfBest = true;
};
/// Every algorithm plan() knows, in the order `best` tries them.
std::vector<AlgorithmInfo> listAlgorithms();
/// Whether the MIP algorithms (ilp, ilp-general) were built with CBC; without it
/// they return no allocation and say why.
bool haveMipSolver();

} // namespace partitioner

#endif
