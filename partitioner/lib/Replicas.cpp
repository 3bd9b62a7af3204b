// Data-parallel replicas of a pipeline (docs/partitioner.md, "Data-parallel
// replicas"): the GPUs split as r x S, each replica plans its share of the
// micro-batches with plan(), and each stage's replicas all-reduce its gradients
// once per iteration, from the end of the stage's last backward.
#include "partitioner/Error.h"
#include "partitioner/Planner.h"
#include "partitioner/Replicas.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <map>
#include <sstream>

namespace partitioner {

std::string toString(ReplicaLayout layout) {
  return layout == ReplicaLayout::PipelineMajor ? "pipeline-major" : "stage-major";
}

Expected<ReplicaLayout> parseReplicaLayout(const std::string &text) {
  if (text == "pipeline-major")
    return ReplicaLayout::PipelineMajor;
  if (text == "stage-major")
    return ReplicaLayout::StageMajor;
  return Expected<ReplicaLayout>::failure("unknown replica layout '" + text +
                                          "' (pipeline-major, stage-major)");
}

namespace {

/// One ring over `size` GPUs whose hops use `links`: 2(size-1) steps of
/// bytes/size each (reduce-scatter then all-gather), each as long as its slowest
/// hop; `half` keeps one of the two halves.
double ringMs(std::initializer_list<const LinkSpec *> links, int size, double bytes,
              bool half = false) {
  if (size <= 1 || bytes <= 0)
    return 0;
  double step = 0;
  for (const LinkSpec *link : links)
    step = std::max(step, link->transferMs(bytes / size));
  return (half ? 1 : 2) * (size - 1) * step;
}

/// The all-reduce group of `gpus` (global GPU numbers) on `gpusPerNode`.
AllReduceGroup groupOf(const std::vector<int> &gpus, int gpusPerNode) {
  std::map<int, int> perNode;
  for (int gpu : gpus)
    ++perNode[gpu / gpusPerNode];
  AllReduceGroup group;
  group.nodes = static_cast<int>(perNode.size());
  group.perNode = 0;
  for (const auto &entry : perNode)
    group.perNode = std::max(group.perNode, entry.second);
  return group;
}

/// The global GPU of position `gpu` of replica `replica`'s pipeline.
int globalGpu(ReplicaLayout layout, int gpu, int replica, int stages, int replicas) {
  return layout == ReplicaLayout::PipelineMajor ? replica * stages + gpu : gpu * replicas + replica;
}

/// allReduceMs prices a group with as many of its GPUs on every node: throws,
/// naming the GPU and the nodes, when a position's replicas sit unevenly (e.g.
/// 4 stages x 3 replicas pipeline-major on nodes of 8: 2 on node 0, 1 on node 1).
void requireEvenGroups(ReplicaLayout layout, int stages, int replicas, int gpusPerNode) {
  for (int gpu = 0; gpu < stages; ++gpu) {
    std::map<int, int> perNode;
    for (int j = 0; j < replicas; ++j)
      ++perNode[globalGpu(layout, gpu, j, stages, replicas) / gpusPerNode];
    for (const auto &[node, count] : perNode)
      if (count != perNode.begin()->second)
        throw Error("the " + std::to_string(replicas) +
                    " replicas of GPU " + std::to_string(gpu) + " sit unevenly on nodes of " +
                    std::to_string(gpusPerNode) + " GPUs (" +
                    std::to_string(perNode.begin()->second) + " on node " +
                    std::to_string(perNode.begin()->first) + ", " + std::to_string(count) +
                    " on node " + std::to_string(node) + ")");
  }
}

/// The problem one replica plans, or why the split does not apply.
Problem pipelineProblemOf(const Problem &problem, int stages, ReplicaLayout layout) {
  const Platform &platform = problem.platform;
  const int perNode = platform.gpusPerNode;
  if (stages < 1 || platform.gpus % stages != 0)
    throw Error(std::to_string(stages) + " stages do not divide the " +
                std::to_string(platform.gpus) + " GPUs into replicas");
  const int replicas = platform.gpus / stages;
  if (problem.training.microbatches % replicas != 0)
    throw Error("the " + std::to_string(problem.training.microbatches) +
                " micro-batches do not split evenly over " + std::to_string(replicas) +
                " replicas");
  Problem pipeline = problem;
  pipeline.platform.gpus = stages;
  pipeline.training.microbatches = problem.training.microbatches / replicas;
  if (!platform.speed.empty())
    pipeline.platform.speed.assign(static_cast<size_t>(stages), platform.speed.front());
  // Every replica must see the same links, and position p's transfers the links
  // between its global GPUs: a pipeline of consecutive GPUs keeps the node size,
  // one of stride r has g / r of its GPUs per node (1 when r >= g).
  if (layout == ReplicaLayout::PipelineMajor) {
    if (replicas > 1 && stages % perNode != 0 && perNode % stages != 0)
      throw Error(std::to_string(stages) + " stages do not tile nodes of " +
                  std::to_string(perNode) + " GPUs");
  } else {
    if (replicas % perNode != 0 && perNode % replicas != 0)
      throw Error(std::to_string(replicas) + " replicas do not tile nodes of " +
                  std::to_string(perNode) + " GPUs");
    pipeline.platform.gpusPerNode = replicas >= perNode ? 1 : perNode / replicas;
  }
  requireEvenGroups(layout, stages, replicas, perNode);
  orThrow(pipeline.finalize());
  return pipeline;
}

} // namespace

namespace {

/// One bucket's all-reduce (allReduceMs).
double bucketMs(const Platform &platform, const AllReduceGroup &group, double bytes) {
  if (bytes <= 0)
    return 0;
  const LinkSpec *intra = &platform.intraNode, *inter = &platform.interNode;
  if (group.nodes == 1)
    return ringMs({intra}, group.perNode, bytes);
  if (group.perNode == 1)
    return ringMs({inter}, group.nodes, bytes);
  // A flat ring through every GPU takes hops of both kinds.
  const double flat = ringMs({intra, inter}, group.size(), bytes);
  const double hierarchical = 2 * ringMs({intra}, group.perNode, bytes, true) +
                              ringMs({inter}, group.nodes, bytes / group.perNode);
  return std::min(flat, hierarchical);
}

} // namespace

double allReduceMs(const Platform &platform, const AllReduceGroup &group, double bytes) {
  if (group.size() <= 1 || bytes <= 0)
    return 0;
  const double buckets = std::floor(bytes / kAllReduceBucketBytes);
  return buckets * bucketMs(platform, group, kAllReduceBucketBytes) +
         bucketMs(platform, group, bytes - buckets * kAllReduceBucketBytes);
}

std::string describeSplit(const ReplicaPlan &split) {
  std::string text = std::to_string(split.replicas) + " x " + std::to_string(split.stages);
  if (split.replicas > 1 && split.stages > 1)
    text += " " + toString(split.layout);
  return text;
}

Expected<Problem> replicaPipelineProblem(const Problem &problem, int stages, ReplicaLayout layout) {
  return catchErrors([&] { return pipelineProblemOf(problem, stages, layout); });
}

AllReduceFigures allReduceFigures(const Problem &pipelineProblem, const PlanResult &plan,
                                  const ReplicaPlan &split) {
  const int gpus = pipelineProblem.platform.gpus;
  const Allocation &allocation = plan.allocation;
  AllReduceFigures figures;
  // The gradients a GPU all-reduces: its layers' parameters and each shared
  // parameter it owns (the earliest stage that reads it: the other readers send
  // their gradient to it, which updates it, as the generated programs do).
  figures.gradientBytes.assign(static_cast<size_t>(gpus), 0);
  auto gpuOfLayer = [&](int layer) {
    return allocation.gpuOfStage[static_cast<size_t>(allocation.stageOfLayer[static_cast<size_t>(layer)])];
  };
  for (size_t l = 0; l < pipelineProblem.layers.size(); ++l)
    figures.gradientBytes[static_cast<size_t>(gpuOfLayer(static_cast<int>(l)))] +=
        pipelineProblem.layers[l].parameterBytes;
  for (const SharedParameter &shared : pipelineProblem.sharedParameters) {
    int owner = -1;
    for (int layer : shared.layers) {
      const int stage = allocation.stageOfLayer[static_cast<size_t>(layer)];
      owner = owner < 0 ? stage : std::min(owner, stage);
    }
    if (owner >= 0)
      figures.gradientBytes[static_cast<size_t>(
          allocation.gpuOfStage[static_cast<size_t>(owner)])] += shared.bytes;
  }
  std::vector<double> lastEnd(static_cast<size_t>(gpus), 0);
  for (const TimedAction &action : plan.simulation.timeline)
    lastEnd[static_cast<size_t>(action.gpu)] =
        std::max(lastEnd[static_cast<size_t>(action.gpu)], action.endMs);
  figures.allReduceMs.assign(static_cast<size_t>(gpus), 0);
  figures.pipelineIterationMs = plan.iterationMs;
  figures.iterationMs = plan.iterationMs;
  for (int gpu = 0; gpu < gpus; ++gpu) {
    std::vector<int> members;
    for (int j = 0; j < split.replicas; ++j)
      members.push_back(globalGpu(split.layout, gpu, j, split.stages, split.replicas));
    const AllReduceGroup group = groupOf(members, split.gpusPerNode);
    if (gpu == 0)
      figures.group = group;
    const double ms = allReduceMs(pipelineProblem.platform, group,
                                  figures.gradientBytes[static_cast<size_t>(gpu)]);
    figures.allReduceMs[static_cast<size_t>(gpu)] = ms;
    if (ms > 0)
      figures.iterationMs = std::max(figures.iterationMs, lastEnd[static_cast<size_t>(gpu)] + ms);
  }
  return figures;
}

/// Copies `figures` into `replica`'s fields of the same names.
static void setAllReduces(ReplicaPlan &replica, AllReduceFigures figures) {
  replica.group = figures.group;
  replica.gradientBytes = std::move(figures.gradientBytes);
  replica.allReduceMs = std::move(figures.allReduceMs);
  replica.pipelineIterationMs = figures.pipelineIterationMs;
  replica.iterationMs = figures.iterationMs;
}

Expected<ReplicaReport> planReplicas(const Problem &problem, const std::vector<int> &stageCounts,
                                     const PlanOptions &options,
                                     const std::vector<ReplicaLayout> &layouts,
                                     const std::function<void(const ReplicaPlan &)> &onSplit) {
  return catchErrors([&] {
    const Platform &platform = problem.platform;
    const int gpus = platform.gpus;
    if (!std::all_of(platform.speed.begin(), platform.speed.end(),
                     [&](double speed) { return speed == platform.speed.front(); }))
      throw Error("replicas need GPUs of one speed (--speed gives them different ones)");
    if (layouts.empty())
      throw Error("replicas: no layout to try (pipeline-major, stage-major)");
    auto asked = [&](ReplicaLayout layout) {
      return std::find(layouts.begin(), layouts.end(), layout) != layouts.end();
    };
    std::vector<int> counts = stageCounts;
    if (counts.empty())
      for (int s = 1; s <= gpus; ++s)
        if (gpus % s == 0)
          counts.push_back(s);
    for (int stages : counts)
      if (stages < 1 || gpus % stages != 0)
        throw Error(std::to_string(stages) + " stages do not divide the " + std::to_string(gpus) +
                    " GPUs into replicas");
    ReplicaReport report;
    report.problemName = problem.name;
    report.gpus = gpus;
    report.microbatches = problem.training.microbatches;
    // The splits that apply, in the table's order (S ascending, pipeline-major first).
    for (int stages : counts) {
      const int replicas = gpus / stages;
      for (ReplicaLayout layout : {ReplicaLayout::PipelineMajor, ReplicaLayout::StageMajor}) {
        // One replica, or one stage: both layouts are the same GPUs, tried once,
        // as pipeline-major (whichever layout is asked for).
        if (replicas == 1 || stages == 1 ? layout != ReplicaLayout::PipelineMajor : !asked(layout))
          continue;
        ReplicaPlan candidate;
        candidate.stages = stages;
        candidate.replicas = replicas;
        candidate.layout = layout;
        candidate.gpusPerNode = platform.gpusPerNode;
        try {
          candidate.pipelineProblem = pipelineProblemOf(problem, stages, layout);
        } catch (const Error &error) {
          candidate.reason = error.what();
        }
        report.candidates.push_back(std::move(candidate));
      }
    }
    // A replica's GPUs each run m / r micro-batches of their layers: the busiest
    // at least m / r times the larger of the work over S and the largest layer.
    double work = 0, largest = 0;
    for (const Layer &layer : problem.layers) {
      work += layer.workMs();
      largest = std::max(largest, layer.workMs());
    }
    const double speed = platform.speedOf(0);
    auto lowerBound = [&](const ReplicaPlan &c) {
      return static_cast<double>(problem.training.microbatches / c.replicas) *
             std::max(work / c.stages, largest) / speed;
    };
    // Planned from the lowest bound up; a split whose bound is not below the best
    // iteration so far cannot win and is not planned.
    std::vector<size_t> order;
    for (size_t i = 0; i < report.candidates.size(); ++i)
      if (report.candidates[i].reason.empty())
        order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return lowerBound(report.candidates[a]) < lowerBound(report.candidates[b]);
    });
    double bestIteration = kInfinity;
    for (size_t index : order) {
      ReplicaPlan &candidate = report.candidates[index];
      const double bound = lowerBound(candidate);
      if (bound >= bestIteration * (1 - 1e-9)) {
        std::ostringstream reason;
        reason.precision(2);
        reason << std::fixed << "not planned: its iteration is at least " << bound
               << " ms (m/r x the larger of work/S and the largest layer), the best split's "
               << bestIteration << " ms";
        candidate.reason = reason.str();
        if (onSplit)
          onSplit(candidate);
        continue;
      }
      const auto start = std::chrono::steady_clock::now();
      PlanOptions pipelineOptions = options;
      pipelineOptions.objective = Objective::IterationTime;
      PlanningReport pipeline = orThrow(plan(candidate.pipelineProblem, pipelineOptions));
      // Of the pipeline's valid plans (of the problem's schedule when that is
      // required), the one whose iteration with the all-reduces is shortest (the
      // all-reduces reward stages that finish early); the planner's own choice on
      // a tie. As plan() does with its own choice, the pick is checked again, and
      // one that fails the checker is dropped with its reason.
      int bestIndex = -1;
      AllReduceFigures best;
      for (;;) {
        bestIndex = -1;
        for (size_t i = 0; i < pipeline.results.size(); ++i) {
          const PlanResult &result = pipeline.results[i];
          if (!result.valid || (options.requireSchedule &&
                                result.scheduleKind != candidate.pipelineProblem.training.schedule))
            continue;
          AllReduceFigures trial = allReduceFigures(candidate.pipelineProblem, result, candidate);
          if (bestIndex < 0 || trial.iterationMs < best.iterationMs - 1e-9 ||
              (static_cast<int>(i) == pipeline.chosen &&
               trial.iterationMs <= best.iterationMs + 1e-9)) {
            best = std::move(trial);
            bestIndex = static_cast<int>(i);
          }
        }
        if (bestIndex < 0)
          break;
        PlanResult &picked = pipeline.results[static_cast<size_t>(bestIndex)];
        CheckReport check =
            checkSchedule(candidate.pipelineProblem, picked.allocation, picked.schedule);
        if (check.ok())
          break;
        picked.valid = false;
        picked.reason = "dropped: its schedule fails the checker: " + check.violations.front();
      }
      if (bestIndex < 0) {
        candidate.reason = noPlanReason(pipeline);
      } else {
        setAllReduces(candidate, std::move(best));
        pipeline.chosen = bestIndex;
        candidate.valid = true;
        bestIteration = std::min(bestIteration, candidate.iterationMs);
      }
      candidate.pipeline = std::move(pipeline);
      candidate.plannerSeconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (onSplit)
        onSplit(candidate);
    }
    for (size_t i = 0; i < report.candidates.size(); ++i) {
      const ReplicaPlan &c = report.candidates[i];
      if (c.valid && (report.chosen < 0 || c.iterationMs < report.best()->iterationMs - 1e-9))
        report.chosen = static_cast<int>(i);
    }
    return report;
  });
}

} // namespace partitioner
