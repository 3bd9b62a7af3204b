// Schedule generators (per-GPU action orders). Timing is the simulator's job:
// the generators call the simulator, never the other way round.
#include "partitioner/Schedule.h"
#include "partitioner/KPeriodic.h"
#include "partitioner/Error.h"
#include "partitioner/Simulator.h"

#include "PeriodicSlot.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <queue>

namespace partitioner {

namespace {

/// Stages of each GPU, in stage order.
std::vector<std::vector<int>> stagesPerGpu(const Problem &problem, const Allocation &allocation) {
  std::vector<std::vector<int>> result(static_cast<size_t>(problem.platform.gpus));
  for (int s = 0; s < allocation.numStages(); ++s)
    result[static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(s)])].push_back(s);
  return result;
}

void requireOneStagePerGpu(ScheduleKind kind, const Allocation &allocation) {
  if (!allocation.oneStagePerGpu())
    throw Error("schedule " + toString(kind) +
                " needs one stage per GPU; this allocation puts " +
                std::to_string(allocation.numStages()) + " stages on " +
                std::to_string(allocation.numGpusUsed()) + " GPUs");
}

/// Stage position in pipeline order (stages are numbered in order already).
void oneFOneB(Schedule &schedule, int stage, int stages, int warmup, int microbatches,
              std::vector<Action> &out, bool split) {
  warmup = std::max(0, std::min(warmup, microbatches));
  (void)stages;
  auto backward = [&](int mb) {
    if (split) {
      out.push_back({ActionKind::BackwardInput, stage, mb});
      out.push_back({ActionKind::BackwardWeight, stage, mb});
    } else {
      out.push_back({ActionKind::Backward, stage, mb});
    }
  };
  for (int i = 0; i < warmup; ++i)
    out.push_back({ActionKind::Forward, stage, i});
  for (int i = 0; i + warmup < microbatches; ++i) {
    out.push_back({ActionKind::Forward, stage, i + warmup});
    backward(i);
  }
  for (int i = std::max(0, microbatches - warmup); i < microbatches; ++i)
    backward(i);
  schedule.splitBackward = split;
}

