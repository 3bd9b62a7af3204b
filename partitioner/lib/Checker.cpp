// Schedule and timeline checker (independent of the simulator's event loop).
#include "partitioner/Checker.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

namespace partitioner {

namespace {
using Key = std::tuple<int, int, int>;
Key keyOf(const Action &a) { return {static_cast<int>(a.kind), a.stage, a.microbatch}; }
std::string nameOf(const Transfer &t) {
  return transferAction(true, t.gradient, t.microbatch, t.fromStage, t.toStage);
}
/// The action whose end makes a transfer's data.
Action producerOf(const Transfer &t, bool splitBackward) {
  const ActionKind kind = !t.gradient       ? ActionKind::Forward
                          : splitBackward ? ActionKind::BackwardInput
                                          : ActionKind::Backward;
  return {kind, t.fromStage, t.microbatch};
}

} // namespace

namespace {
/// check(), or a report whose one violation is the error it threw.
template <class Check> CheckReport catchAsViolation(Check check) {
  try {
    return check();
  } catch (const Error &e) {
    CheckReport report;
    report.violations.push_back(e.what());
    return report;
  }
}

CheckReport checkScheduleOrThrow(const StageGraph &graph, const Schedule &schedule) {
  CheckReport report;
  std::map<Key, int> seen;
  for (size_t g = 0; g < schedule.actions.size(); ++g)
    for (const Action &a : schedule.actions[g]) {
      if (a.stage < 0 || a.stage >= graph.numStages) {
        report.violations.push_back(toString(a) + " names a stage that does not exist");
        continue;
      }
      if (a.microbatch < 0 || a.microbatch >= schedule.microbatches) {
        report.violations.push_back(toString(a) + " names a micro-batch beyond the schedule's " +
                                    std::to_string(schedule.microbatches));
        continue;
      }
      if (graph.gpu[static_cast<size_t>(a.stage)] != static_cast<int>(g))
        report.violations.push_back(toString(a) + " is listed on GPU " + std::to_string(g) +
                                    " but its stage is on GPU " +
                                    std::to_string(graph.gpu[static_cast<size_t>(a.stage)]));
      if (++seen[keyOf(a)] == 2)
        report.violations.push_back(toString(a) + " appears more than once");
    }
  std::vector<ActionKind> kinds{ActionKind::Forward};
  if (schedule.splitBackward) {
    kinds.push_back(ActionKind::BackwardInput);
    kinds.push_back(ActionKind::BackwardWeight);
  } else {
    kinds.push_back(ActionKind::Backward);
  }
  for (int s = 0; s < graph.numStages; ++s)
    for (int i = 0; i < schedule.microbatches; ++i)
      for (ActionKind kind : kinds)
        if (!seen.count(keyOf({kind, s, i})))
          report.violations.push_back(toString(Action{kind, s, i}) + " is missing");
  for (const auto &[key, count] : seen) {
    ActionKind kind = static_cast<ActionKind>(std::get<0>(key));
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
      report.violations.push_back(
          toString(Action{kind, std::get<1>(key), std::get<2>(key)}) +
          " does not belong to this schedule's backward form");
    }
  }
  const bool ports = schedule.hasPortOrders();
  const TransferIndex index(graph, schedule.microbatches);
  if (ports)
    for (std::string &fault : portOrderViolations(graph, schedule, index, 100))
      report.violations.push_back(std::move(fault));
  if (!report.ok())
    return report;

