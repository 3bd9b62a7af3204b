// Discrete-event replay of (allocation, schedule): see Simulator.h.
#include "partitioner/Simulator.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

namespace partitioner {

std::vector<Dependency> dependenciesOf(const StageGraph &graph, const Action &action,
                                       bool splitBackward) {
  std::vector<Dependency> deps;
  const size_t s = static_cast<size_t>(action.stage);
  switch (action.kind) {
  case ActionKind::Forward:
    for (const auto &edge : graph.predecessors[s])
      deps.push_back({{ActionKind::Forward, edge.stage, action.microbatch}, edge.bytes});
    break;
  case ActionKind::Backward:
  case ActionKind::BackwardInput: {
    deps.push_back({{ActionKind::Forward, action.stage, action.microbatch}, 0});
    const ActionKind producer = splitBackward ? ActionKind::BackwardInput : ActionKind::Backward;
    for (const auto &edge : graph.successors[s])
      deps.push_back({{producer, edge.stage, action.microbatch}, edge.bytes});
    break;
  }
  case ActionKind::BackwardWeight:
    deps.push_back({{ActionKind::BackwardInput, action.stage, action.microbatch}, 0});
    break;
  }
  return deps;
}

namespace {

struct ActionTable {
  int stages = 0, microbatches = 0;
  std::vector<double> values;
  ActionTable(int s, int m, double init)
      : stages(s), microbatches(m), values(static_cast<size_t>(4 * s * m), init) {}
  double &at(const Action &a) {
    return values[(static_cast<size_t>(a.kind) * static_cast<size_t>(stages) +
                   static_cast<size_t>(a.stage)) *
                      static_cast<size_t>(microbatches) +
                  static_cast<size_t>(a.microbatch)];
  }
};

double durationOf(const StageGraph &graph, const Action &action) {
  const size_t s = static_cast<size_t>(action.stage);
  switch (action.kind) {
  case ActionKind::Forward:
    return graph.forwardMs[s];
  case ActionKind::Backward:
    return graph.backwardMs[s];
  case ActionKind::BackwardInput:
    return graph.backwardMs[s] - graph.weightGradientMs[s];
  case ActionKind::BackwardWeight:
    return graph.weightGradientMs[s];
  }
  return 0;
}

} // namespace

SimulationResult simulate(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule) {
  SimulationResult result;
  const StageGraph graph = buildStageGraph(problem, allocation);
  const int gpus = problem.platform.gpus;
  const int stages = graph.numStages;
  const int m = schedule.microbatches;
  if (static_cast<int>(schedule.actions.size()) != gpus)
    throw Error("schedule has " + std::to_string(schedule.actions.size()) +
                " action lists for " + std::to_string(gpus) + " GPUs");
  for (int g = 0; g < gpus; ++g)
    for (const Action &a : schedule.actions[static_cast<size_t>(g)])
      if (a.stage < 0 || a.stage >= stages || a.microbatch < 0 || a.microbatch >= m ||
          allocation.gpuOfStage[static_cast<size_t>(a.stage)] != g)
        throw Error("schedule: action " + toString(a) + " is not valid on GPU " +
                    std::to_string(g));

  ActionTable end(stages, m, -1);        // end time once executed
  ActionTable arrival(stages, m, 0);     // latest input arrival per consumer action
  ActionTable arrived(stages, m, 0);     // number of inputs arrived
  std::vector<size_t> next(static_cast<size_t>(gpus), 0);
  std::vector<double> gpuFree(static_cast<size_t>(gpus), 0);
  std::vector<double> sendFree(static_cast<size_t>(gpus), 0), recvFree(static_cast<size_t>(gpus), 0);
  result.gpuBusyMs.assign(static_cast<size_t>(gpus), 0);

  // Deliver the output of `done` (ended at `when`) to the actions that wait for it.
  auto deliver = [&](const Action &done, double when) {
    const size_t s = static_cast<size_t>(done.stage);
    const int fromGpu = graph.gpu[s];
    auto send = [&](int toStage, double bytes, ActionKind consumerKind, bool gradient) {
      const int toGpu = graph.gpu[static_cast<size_t>(toStage)];
      double at = when;
      if (toGpu != fromGpu && bytes > 0) {
        const double start = std::max({when, sendFree[static_cast<size_t>(fromGpu)],
                                       recvFree[static_cast<size_t>(toGpu)]});
        at = start + problem.platform.linkBetween(fromGpu, toGpu).transferMs(bytes);
        sendFree[static_cast<size_t>(fromGpu)] = at;
        recvFree[static_cast<size_t>(toGpu)] = at;
        result.transfers.push_back(
            {done.stage, toStage, done.microbatch, gradient, fromGpu, toGpu, bytes, start, at});
      }
      Action consumer{consumerKind, toStage, done.microbatch};
      arrival.at(consumer) = std::max(arrival.at(consumer), at);
      arrived.at(consumer) += 1;
    };
    if (done.kind == ActionKind::Forward) {
      for (const auto &edge : graph.successors[s])
        send(edge.stage, edge.bytes, ActionKind::Forward, false);
    } else if (done.kind == ActionKind::Backward || done.kind == ActionKind::BackwardInput) {
      const ActionKind consumer =
          schedule.splitBackward ? ActionKind::BackwardInput : ActionKind::Backward;
      for (const auto &edge : graph.predecessors[s])
        send(edge.stage, edge.bytes, consumer, true);
    }
  };

  auto readyTime = [&](const Action &a) -> double {
    const size_t s = static_cast<size_t>(a.stage);
    switch (a.kind) {
    case ActionKind::Forward:
      if (arrived.at(a) < static_cast<double>(graph.predecessors[s].size()))
        return -1;
      return arrival.at(a);
    case ActionKind::Backward:
    case ActionKind::BackwardInput: {
      double f = end.at({ActionKind::Forward, a.stage, a.microbatch});
      if (f < 0 || arrived.at(a) < static_cast<double>(graph.successors[s].size()))
        return -1;
      return std::max(f, arrival.at(a));
    }
    case ActionKind::BackwardWeight:
      return end.at({ActionKind::BackwardInput, a.stage, a.microbatch});
    }
    return -1;
  };

  size_t remaining = 0;
  for (const auto &list : schedule.actions)
    remaining += list.size();
  while (remaining > 0) {
    int bestGpu = -1;
    double bestStart = kInfinity;
    for (int g = 0; g < gpus; ++g) {
      const auto &list = schedule.actions[static_cast<size_t>(g)];
      if (next[static_cast<size_t>(g)] >= list.size())
        continue;
      const Action &a = list[next[static_cast<size_t>(g)]];
      double ready = readyTime(a);
      if (ready < 0)
        continue;
      double start = std::max(ready, gpuFree[static_cast<size_t>(g)]);
      if (start < bestStart) {
        bestStart = start;
        bestGpu = g;
      }
    }
    if (bestGpu < 0) {
      std::ostringstream out;
      out << "deadlock:";
      for (int g = 0; g < gpus; ++g) {
        const auto &list = schedule.actions[static_cast<size_t>(g)];
        if (next[static_cast<size_t>(g)] < list.size())
          out << " GPU " << g << " waits at " << toString(list[next[static_cast<size_t>(g)]])
              << ";";
      }
      result.error = out.str();
      return result;
    }
    const Action a = schedule.actions[static_cast<size_t>(bestGpu)][next[static_cast<size_t>(bestGpu)]++];
    if (end.at(a) >= 0)
      throw Error("schedule runs " + toString(a) + " twice");
    const double duration = durationOf(graph, a);
    const double finish = bestStart + duration;
    end.at(a) = finish;
    gpuFree[static_cast<size_t>(bestGpu)] = finish;
    result.gpuBusyMs[static_cast<size_t>(bestGpu)] += duration;
    result.timeline.push_back({a, bestGpu, bestStart, finish});
    deliver(a, finish);
    --remaining;
  }

  // Every F and B (or Bi and W) must have run exactly once.
  for (int s = 0; s < stages; ++s)
    for (int i = 0; i < m; ++i) {
      std::vector<ActionKind> needed{ActionKind::Forward};
      if (schedule.splitBackward) {
        needed.push_back(ActionKind::BackwardInput);
        needed.push_back(ActionKind::BackwardWeight);
      } else {
        needed.push_back(ActionKind::Backward);
      }
      for (ActionKind kind : needed)
        if (end.at({kind, s, i}) < 0) {
          result.error = "schedule never runs " + toString(Action{kind, s, i});
          return result;
        }
    }

  double makespan = 0;
  for (const auto &t : result.timeline)
    makespan = std::max(makespan, t.endMs);
  for (const auto &t : result.transfers)
    makespan = std::max(makespan, t.endMs);
  result.iterationMs = makespan;

  // Memory: activations live from the start of F to the end of B (or W).
  struct Event {
    double time;
    int order; // frees (0) before allocations (1) at equal times
    int stage;
    int delta;
  };
  std::vector<Event> events;
  const ActionKind release =
      schedule.splitBackward ? ActionKind::BackwardWeight : ActionKind::Backward;
  for (const auto &t : result.timeline) {
    if (t.action.kind == ActionKind::Forward)
      events.push_back({t.startMs, 1, t.action.stage, +1});
    else if (t.action.kind == release)
      events.push_back({t.endMs, 0, t.action.stage, -1});
  }
  std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) {
    return std::tie(a.time, a.order) < std::tie(b.time, b.order);
  });
  result.stageInFlight.assign(static_cast<size_t>(stages), 0);
  std::vector<int> alive(static_cast<size_t>(stages), 0);
  std::vector<double> gpuActivation(static_cast<size_t>(gpus), 0);
  result.memory.assign(static_cast<size_t>(gpus), GpuMemory{});
  for (const Event &e : events) {
    const size_t s = static_cast<size_t>(e.stage);
    alive[s] += e.delta;
    result.stageInFlight[s] = std::max(result.stageInFlight[s], alive[s]);
    const size_t g = static_cast<size_t>(graph.gpu[s]);
    gpuActivation[g] += e.delta * graph.savedBytes[s];
    result.memory[g].activationPeakBytes =
        std::max(result.memory[g].activationPeakBytes, gpuActivation[g]);
  }
  for (int s = 0; s < stages; ++s) {
    const size_t g = static_cast<size_t>(graph.gpu[static_cast<size_t>(s)]);
    const double params = graph.parameterBytes[static_cast<size_t>(s)];
    GpuMemory &memory = result.memory[g];
    memory.stateBytes += problem.training.stateMultiplier * params;
    memory.extraWeightBytes +=
        (weightVersions(problem.training, result.stageInFlight[static_cast<size_t>(s)]) - 1) *
        params;
    if (problem.training.communicationBuffers)
      memory.bufferBytes += graph.inBytes[static_cast<size_t>(s)] + graph.outBytes[static_cast<size_t>(s)];
  }
  double busy = 0;
  int used = 0;
  for (int g = 0; g < gpus; ++g) {
    GpuMemory &memory = result.memory[static_cast<size_t>(g)];
    memory.peakBytes = memory.stateBytes + memory.extraWeightBytes + memory.bufferBytes +
                       memory.activationPeakBytes;
    if (!schedule.actions[static_cast<size_t>(g)].empty()) {
      ++used;
      busy += result.gpuBusyMs[static_cast<size_t>(g)];
    }
  }
  result.bubbleFraction = makespan > 0 && used > 0 ? 1 - busy / (used * makespan) : 0;
  result.completed = true;
  return result;
}

SimulationResult simulatePlan(const Problem &problem, const Allocation &allocation,
                              ScheduleKind kind, Schedule *scheduleOut) {
  const int m = problem.training.microbatches;
  Schedule schedule = makeSchedule(kind, problem, allocation, m);
  SimulationResult result = simulate(problem, allocation, schedule);
  if (result.completed) {
    Schedule longer = makeSchedule(kind, problem, allocation, 2 * m);
    SimulationResult twice = simulate(problem, allocation, longer);
    if (twice.completed)
      result.periodMs = (twice.iterationMs - result.iterationMs) / m;
    else
      result.periodMs = result.iterationMs / m;
  }
  if (scheduleOut)
    *scheduleOut = std::move(schedule);
  return result;
}

} // namespace partitioner