/// The periodic pattern's orders for micro-batches 0..m-1, sorted by nominal start:
/// each GPU's actions, and, when every transfer found its port slot, each port's
/// transfers (Schedule::sendOrder / receiveOrder).
void patternOrder(const PeriodicPattern &pattern, const Allocation &allocation,
                  const StageGraph &graph, int gpus, int m, Schedule &schedule) {
  struct Timed {
    double time;
    int kindRank;
    Action action;
  };
  std::vector<std::vector<Timed>> perGpu(static_cast<size_t>(gpus));
  for (int s = 0; s < allocation.numStages(); ++s) {
    const size_t g = static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(s)]);
    for (int i = 0; i < m; ++i) {
      // At equal nominal times (zero-length operations) forwards go first: F(i) must
      // precede B(i).
      perGpu[g].push_back({pattern.forwardOffset[static_cast<size_t>(s)] + i * pattern.periodMs, 0,
                           {ActionKind::Forward, s, i}});
      perGpu[g].push_back({pattern.backwardOffset[static_cast<size_t>(s)] + i * pattern.periodMs, 1,
                           {ActionKind::Backward, s, i}});
    }
  }
  schedule.actions.assign(static_cast<size_t>(gpus), {});
  for (size_t g = 0; g < perGpu.size(); ++g) {
    std::stable_sort(perGpu[g].begin(), perGpu[g].end(), [](const Timed &a, const Timed &b) {
      if (a.time != b.time)
        return a.time < b.time;
      return a.kindRank < b.kindRank;
    });
    for (const Timed &t : perGpu[g])
      schedule.actions[g].push_back(t.action);
  }
  schedule.sendOrder.clear();
  schedule.receiveOrder.clear();
  if (!pattern.portsFit || pattern.transfers.empty() || m <= 0)
    return;
  // A port's slots do not overlap modulo T, so its transfers have distinct nominal
  // starts: each port's order is the merge, by start, of its slots' series
  // start + i T (a heap of one entry per slot).
  const size_t ports = static_cast<size_t>(gpus);
  std::vector<std::vector<size_t>> sendSlots(ports), receiveSlots(ports);
  for (size_t k = 0; k < pattern.transfers.size(); ++k) {
    const auto &slotted = pattern.transfers[k];
    sendSlots[static_cast<size_t>(graph.gpu[static_cast<size_t>(slotted.fromStage)])].push_back(k);
    receiveSlots[static_cast<size_t>(graph.gpu[static_cast<size_t>(slotted.toStage)])].push_back(k);
  }
  auto merge = [&](const std::vector<size_t> &slots, std::vector<Transfer> &out) {
    using Next = std::pair<double, std::pair<size_t, int>>; // start, (slot, micro-batch)
    std::priority_queue<Next, std::vector<Next>, std::greater<Next>> heap;
    for (size_t k : slots)
      heap.push({pattern.transfers[k].startMs, {k, 0}});
    out.reserve(slots.size() * static_cast<size_t>(m));
    while (!heap.empty()) {
      const auto [start, at] = heap.top();
      heap.pop();
      const auto &slotted = pattern.transfers[at.first];
      out.push_back({slotted.fromStage, slotted.toStage, at.second, slotted.gradient});
      if (at.second + 1 < m)
        heap.push({start + pattern.periodMs, {at.first, at.second + 1}});
    }
  };
  schedule.sendOrder.assign(ports, {});
  schedule.receiveOrder.assign(ports, {});
  for (size_t g = 0; g < ports; ++g) {
    merge(sendSlots[g], schedule.sendOrder[g]);
    merge(receiveSlots[g], schedule.receiveOrder[g]);
  }
}

/// How generalPatternOrder reserves GPU time modulo T.
enum class SlotMode {
  PerOperation, ///< each F and B at the earliest free slot after its inputs
  PerStage,     ///< F and B of a stage in one block of F + B (earliest free block)
  Packed,       ///< the stage blocks of each GPU back to back (always fits at T)
};