  // Symbolic execution: run any GPU's next action whose producers have all run (and
  // whose inputs, where a port order lists them, have crossed their ports), and any
  // port's next transfer whose producer has run and which is next on its other port.
  const size_t gpus = schedule.actions.size();
  // Which actions have run, by kind, stage and micro-batch (all valid by now).
  std::vector<char> ran(4 * static_cast<size_t>(graph.numStages) *
                            static_cast<size_t>(schedule.microbatches),
                        0);
  auto slot = [&](const Action &a) {
    return (static_cast<size_t>(a.kind) * static_cast<size_t>(graph.numStages) +
            static_cast<size_t>(a.stage)) *
               static_cast<size_t>(schedule.microbatches) +
           static_cast<size_t>(a.microbatch);
  };
  auto hasRun = [&](const Action &a) { return ran[slot(a)] != 0; };
  std::vector<char> listed(ports ? index.size() : 0, 0), crossed(listed);
  if (ports)
    for (const auto &order : schedule.sendOrder)
      for (const Transfer &t : order)
        listed[index.of(t)] = 1;
  // The transfer that carries dependency d to action a (its inputs or gradients).
  auto carrying = [](const Action &a, const Dependency &d) {
    return Transfer{d.producer.stage, a.stage, a.microbatch, a.kind != ActionKind::Forward};
  };
  auto inputsHere = [&](const Action &a, const Dependency &d) {
    if (!ports || d.producer.stage == a.stage)
      return true;
    const size_t number = index.of(carrying(a, d));
    return !listed[number] || crossed[number];
  };
  std::vector<size_t> next(gpus, 0), sendNext(gpus, 0), receiveNext(gpus, 0);
  bool progress = true;
  size_t remaining = 0;
  for (const auto &list : schedule.actions)
    remaining += list.size();
  while (remaining > 0 && progress) {
    progress = false;
    for (size_t g = 0; g < gpus; ++g) {
      while (next[g] < schedule.actions[g].size()) {
        const Action &a = schedule.actions[g][next[g]];
        bool ready = true;
        for (const Dependency &d : dependenciesOf(graph, a, schedule.splitBackward))
          if (!hasRun(d.producer) || !inputsHere(a, d)) {
            ready = false;
            break;
          }
        if (!ready)
          break;
        ran[slot(a)] = 1;
        ++next[g];
        --remaining;
        progress = true;
      }
      if (!ports)
        continue;
      while (sendNext[g] < schedule.sendOrder[g].size()) {
        const Transfer &t = schedule.sendOrder[g][sendNext[g]];
        const size_t to = static_cast<size_t>(graph.gpu[static_cast<size_t>(t.toStage)]);
        if (!hasRun(producerOf(t, schedule.splitBackward)) ||
            receiveNext[to] >= schedule.receiveOrder[to].size() ||
            !(schedule.receiveOrder[to][receiveNext[to]] == t))
          break;
        crossed[index.of(t)] = 1;
        ++sendNext[g];
        ++receiveNext[to];
        progress = true;
      }
    }
  }
  if (remaining > 0) {
    std::ostringstream out;
    out << "deadlock:";
    for (size_t g = 0; g < gpus; ++g)
      if (next[g] < schedule.actions[g].size()) {
        const Action &a = schedule.actions[g][next[g]];
        out << " GPU " << g << " blocks at " << toString(a);
        for (const Dependency &d : dependenciesOf(graph, a, schedule.splitBackward))
          if (!hasRun(d.producer)) {
            out << " (needs " << toString(d.producer) << ")";
            break;
          } else if (!inputsHere(a, d)) {
            out << " (needs " << nameOf(carrying(a, d)) << ")";
            break;
          }
        out << ";";
      }
    for (size_t g = 0; ports && g < gpus; ++g)
      if (sendNext[g] < schedule.sendOrder[g].size())
        out << " the send port of GPU " << g << " blocks at "
            << nameOf(schedule.sendOrder[g][sendNext[g]]) << ";";
    report.violations.push_back(out.str());
  }
  return report;
}
} // namespace

CheckReport checkSchedule(const StageGraph &graph, const Schedule &schedule) {
  return catchAsViolation([&] { return checkScheduleOrThrow(graph, schedule); });
}

CheckReport checkSchedule(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule) {
  return catchAsViolation(
      [&] { return checkScheduleOrThrow(buildStageGraph(problem, allocation), schedule); });
}

CheckReport checkTimeline(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule, const std::vector<TimedAction> &timeline) {
  return checkTimeline(problem, buildStageGraph(problem, allocation), schedule, timeline);
}