/// A 1-periodic pattern for a general allocation at period T: operations in chain
/// order (forwards by stage, then backwards in reverse), each at the earliest time after
/// its inputs whose slot modulo T is reserved for it on its GPU (see SlotMode). Fails
/// (empty) when a GPU's free time is too fragmented or a stage would keep more than
/// caps[s] micro-batches. Returns the per-GPU order of m micro-batches by nominal start.
std::vector<std::vector<Action>> generalPatternOrder(const Problem &problem, const StageGraph &graph,
                                                     double period, const std::vector<int> &caps, int m,
                                                     SlotMode mode) {
  const int stages = graph.numStages;
  const size_t gpus = static_cast<size_t>(problem.platform.gpus);
  const double eps = 1e-9 * period;
  std::vector<std::vector<std::pair<double, double>>> busy(gpus); // [a, b) within [0, T)
  auto isFree = [&](size_t g, double r, double d) {
    // [r, r + d) modulo T, split where it wraps.
    std::vector<std::pair<double, double>> pieces;
    if (r + d <= period + eps)
      pieces.push_back({r, r + d});
    else {
      pieces.push_back({r, period});
      pieces.push_back({0, r + d - period});
    }
    for (const auto &[a, b] : busy[g])
      for (const auto &[x, y] : pieces)
        if (x < b - eps && a < y - eps)
          return false;
    return true;
  };
  auto occupy = [&](size_t g, double r, double d) {
    if (d <= 0)
      return;
    if (r + d <= period + eps)
      busy[g].push_back({r, std::min(period, r + d)});
    else {
      busy[g].push_back({r, period});
      busy[g].push_back({0, r + d - period});
    }
  };
  // Earliest t >= earliest with a free slot of length d on GPU g, or -1.
  auto place = [&](size_t g, double earliest, double d) {
    if (d > period + eps)
      return -1.0;
    const double base = std::fmod(earliest, period);
    std::vector<double> candidates{0.0};
    for (const auto &interval : busy[g]) {
      double delay = std::fmod(interval.second - base, period);
      if (delay < 0)
        delay += period;
      if (delay > period - eps)
        delay = 0;
      candidates.push_back(delay);
    }
    std::sort(candidates.begin(), candidates.end());
    for (double delay : candidates) {
      double r = std::fmod(base + delay, period);
      if (r < 0)
        r += period;
      if (d <= 0 || isFree(g, r, d)) {
        occupy(g, r, d);
        return earliest + delay;
      }
    }
    return -1.0;
  };
  auto transfer = [&](int from, int to, double bytes) {
    const int a = graph.gpu[static_cast<size_t>(from)], b = graph.gpu[static_cast<size_t>(to)];
    return a == b ? 0.0 : problem.platform.linkBetween(a, b).transferMs(bytes);
  };
  // Smallest t >= earliest with t = offset modulo T.
  auto atOffset = [&](double earliest, double offset) {
    double delay = std::fmod(offset - earliest, period);
    if (delay < 0)
      delay += period;
    if (delay > period - eps)
      delay = 0;
    return earliest + delay;
  };
  std::vector<double> packed(gpus, 0);
  std::vector<double> forward(static_cast<size_t>(stages), 0), backward(static_cast<size_t>(stages), 0);
  for (int s = 0; s < stages; ++s) {
    const size_t i = static_cast<size_t>(s);
    double earliest = 0;
    for (const auto &edge : graph.predecessors[i])
      earliest = std::max(earliest, forward[static_cast<size_t>(edge.stage)] +
                                        graph.forwardMs[static_cast<size_t>(edge.stage)] +
                                        transfer(edge.stage, s, edge.bytes));
    const size_t g = static_cast<size_t>(graph.gpu[i]);
    if (mode == SlotMode::PerOperation) {
      forward[i] = place(g, earliest, graph.forwardMs[i]);
    } else if (mode == SlotMode::PerStage) {
      forward[i] = place(g, earliest, graph.forwardMs[i] + graph.backwardMs[i]);
    } else {
      forward[i] = atOffset(earliest, packed[g]);
      packed[g] += graph.forwardMs[i] + graph.backwardMs[i];
      if (packed[g] > period * (1 + 1e-9))
        return {};
    }
    if (forward[i] < 0)
      return {};
  }
  for (int s = stages - 1; s >= 0; --s) {
    const size_t i = static_cast<size_t>(s);
    double earliest = forward[i] + graph.forwardMs[i];
    for (const auto &edge : graph.successors[i])
      earliest = std::max(earliest, backward[static_cast<size_t>(edge.stage)] +
                                        graph.backwardMs[static_cast<size_t>(edge.stage)] +
                                        transfer(edge.stage, s, edge.bytes));
    backward[i] = mode == SlotMode::PerOperation
                      ? place(static_cast<size_t>(graph.gpu[i]), earliest, graph.backwardMs[i])
                      : atOffset(earliest, forward[i] + graph.forwardMs[i]);
    if (backward[i] < 0)
      return {};
    const double span = backward[i] + graph.backwardMs[i] - forward[i];
    if (std::max(1, static_cast<int>(std::ceil(span / period - 1e-9))) > caps[i])
      return {};
  }
  struct Timed {
    double time;
    int rank; ///< forwards first, forwards by stage, backwards by reverse stage
    Action action;
  };
  std::vector<std::vector<Timed>> perGpu(gpus);
  for (int s = 0; s < stages; ++s) {
    const size_t g = static_cast<size_t>(graph.gpu[static_cast<size_t>(s)]);
    for (int i = 0; i < m; ++i) {
      perGpu[g].push_back({forward[static_cast<size_t>(s)] + i * period, s, {ActionKind::Forward, s, i}});
      perGpu[g].push_back(
          {backward[static_cast<size_t>(s)] + i * period, 2 * stages - s, {ActionKind::Backward, s, i}});
    }
  }
  std::vector<std::vector<Action>> order(gpus);
  for (size_t g = 0; g < gpus; ++g) {
    std::sort(perGpu[g].begin(), perGpu[g].end(), [](const Timed &a, const Timed &b) {
      if (a.time != b.time)
        return a.time < b.time;
      if (a.rank != b.rank)
        return a.rank < b.rank;
      return a.action.microbatch < b.action.microbatch;
    });
    for (const Timed &t : perGpu[g])
      order[g].push_back(t.action);
  }
  return order;
}

/// 1F1B for general allocations (a GPU holds several stages, in any order); stage s
/// keeps at most min(S - s, m) micro-batches, the memory rule `ilp-general` plans with.
/// First choice: the 1-periodic pattern above at the bottleneck period (its replay runs
/// at that period or faster when links do not contend). Otherwise (fragmented slots or
/// too many copies), the faster in simulation of the pattern at a slightly longer period
/// and the list scheduler of greedySchedule with those caps. `taken` (optional):
/// an order asked for instead of choosing, and set to the order returned
/// (generateSchedule's GeneralOrder).
Schedule generalOneFOneB(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                         const StageGraph &graph, int microbatches,
                         std::optional<SimulationResult> *simulated, GeneralOrder *taken) {
  const int stages = allocation.numStages();
  std::vector<int> caps;
  for (int s = 0; s < stages; ++s)
    caps.push_back(std::max(1, std::min(stages - s, microbatches)));
  const GeneralOrder asked = taken ? *taken : GeneralOrder::Choose;
  auto greedy = [&] {
    if (taken)
      *taken = GeneralOrder::List;
    return greedySchedule(problem, allocation, graph, kind, microbatches, caps);
  };
  if (kind == ScheduleKind::ZeroBubble || asked == GeneralOrder::List)
    return greedy();
  const double bottleneck = bottleneckPeriod(problem, graph);
  if (bottleneck <= 0)
    return greedy();
  for (double factor : {1.0, 1.02, 1.05, 1.1, 1.2, 1.35, 1.5}) {
    std::vector<std::vector<Action>> order;
    for (SlotMode mode : {SlotMode::PerOperation, SlotMode::PerStage, SlotMode::Packed})
      if (order.empty())
        order = generalPatternOrder(problem, graph, bottleneck * factor, caps, microbatches, mode);
    if (order.empty())
      continue;
    Schedule pattern;
    pattern.kind = kind;
    pattern.microbatches = microbatches;
    pattern.actions = std::move(order);
    if (factor == 1.0 || asked == GeneralOrder::Pattern) {
      if (taken)
        *taken = GeneralOrder::Pattern;
      return pattern;
    }
    Schedule listed = greedy();
    SimulationResult a = simulate(problem, allocation, pattern, graph);
    SimulationResult b = simulate(problem, allocation, listed, graph);
    const bool patternWins = a.completed && (!b.completed || a.iterationMs < b.iterationMs);
    if (simulated)
      *simulated = std::move(patternWins ? a : b);
    if (taken)
      *taken = patternWins ? GeneralOrder::Pattern : GeneralOrder::List;
    return patternWins ? pattern : listed;
  }
  return greedy();
}

} // namespace

double bottleneckPeriod(const Problem &problem, const Allocation &allocation) {
  return bottleneckPeriod(problem, buildStageGraph(problem, allocation));
}