CheckReport checkTimeline(const Problem &problem, const StageGraph &graph,
                          const Schedule &schedule, const std::vector<TimedAction> &timeline) {
  CheckReport report;
  const double eps = 1e-6;
  std::map<Key, const TimedAction *> byKey;
  std::vector<std::vector<const TimedAction *>> perGpu(static_cast<size_t>(problem.platform.gpus));
  for (const TimedAction &t : timeline) {
    byKey[keyOf(t.action)] = &t;
    if (t.gpu >= 0 && t.gpu < problem.platform.gpus)
      perGpu[static_cast<size_t>(t.gpu)].push_back(&t);
    if (t.endMs + eps < t.startMs)
      report.violations.push_back(toString(t.action) + " ends before it starts");
  }
  for (size_t g = 0; g < perGpu.size(); ++g) {
    auto list = perGpu[g];
    // Stable: actions starting together (zero-length ones) keep the timeline's order.
    std::stable_sort(list.begin(), list.end(), [](const TimedAction *a, const TimedAction *b) {
      return a->startMs < b->startMs;
    });
    for (size_t i = 1; i < list.size(); ++i)
      if (list[i]->startMs + eps < list[i - 1]->endMs) {
        std::ostringstream out;
        out << "overlap on GPU " << g << ": " << toString(list[i - 1]->action) << " ["
            << list[i - 1]->startMs << ", " << list[i - 1]->endMs << ") and "
            << toString(list[i]->action) << " starting at " << list[i]->startMs;
        report.violations.push_back(out.str());
      }
    // The per-GPU order must be the schedule's order.
    if (g < schedule.actions.size() && list.size() == schedule.actions[g].size())
      for (size_t i = 0; i < list.size(); ++i)
        if (!(list[i]->action == schedule.actions[g][i])) {
          report.violations.push_back("GPU " + std::to_string(g) + " runs " +
                                      toString(list[i]->action) + " where the schedule has " +
                                      toString(schedule.actions[g][i]));
          break;
        }
  }
  for (const TimedAction &t : timeline) {
    for (const Dependency &d : dependenciesOf(graph, t.action, schedule.splitBackward)) {
      auto it = byKey.find(keyOf(d.producer));
      if (it == byKey.end()) {
        report.violations.push_back(toString(t.action) + " runs but its producer " +
                                    toString(d.producer) + " never does");
        continue;
      }
      const TimedAction &producer = *it->second;
      double transfer = 0;
      if (producer.gpu != t.gpu)
        transfer = problem.platform.linkBetween(producer.gpu, t.gpu).transferMs(d.bytes);
      if (t.startMs + eps < producer.endMs + transfer) {
        std::ostringstream out;
        out << "broken dependency: " << toString(t.action) << " starts at " << t.startMs
            << " before " << toString(d.producer) << " ends at " << producer.endMs;
        if (transfer > 0)
          out << " plus a " << transfer << " ms transfer";
        report.violations.push_back(out.str());
      }
    }
  }
  return report;
}

namespace {
/// The stage pipeline as a problem whose layers are the stages, for the
/// generators and the checker (unit costs: only the order matters).
Problem stageProblem(const StagePipeline &pipeline, std::string &error) {
  Problem problem;
  problem.name = "stages";
  const int stages = static_cast<int>(pipeline.gpuOfStage.size());
  int gpus = 1;
  for (int s = 0; s < stages; ++s) {
    Layer layer;
    layer.name = "stage" + std::to_string(s);
    layer.nodeIds = {layer.name};
    layer.forwardMs = 1;
    layer.backwardMs = 2;
    problem.layers.push_back(layer);
    gpus = std::max(gpus, pipeline.gpuOfStage[static_cast<size_t>(s)] + 1);
  }
  for (auto [from, to] : pipeline.activationEdges) {
    if (from < 0 || from >= stages || to < 0 || to >= stages) {
      error = "edge " + std::to_string(from) + " -> " + std::to_string(to) + " names a stage " +
              "outside 0.." + std::to_string(stages - 1);
      return problem;
    }
    problem.tensors.push_back(Tensor{from, {to}, 1});
  }
  // With no tensor at all, finalize() would assume a chain; one tensor that
  // nobody consumes says the stages are independent.
  if (problem.tensors.empty())
    problem.tensors.push_back(Tensor{0, {}, 0});
  problem.platform.gpus = gpus;
  problem.training.microbatches = pipeline.microbatches;
  problem.training.schedule = pipeline.schedule;
  if (Status status = problem.finalize(); !status)
    error = status.error;
  return problem;
}

Allocation stageAllocation(const StagePipeline &pipeline) {
  Allocation allocation;
  allocation.gpuOfStage = pipeline.gpuOfStage;
  for (size_t s = 0; s < pipeline.gpuOfStage.size(); ++s)
    allocation.stageOfLayer.push_back(static_cast<int>(s));
  return allocation;
}
} // namespace

Expected<Schedule> makeSchedule(const StagePipeline &pipeline) {
  std::string error;
  Problem problem = stageProblem(pipeline, error);
  if (!error.empty())
    return Expected<Schedule>::failure(error);
  return makeSchedule(pipeline.schedule, problem, stageAllocation(pipeline),
                      pipeline.microbatches);
}

CheckReport checkSchedule(const StagePipeline &pipeline, const Schedule &schedule) {
  std::string error;
  Problem problem = stageProblem(pipeline, error);
  if (!error.empty()) {
    CheckReport report;
    report.violations.push_back(error);
    return report;
  }
  return checkSchedule(problem, stageAllocation(pipeline), schedule);
}

} // namespace partitioner