double bottleneckPeriod(const Problem &problem, const StageGraph &graph) {
  const size_t gpus = static_cast<size_t>(problem.platform.gpus);
  std::vector<double> compute(gpus, 0), send(gpus, 0), receive(gpus, 0);
  for (int s = 0; s < graph.numStages; ++s) {
    const size_t i = static_cast<size_t>(s);
    const int g = graph.gpu[i];
    compute[static_cast<size_t>(g)] += graph.forwardMs[i] + graph.backwardMs[i];
    for (const auto &edge : graph.successors[i]) {
      const int h = graph.gpu[static_cast<size_t>(edge.stage)];
      if (h == g)
        continue;
      const double t = problem.platform.linkBetween(g, h).transferMs(edge.bytes);
      // Activation g -> h and its gradient h -> g: each port carries both directions once.
      send[static_cast<size_t>(g)] += t;
      receive[static_cast<size_t>(h)] += t;
      send[static_cast<size_t>(h)] += t;
      receive[static_cast<size_t>(g)] += t;
    }
  }
  double best = 0;
  for (size_t g = 0; g < gpus; ++g)
    best = std::max({best, compute[g], send[g], receive[g]});
  return best;
}

PeriodicPattern periodicPattern(const Problem &problem, const Allocation &allocation,
                                double periodMs) {
  return periodicPattern(problem, buildStageGraph(problem, allocation), periodMs);
}

namespace {
/// One port's busy intervals modulo T.
struct PortCircle {
  std::vector<PortSlot> busy;
};

/// The earliest start >= t at which a transfer of `length` is free on both ports
/// modulo T, or infinity when there is none.
double earliestOnBoth(const PortCircle &out, const PortCircle &in, double t, double length,
                      double period, std::vector<PortSlot> &scratch) {
  scratch.assign(out.busy.begin(), out.busy.end());
  scratch.insert(scratch.end(), in.busy.begin(), in.busy.end());
  return earliestFreeSlot(scratch.data(), scratch.size(), t, length, period);
}
} // namespace

PeriodicPattern periodicPattern(const Problem &problem, const StageGraph &graph,
                                double periodMs) {
  const int stages = graph.numStages;
  PeriodicPattern pattern;
  pattern.periodMs = periodMs;
  pattern.forwardOffset.assign(static_cast<size_t>(stages), 0);
  pattern.backwardOffset.assign(static_cast<size_t>(stages), 0);
  pattern.inFlight.assign(static_cast<size_t>(stages), 1);
  // Each transfer holds its sender's send port and its receiver's receive port for
  // its occupancy, modulo T; its latency follows. Activations are placed first (in
  // stage order), then gradients (from the last stage).
  const size_t gpus = static_cast<size_t>(problem.platform.gpus);
  std::vector<PortCircle> send(gpus), receive(gpus);
  std::vector<PortSlot> scratch;
  auto transfer = [&](int from, int to, bool gradient, double bytes, double ready) {
    const int a = graph.gpu[static_cast<size_t>(from)], b = graph.gpu[static_cast<size_t>(to)];
    if (a == b || bytes <= 0)
      return ready;
    const LinkSpec &link = problem.platform.linkBetween(a, b);
    const double occupancy = link.occupancyMs(bytes);
    if (occupancy <= 0)
      return ready + link.latencyMs;
    PortCircle &out = send[static_cast<size_t>(a)], &in = receive[static_cast<size_t>(b)];
    double start = earliestOnBoth(out, in, ready, occupancy, periodMs, scratch);
    if (start == kInfinity) {
      pattern.portsFit = false;
      start = ready;
    } else {
      out.busy.push_back(portSlotAt(start, occupancy, periodMs));
      in.busy.push_back(portSlotAt(start, occupancy, periodMs));
    }
    pattern.transfers.push_back({from, to, gradient, start});
    return start + occupancy + link.latencyMs;
  };
  // Stages are numbered topologically (tensors never flow backwards).
  for (int s = 0; s < stages; ++s) {
    // Inputs in the order they are ready.
    std::vector<std::pair<double, const StageGraph::Edge *>> inputs;
    for (const auto &edge : graph.predecessors[static_cast<size_t>(s)])
      inputs.push_back({pattern.forwardOffset[static_cast<size_t>(edge.stage)] +
                            graph.forwardMs[static_cast<size_t>(edge.stage)],
                        &edge});
    std::sort(inputs.begin(), inputs.end(),
              [](const auto &x, const auto &y) { return x.first < y.first; });
    for (const auto &[ready, edge] : inputs)
      pattern.forwardOffset[static_cast<size_t>(s)] =
          std::max(pattern.forwardOffset[static_cast<size_t>(s)],
                   transfer(edge->stage, s, false, edge->bytes, ready));
  }
  for (int s = stages - 1; s >= 0; --s) {
    const size_t i = static_cast<size_t>(s);
    double earliest = pattern.forwardOffset[i] + graph.forwardMs[i];
    for (const auto &edge : graph.successors[i])
      earliest = std::max(earliest, transfer(edge.stage, s, true, edge.bytes,
                                             pattern.backwardOffset[static_cast<size_t>(edge.stage)] +
                                                 graph.backwardMs[static_cast<size_t>(edge.stage)]));
    pattern.backwardOffset[i] = alignBackward(earliest, pattern.forwardOffset[i], graph.forwardMs[i],
                                              graph.backwardMs[i], periodMs);
    const double span = pattern.backwardOffset[i] + graph.backwardMs[i] - pattern.forwardOffset[i];
    pattern.inFlight[i] = std::max(1, static_cast<int>(std::ceil(span / periodMs - 1e-9)));
  }
  return pattern;
}

std::optional<PeriodicPattern> oneFOneBPattern(const Problem &problem,
                                               const Allocation &allocation,
                                               const StageGraph &graph) {
  const int stages = allocation.numStages();
  const double bottleneck = bottleneckPeriod(problem, graph);
  if (!(bottleneck > 0))
    return std::nullopt;
  // At most S - s alive on stage s, and no more than the plan's own cap where it has
  // one (a DP that priced each stage's memory with fewer copies; 0 reads as 1).
  const bool capped = static_cast<int>(allocation.inFlightLimit.size()) == stages;
  auto keepsWithin = [&](const PeriodicPattern &pattern) {
    if (!pattern.portsFit)
      return false;
    for (int s = 0; s < stages; ++s) {
      int cap = stages - s;
      if (capped)
        cap = std::min(cap, std::max(1, allocation.inFlightLimit[static_cast<size_t>(s)]));
      if (pattern.inFlight[static_cast<size_t>(s)] > cap)
        return false;
    }
    return true;
  };
  PeriodicPattern pattern = periodicPattern(problem, graph, bottleneck);
  if (keepsWithin(pattern))
    return pattern;
  // Transfers lengthen the spans: keep the copies within bounds by slowing the
  // pattern to the smallest period (bisection) at which they are.
  double low = bottleneck, high = 2 * bottleneck;
  while (!keepsWithin(periodicPattern(problem, graph, high)) && high < 64 * bottleneck)
    high *= 2;
  pattern = periodicPattern(problem, graph, high);
  if (!keepsWithin(pattern))
    return std::nullopt;
  for (int iteration = 0; iteration < 40; ++iteration) {
    const double mid = 0.5 * (low + high);
    PeriodicPattern attempt = periodicPattern(problem, graph, mid);
    if (keepsWithin(attempt)) {
      high = mid;
      pattern = std::move(attempt);
    } else {
      low = mid;
    }
  }
  return pattern;
}

Schedule generateSchedule(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                          int microbatches) {
  return generateSchedule(kind, problem, allocation, buildStageGraph(problem, allocation),
                          microbatches);
}

Schedule generateSchedule(ScheduleKind kind, const Problem &problem, const Allocation &allocation,
                          const StageGraph &graph, int microbatches,
                          std::optional<SimulationResult> *simulated, GeneralOrder *order) {
  Schedule schedule;
  schedule.kind = kind;
  schedule.microbatches = microbatches;
  const int gpus = problem.platform.gpus;
  schedule.actions.assign(static_cast<size_t>(gpus), {});
  const int stages = allocation.numStages();
  auto perGpu = stagesPerGpu(problem, allocation);

  switch (kind) {
  case ScheduleKind::GPipe: {
    // All forwards (micro-batch major), then all backwards in reverse stage order.
    for (int g = 0; g < gpus; ++g) {
      auto &out = schedule.actions[static_cast<size_t>(g)];
      const auto &mine = perGpu[static_cast<size_t>(g)];
      for (int s : mine)
        for (int i = 0; i < microbatches; ++i)
          out.push_back({ActionKind::Forward, s, i});
      for (auto it = mine.rbegin(); it != mine.rend(); ++it)
        for (int i = 0; i < microbatches; ++i)
          out.push_back({ActionKind::Backward, *it, i});
    }
    return schedule;
  }
  case ScheduleKind::OneFOneB:
  case ScheduleKind::OneFOneBStash:
  case ScheduleKind::Periodic: {
    if (kind != ScheduleKind::Periodic && !allocation.oneStagePerGpu())
      return generalOneFOneB(kind, problem, allocation, graph, microbatches, simulated, order);
    requireOneStagePerGpu(kind, allocation);
    if (!allocation.stageOrders.empty()) {
      if (kind == ScheduleKind::Periodic)
        throw Error("stage orders apply to 1F1B, not to the periodic schedule");
      schedule.actions = wordSchedule(problem, allocation, allocation.stageOrders, microbatches).actions;
      return schedule;
    }
    if (kind == ScheduleKind::Periodic) {
      const double period = std::max(bottleneckPeriod(problem, graph), allocation.targetPeriodMs);
      if (period > 0) {
        patternOrder(periodicPattern(problem, graph, period), allocation, graph, gpus,
                     microbatches, schedule);
        return schedule;
      }
    } else if (auto pattern = oneFOneBPattern(problem, allocation, graph)) {
      patternOrder(*pattern, allocation, graph, gpus, microbatches, schedule);
      return schedule;
    }
    for (int s = 0; s < stages; ++s) {
      const int g = allocation.gpuOfStage[static_cast<size_t>(s)];
      oneFOneB(schedule, s, stages, stages - s - 1, microbatches,
               schedule.actions[static_cast<size_t>(g)], false);
    }
    return schedule;
  }
  case ScheduleKind::ZeroBubble: {
    // 1F1B's memory bound (at most min(S - s, m) alive, released by W); B first, then
    // a forward, and W deferred into what would otherwise be bubbles (Simulator.h).
    // Several stages per GPU are fine: the list scheduler shares the GPU between them.
    std::vector<int> caps;
    for (int s = 0; s < stages; ++s)
      caps.push_back(std::max(1, std::min(stages - s, microbatches)));
    return greedySchedule(problem, allocation, graph, kind, microbatches, caps);
  }
  case ScheduleKind::Interleaved: {
    // Megatron's interleaved 1F1B: GPU g holds chunks g, g+G, ...; forwards visit
    // chunks in groups of G micro-batches.
    int used = allocation.numGpusUsed();
    if (stages % used != 0)
      throw Error("interleaved schedule: " + std::to_string(stages) +
                  " stages do not divide evenly over " + std::to_string(used) + " GPUs");
    for (int s = 0; s < stages; ++s)
      if (allocation.gpuOfStage[static_cast<size_t>(s)] != s % used)
        throw Error("interleaved schedule: stage " + std::to_string(s) + " must be on GPU " +
                    std::to_string(s % used));
    if (microbatches % used != 0)
      throw Error("interleaved schedule: micro-batches (" + std::to_string(microbatches) +
                  ") must be a multiple of the pipeline depth (" + std::to_string(used) + ")");
    const int chunks = stages / used;
    const int total = microbatches * chunks;
    for (int g = 0; g < used; ++g) {
      auto &out = schedule.actions[static_cast<size_t>(g)];
      auto forwardAt = [&](int k) {
        int chunk = (k / used) % chunks;
        int mb = (k / (used * chunks)) * used + k % used;
        return Action{ActionKind::Forward, chunk * used + g, mb};
      };
      auto backwardAt = [&](int k) {
        int chunk = chunks - 1 - (k / used) % chunks;
        int mb = (k / (used * chunks)) * used + k % used;
        return Action{ActionKind::Backward, chunk * used + g, mb};
      };
      int warmup = std::min((used - g - 1) * 2 + (chunks - 1) * used, total);
      if (chunks == 1)
        warmup = std::min(used - g - 1, total);
      int f = 0, b = 0;
      for (; f < warmup; ++f)
        out.push_back(forwardAt(f));
      while (f < total) {
        out.push_back(forwardAt(f++));
        out.push_back(backwardAt(b++));
      }
      while (b < total)
        out.push_back(backwardAt(b++));
    }
    return schedule;
  }
  }
  throw Error("unknown schedule kind");
}

SimulationResult simulatePlan(const Problem &problem, const Allocation &allocation,
                              ScheduleKind kind, Schedule *scheduleOut) {
  return simulatePlan(problem, allocation, buildStageGraph(problem, allocation), kind,
                      scheduleOut);
}

namespace {
/// `count` micro-batches of `kind`'s schedule, generated and simulated (a schedule
/// the generator simulated already, to choose it, is not simulated again); the
/// schedule goes to `scheduleOut`. `order` carries the kind of general order chosen
/// from one call to the next. Without `withMemory`, times only (simulate).
SimulationResult simulateMicrobatches(const Problem &problem, const Allocation &allocation,
                                      const StageGraph &graph, ScheduleKind kind, int count,
                                      GeneralOrder &order, Schedule &scheduleOut,
                                      bool withMemory = true) {
  std::optional<SimulationResult> simulated;
  scheduleOut = generateSchedule(kind, problem, allocation, graph, count, &simulated, &order);
  return simulated ? std::move(*simulated)
                   : simulate(problem, allocation, scheduleOut, graph, withMemory);
}
} // namespace

SimulationResult simulateIteration(const Problem &problem, const Allocation &allocation,
                                   ScheduleKind kind) {
  GeneralOrder order = GeneralOrder::Choose;
  Schedule schedule;
  SimulationResult result =
      simulateMicrobatches(problem, allocation, buildStageGraph(problem, allocation), kind,
                           problem.training.microbatches, order, schedule);
  result.periodMs = 0;
  return result;
}

SimulationResult simulatePlan(const Problem &problem, const Allocation &allocation,
                              const StageGraph &graph, ScheduleKind kind,
                              Schedule *scheduleOut) {
  const int m = problem.training.microbatches;
  // On a general allocation, 2m micro-batches follow the kind of order chosen for m.
  GeneralOrder order = GeneralOrder::Choose;
  Schedule schedule;
  SimulationResult result =
      simulateMicrobatches(problem, allocation, graph, kind, m, order, schedule);
  if (result.completed) {
    Schedule longer;
    const SimulationResult twice =
        simulateMicrobatches(problem, allocation, graph, kind, 2 * m, order, longer,
                             /*withMemory=*/false);
    if (twice.completed)
      result.periodMs = (twice.iterationMs - result.iterationMs) / m;
    else
      result.periodMs = result.iterationMs / m;
    // No schedule beats the busiest GPU's work per micro-batch; the marginal estimate
    // can undershoot it when the m-micro-batch run has not reached its steady state.
    for (double busy : result.gpuBusyMs)
      result.periodMs = std::max(result.periodMs, busy / m);
  }
  if (scheduleOut)
    *scheduleOut = std::move(schedule);
  return result;
}

Expected<Schedule> makeSchedule(ScheduleKind kind, const Problem &problem,
                                const Allocation &allocation, int microbatches) {
  return catchErrors([&] { return generateSchedule(kind, problem, allocation, microbatches); });
}

} // namespace partitioner
