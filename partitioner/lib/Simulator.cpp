// Discrete-event replay of (allocation, schedule): see Simulator.h.
#include "partitioner/Simulator.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
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

TransferIndex::TransferIndex(const StageGraph &graph, int microbatches)
    : graph_(graph), microbatches_(std::max(0, microbatches)),
      edgeBase_(static_cast<size_t>(graph.numStages), 0),
      predecessorEdge_(static_cast<size_t>(graph.numStages)) {
  for (int s = 0; s < graph.numStages; ++s) {
    edgeBase_[static_cast<size_t>(s)] = edges_;
    edges_ += graph.successors[static_cast<size_t>(s)].size();
    lower_.insert(lower_.end(), graph.successors[static_cast<size_t>(s)].size(), s);
  }
  for (int s = 0; s < graph.numStages; ++s)
    for (const auto &edge : graph.predecessors[static_cast<size_t>(s)])
      predecessorEdge_[static_cast<size_t>(s)].push_back(
          edgeBase_[static_cast<size_t>(edge.stage)] + position(edge.stage, s));
}

size_t TransferIndex::position(int lower, int upper) const {
  const auto &out = graph_.successors[static_cast<size_t>(lower)];
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k].stage == upper)
      return k;
  return kNone;
}

size_t TransferIndex::of(const Transfer &t) const {
  if (t.fromStage < 0 || t.fromStage >= graph_.numStages || t.toStage < 0 ||
      t.toStage >= graph_.numStages || t.microbatch < 0 || t.microbatch >= microbatches_)
    return kNone;
  const int lower = t.gradient ? t.toStage : t.fromStage;
  const size_t k = position(lower, t.gradient ? t.fromStage : t.toStage);
  if (k == kNone)
    return kNone;
  return ((t.gradient ? edges_ : 0) + edgeBase_[static_cast<size_t>(lower)] + k) *
             static_cast<size_t>(microbatches_) +
         static_cast<size_t>(t.microbatch);
}

const StageGraph::Edge &TransferIndex::edge(size_t e) const {
  const int lower = lower_[e];
  return graph_.successors[static_cast<size_t>(lower)][e - edgeBase_[static_cast<size_t>(lower)]];
}

double TransferIndex::bytesAlong(size_t number) const { return edge(edgeOf(number)).bytes; }

Transfer TransferIndex::at(size_t number) const {
  const size_t e = edgeOf(number);
  const int lower = lower_[e], upper = edge(e).stage;
  const int mb = static_cast<int>(number % static_cast<size_t>(microbatches_));
  return isGradient(number) ? Transfer{upper, lower, mb, true} : Transfer{lower, upper, mb, false};
}

std::vector<std::string> portOrderViolations(const StageGraph &graph, const Schedule &schedule,
                                             const TransferIndex &index, size_t limit,
                                             const std::vector<char> *holdsPorts) {
  std::vector<std::string> violations;
  const size_t gpus = schedule.actions.size();
  if (schedule.sendOrder.size() != gpus || schedule.receiveOrder.size() != gpus) {
    violations.push_back("port orders for " + std::to_string(schedule.sendOrder.size()) +
                         " send and " + std::to_string(schedule.receiveOrder.size()) +
                         " receive ports on " + std::to_string(gpus) + " GPUs");
    return violations;
  }
  auto name = [](const Transfer &t) {
    return transferAction(true, t.gradient, t.microbatch, t.fromStage, t.toStage);
  };
  auto full = [&] { return violations.size() >= limit; };
  // Per transfer: 1 on a send port, 2 on a receive port (3: both).
  std::vector<char> listed(index.size(), 0);
  for (int receive = 0; receive < 2 && !full(); ++receive)
    for (size_t g = 0; g < gpus && !full(); ++g)
      for (const Transfer &t : receive ? schedule.receiveOrder[g] : schedule.sendOrder[g]) {
        if (full())
          break;
        auto refuse = [&](const std::string &why) {
          violations.push_back(std::string(receive ? "the receive" : "the send") + " port of GPU " +
                               std::to_string(g) + " lists " + name(t) + why);
        };
        const size_t number = index.of(t);
        if (number == TransferIndex::kNone) {
          refuse(", which names no tensor that flows between two stages");
          continue;
        }
        const int from = graph.gpu[static_cast<size_t>(t.fromStage)];
        const int to = graph.gpu[static_cast<size_t>(t.toStage)];
        const char side = receive ? 2 : 1;
        if (from == to)
          refuse(", whose two stages are both on GPU " + std::to_string(from));
        else if (static_cast<size_t>(receive ? to : from) != g)
          refuse(", which GPU " + std::to_string(from) + " sends to GPU " + std::to_string(to));
        else if (holdsPorts ? !(*holdsPorts)[number] : index.bytesAlong(number) <= 0)
          refuse(holdsPorts ? ", which holds no port (its link takes no time for it)"
                            : ", whose tensors have no bytes (no port holds them)");
        else if (listed[number] & side)
          refuse(" twice");
        listed[number] |= side;
      }
  for (size_t number = 0; number < listed.size() && !full(); ++number) {
    if (listed[number] == 1 || listed[number] == 2)
      violations.push_back(std::string(listed[number] == 1 ? "no receive port lists "
                                                           : "no send port lists ") +
                           name(index.at(number)));
    else if (!listed[number] && holdsPorts && (*holdsPorts)[number]) {
      const Transfer t = index.at(number);
      violations.push_back("the port orders do not list " + name(t) + " (GPU " +
                           std::to_string(graph.gpu[static_cast<size_t>(t.fromStage)]) +
                           " to GPU " + std::to_string(graph.gpu[static_cast<size_t>(t.toStage)]) +
                           ")");
    }
  }
  return violations;
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

namespace {

/// Busy intervals of one port, kept sorted, so that transfers are placed in the first
/// gap that fits (commit order is not time order).
class PortCalendar {
public:
  /// Earliest t >= from such that [t, t + duration) is free.
  double nextFree(double from, double duration) const {
    double t = from;
    auto it = std::lower_bound(busy_.begin(), busy_.end(), std::make_pair(t, t),
                               [](const auto &a, const auto &b) { return a.second <= b.first; });
    for (; it != busy_.end(); ++it) {
      if (t + duration <= it->first + 1e-12)
        return t;
      t = std::max(t, it->second);
    }
    return t;
  }
  void reserve(double start, double end) {
    auto it = std::lower_bound(busy_.begin(), busy_.end(), std::make_pair(start, end));
    busy_.insert(it, {start, end});
  }

private:
  std::vector<std::pair<double, double>> busy_;
};

/// The ports of a schedule with port orders (Schedule::sendOrder / receiveOrder):
/// each port carries its transfers in its order, a transfer once its data is ready
/// and it is next on both its ports. Transfers go by their TransferIndex numbers.
struct OrderedPorts {
  /// One direction of an edge: its GPUs and link times.
  struct Way {
    int fromGpu = 0, toGpu = 0;
    double bytes = 0, occupancyMs = 0, latencyMs = 0;
  };
  OrderedPorts(const StageGraph &graph, int microbatches)
      : index(graph, microbatches), ready(index.size(), -1) {}
  TransferIndex index;
  std::vector<Way> ways; ///< activations of edge e at e, their gradients at edges + e
  /// When each transfer's producer ended; -1 until then.
  std::vector<double> ready;
  std::vector<std::vector<size_t>> sendQueue, receiveQueue;
  std::vector<size_t> sendNext, receiveNext;
  std::vector<double> sendFree, receiveFree;
  std::vector<int> work;
  const Way &wayOf(size_t number) const {
    return ways[index.edgeOf(number) + (index.isGradient(number) ? index.edges() : 0)];
  }
};

/// Timing state shared by the fixed-order replay and the greedy order generator.
struct Engine {
  const Problem &problem;
  const StageGraph &graph;
  bool split;
  SimulationResult &result;
  ActionTable end, arrival, arrived;
  std::vector<double> gpuFree;
  std::vector<PortCalendar> sendPorts, receivePorts;
  /// Set when the schedule orders its ports (usePortOrders).
  std::optional<OrderedPorts> ordered;
  /// When set, the GPUs of the actions each delivery feeds (whose readiness changed).
  std::vector<int> *fed = nullptr;
  /// Whether result.timeline and result.transfers receive each action and transfer
  /// (a generator that only orders the actions does without them).
  bool record = true;

  Engine(const Problem &p, const StageGraph &g, int m, bool splitBackward, SimulationResult &r)
      : problem(p), graph(g), split(splitBackward), result(r), end(g.numStages, m, -1),
        arrival(g.numStages, m, 0), arrived(g.numStages, m, 0),
        gpuFree(static_cast<size_t>(p.platform.gpus), 0),
        sendPorts(static_cast<size_t>(p.platform.gpus)),
        receivePorts(static_cast<size_t>(p.platform.gpus)) {
    result.gpuBusyMs.assign(static_cast<size_t>(p.platform.gpus), 0);
  }

  /// The link occupancy of `bytes` between two stages' GPUs (0 on one GPU).
  double occupancy(int fromGpu, int toGpu, double bytes) const {
    return fromGpu != toGpu ? problem.platform.linkBetween(fromGpu, toGpu).occupancyMs(bytes) : 0.0;
  }

  /// Takes the schedule's port orders, after checking them (portOrderViolations,
  /// with the links: every transfer that holds ports, once on each side); throws
  /// Error naming the first fault.
  void usePortOrders(const Schedule &schedule) {
    const size_t gpus = static_cast<size_t>(problem.platform.gpus);
    OrderedPorts ports(graph, end.microbatches);
    const size_t edges = ports.index.edges();
    ports.ways.resize(2 * edges);
    size_t e = 0;
    for (int s = 0; s < graph.numStages; ++s)
      for (const auto &edge : graph.successors[static_cast<size_t>(s)]) {
        const int a = graph.gpu[static_cast<size_t>(s)];
        const int b = graph.gpu[static_cast<size_t>(edge.stage)];
        for (bool gradient : {false, true}) {
          OrderedPorts::Way &way = ports.ways[e + (gradient ? edges : 0)];
          way.fromGpu = gradient ? b : a;
          way.toGpu = gradient ? a : b;
          way.bytes = edge.bytes;
          way.occupancyMs = occupancy(way.fromGpu, way.toGpu, edge.bytes);
          way.latencyMs = problem.platform.linkBetween(way.fromGpu, way.toGpu).latencyMs;
        }
        ++e;
      }
    std::vector<char> holdsPorts(ports.index.size(), 0);
    for (size_t number = 0; number < holdsPorts.size(); ++number)
      holdsPorts[number] = ports.wayOf(number).occupancyMs > 0;
    const std::vector<std::string> faults =
        portOrderViolations(graph, schedule, ports.index, 1, &holdsPorts);
    if (!faults.empty())
      throw Error("schedule: " + faults.front());
    ports.sendQueue.assign(gpus, {});
    ports.receiveQueue.assign(gpus, {});
    for (size_t g = 0; g < gpus; ++g) {
      for (const Transfer &t : schedule.sendOrder[g])
        ports.sendQueue[g].push_back(ports.index.of(t));
      for (const Transfer &t : schedule.receiveOrder[g])
        ports.receiveQueue[g].push_back(ports.index.of(t));
    }
    ports.sendNext.assign(gpus, 0);
    ports.receiveNext.assign(gpus, 0);
    ports.sendFree.assign(gpus, 0);
    ports.receiveFree.assign(gpus, 0);
    ordered.emplace(std::move(ports));
  }

  /// Starts every transfer that is ready and next on both its ports, from GPU g's
  /// send port on (each start may let the next one on either port go).
  void pump(int g0) {
    OrderedPorts &ports = *ordered;
    ports.work.assign(1, g0);
    while (!ports.work.empty()) {
      const size_t g = static_cast<size_t>(ports.work.back());
      ports.work.pop_back();
      if (ports.sendNext[g] >= ports.sendQueue[g].size())
        continue;
      const size_t number = ports.sendQueue[g][ports.sendNext[g]];
      const OrderedPorts::Way &way = ports.wayOf(number);
      const size_t d = static_cast<size_t>(way.toGpu);
      const double ready = ports.ready[number];
      if (ready < 0 || ports.receiveNext[d] >= ports.receiveQueue[d].size() ||
          ports.receiveQueue[d][ports.receiveNext[d]] != number)
        continue;
      const double start = std::max({ready, ports.sendFree[g], ports.receiveFree[d]});
      const double finish = start + way.occupancyMs;
      ports.sendFree[g] = ports.receiveFree[d] = finish;
      ++ports.sendNext[g];
      ++ports.receiveNext[d];
      arrive(ports.index.at(number), way.fromGpu, way.toGpu, way.bytes, start,
             finish + way.latencyMs);
      ports.work.push_back(static_cast<int>(g));
      if (ports.receiveNext[d] < ports.receiveQueue[d].size())
        ports.work.push_back(ports.wayOf(ports.receiveQueue[d][ports.receiveNext[d]]).fromGpu);
    }
  }

  /// A transfer's data reaches its consumer at `at`.
  void arrive(const Transfer &t, int fromGpu, int toGpu, double bytes, double start, double at) {
    if (record && fromGpu != toGpu && bytes > 0)
      result.transfers.push_back(
          {t.fromStage, t.toStage, t.microbatch, t.gradient, fromGpu, toGpu, bytes, start, at});
    const ActionKind consumerKind = !t.gradient ? ActionKind::Forward
                                    : split     ? ActionKind::BackwardInput
                                                : ActionKind::Backward;
    Action consumer{consumerKind, t.toStage, t.microbatch};
    arrival.at(consumer) = std::max(arrival.at(consumer), at);
    arrived.at(consumer) += 1;
    if (fed)
      fed->push_back(toGpu);
  }

  // Deliver the output of `done` (ended at `when`) to the actions that wait for it.
  void deliver(const Action &done, double when) {
    const size_t s = static_cast<size_t>(done.stage);
    const int fromGpu = graph.gpu[s];
    auto send = [&](int toStage, double bytes, bool gradient, size_t k) {
      const int toGpu = graph.gpu[static_cast<size_t>(toStage)];
      const Transfer transfer{done.stage, toStage, done.microbatch, gradient};
      const LinkSpec &link = problem.platform.linkBetween(fromGpu, toGpu);
      const double duration = bytes > 0 ? occupancy(fromGpu, toGpu, bytes) : 0.0;
      if (duration <= 0) {
        const double at = toGpu != fromGpu && bytes > 0 ? when + link.latencyMs : when;
        arrive(transfer, fromGpu, toGpu, bytes, when, at);
        return;
      }
      if (ordered) {
        ordered->ready[ordered->index.along(done.stage, k, gradient, done.microbatch)] = when;
        pump(fromGpu);
        return;
      }
      PortCalendar &out = sendPorts[static_cast<size_t>(fromGpu)];
      PortCalendar &in = receivePorts[static_cast<size_t>(toGpu)];
      double start = when;
      while (true) {
        const double a = out.nextFree(start, duration);
        const double b = in.nextFree(a, duration);
        if (b <= a + 1e-12) {
          start = a;
          break;
        }
        start = b;
      }
      out.reserve(start, start + duration);
      in.reserve(start, start + duration);
      arrive(transfer, fromGpu, toGpu, bytes, start, start + duration + link.latencyMs);
    };
    if (done.kind == ActionKind::Forward) {
      const auto &out = graph.successors[s];
      for (size_t k = 0; k < out.size(); ++k)
        send(out[k].stage, out[k].bytes, false, k);
    } else if (done.kind == ActionKind::Backward || done.kind == ActionKind::BackwardInput) {
      const auto &in = graph.predecessors[s];
      for (size_t k = 0; k < in.size(); ++k)
        send(in[k].stage, in[k].bytes, true, k);
    }
  }

  /// When `a` could start if its GPU were free, or -1 when an input is not produced yet.
  double readyTime(const Action &a) {
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
  }

  void commit(int gpu, const Action &a, double start) {
    if (end.at(a) >= 0)
      throw Error("schedule runs " + toString(a) + " twice");
    const double duration = durationOf(graph, a);
    const double finish = start + duration;
    end.at(a) = finish;
    gpuFree[static_cast<size_t>(gpu)] = finish;
    result.gpuBusyMs[static_cast<size_t>(gpu)] += duration;
    if (record)
      result.timeline.push_back({a, gpu, start, finish});
    deliver(a, finish);
  }

  std::string blocked(const std::vector<std::vector<Action>> &pending) const {
    std::ostringstream out;
    out << "deadlock:";
    for (size_t g = 0; g < pending.size(); ++g)
      if (!pending[g].empty())
        out << " GPU " << g << " waits at " << toString(pending[g].front()) << ";";
    if (ordered)
      for (size_t g = 0; g < ordered->sendQueue.size(); ++g)
        if (ordered->sendNext[g] < ordered->sendQueue[g].size()) {
          const Transfer t = ordered->index.at(ordered->sendQueue[g][ordered->sendNext[g]]);
          out << " the send port of GPU " << g << " waits at "
              << transferAction(true, t.gradient, t.microbatch, t.fromStage, t.toStage) << ";";
        }
    return out.str();
  }
};

} // namespace

Schedule greedySchedule(const Problem &problem, const Allocation &allocation, ScheduleKind kind,
                        int microbatches, const std::vector<int> &caps) {
  return greedySchedule(problem, allocation, buildStageGraph(problem, allocation), kind,
                        microbatches, caps);
}

Schedule greedySchedule(const Problem &problem, const Allocation &, const StageGraph &graph,
                        ScheduleKind kind, int microbatches, const std::vector<int> &caps) {
  const bool split = kind == ScheduleKind::ZeroBubble;
  SimulationResult scratch;
  Engine engine(problem, graph, microbatches, split, scratch);
  engine.record = false; // only the order is wanted
  Schedule schedule;
  schedule.kind = kind;
  schedule.microbatches = microbatches;
  schedule.splitBackward = split;
  schedule.actions.assign(static_cast<size_t>(problem.platform.gpus), {});
  const int stages = graph.numStages;
  std::vector<int> nextForward(static_cast<size_t>(stages), 0), nextBackward(static_cast<size_t>(stages), 0),
      nextWeight(static_cast<size_t>(stages), 0), alive(static_cast<size_t>(stages), 0);
  const ActionKind backwardKind = split ? ActionKind::BackwardInput : ActionKind::Backward;
  size_t remaining = static_cast<size_t>(stages) * static_cast<size_t>(microbatches) * (split ? 3 : 2);
  // Each stage's next action and its earliest start. They change only when the
  // stage's GPU runs an action or a transfer feeds an action of that GPU, so only
  // the stages of those GPUs are priced again after each step.
  std::vector<std::vector<int>> stagesOnGpu(static_cast<size_t>(problem.platform.gpus));
  for (int s = 0; s < stages; ++s)
    stagesOnGpu[static_cast<size_t>(graph.gpu[static_cast<size_t>(s)])].push_back(s);
  std::vector<double> startOf(static_cast<size_t>(stages), kInfinity);
  std::vector<Action> choiceOf(static_cast<size_t>(stages));
  auto price = [&](int s) {
    const size_t i = static_cast<size_t>(s);
    const double free = engine.gpuFree[static_cast<size_t>(graph.gpu[i])];
    // Backward first, then a forward if the in-flight cap allows, else deferred W.
    double start = kInfinity;
    Action choice;
    if (nextBackward[i] < microbatches) {
      Action b{backwardKind, s, nextBackward[i]};
      double ready = engine.readyTime(b);
      if (ready >= 0 && std::max(ready, free) < start) {
        start = std::max(ready, free);
        choice = b;
      }
    }
    if (nextForward[i] < microbatches && alive[i] < caps[i]) {
      Action f{ActionKind::Forward, s, nextForward[i]};
      double ready = engine.readyTime(f);
      if (ready >= 0 && std::max(ready, free) < start - 1e-12) {
        start = std::max(ready, free);
        choice = f;
      }
    }
    if (split && nextWeight[i] < nextBackward[i] && (start > free + 1e-12 || start == kInfinity)) {
      start = free;
      choice = Action{ActionKind::BackwardWeight, s, nextWeight[i]};
    }
    startOf[i] = start;
    choiceOf[i] = choice;
  };
  for (int s = 0; s < stages; ++s)
    price(s);
  std::vector<int> fed;
  engine.fed = &fed;
  while (remaining > 0) {
    // The earliest start, the lowest stage among equals.
    int bestStage = -1;
    double bestStart = kInfinity;
    for (int s = 0; s < stages; ++s)
      if (startOf[static_cast<size_t>(s)] < bestStart) {
        bestStart = startOf[static_cast<size_t>(s)];
        bestStage = s;
      }
    const Action bestAction = bestStage >= 0 ? choiceOf[static_cast<size_t>(bestStage)] : Action{};
    if (bestStage < 0)
      throw Error("greedy " + toString(kind) + " schedule is stuck (in-flight caps too small)");
    const size_t i = static_cast<size_t>(bestStage);
    fed.clear();
    engine.commit(graph.gpu[i], bestAction, bestStart);
    schedule.actions[static_cast<size_t>(graph.gpu[i])].push_back(bestAction);
    switch (bestAction.kind) {
    case ActionKind::Forward:
      ++nextForward[i];
      ++alive[i];
      break;
    case ActionKind::Backward:
      ++nextBackward[i];
      --alive[i];
      break;
    case ActionKind::BackwardInput:
      ++nextBackward[i];
      break;
    case ActionKind::BackwardWeight:
      ++nextWeight[i];
      --alive[i];
      break;
    }
    fed.push_back(graph.gpu[i]);
    std::sort(fed.begin(), fed.end());
    fed.erase(std::unique(fed.begin(), fed.end()), fed.end());
    for (int g : fed)
      for (int s : stagesOnGpu[static_cast<size_t>(g)])
        price(s);
    --remaining;
  }
  return schedule;
}

namespace {
/// Peak per GPU of bytesPerStage[s] held per micro-batch from the start of stage
/// s's F to the end of its B (or W, `splitBackward`) along `timeline`.
std::vector<double> heldPeaks(const std::vector<TimedAction> &timeline,
                              const std::vector<int> &gpuOfStage, bool splitBackward,
                              const std::vector<double> &bytesPerStage, int gpus) {
  const ActionKind release = splitBackward ? ActionKind::BackwardWeight : ActionKind::Backward;
  std::vector<std::tuple<double, int, int>> events; // time, frees first, stage (+1 / -1)
  for (const TimedAction &t : timeline) {
    if (t.action.kind == ActionKind::Forward)
      events.emplace_back(t.startMs, 1, t.action.stage + 1);
    if (t.action.kind == release)
      events.emplace_back(t.endMs, 0, -(t.action.stage + 1));
  }
  std::sort(events.begin(), events.end());
  std::vector<double> held(static_cast<size_t>(gpus), 0), peak(static_cast<size_t>(gpus), 0);
  for (const auto &[time, order, signedStage] : events) {
    const size_t s = static_cast<size_t>(std::abs(signedStage) - 1);
    const size_t g = static_cast<size_t>(gpuOfStage[s]);
    held[g] += signedStage > 0 ? bytesPerStage[s] : -bytesPerStage[s];
    peak[g] = std::max(peak[g], held[g]);
  }
  return peak;
}

/// Peak per GPU of the bytes of messages the runtime holds along `timeline`
/// (docs/partitioner.md, "Memory of a GPU"): a sent tensor from the end of its
/// producer until its consumer takes it, and then until the sending GPU's
/// action in progress (if any) ends; a received tensor as its consumer starts.
std::vector<double> messagePeaks(const StageGraph &graph,
                                 const std::vector<TimedAction> &timeline, bool splitBackward,
                                 int gpus, int microbatches) {
  ActionTable start(graph.numStages, microbatches, -1);
  std::vector<std::vector<const TimedAction *>> onGpu(static_cast<size_t>(gpus));
  for (const TimedAction &t : timeline) {
    start.at(t.action) = t.startMs;
    onGpu[static_cast<size_t>(t.gpu)].push_back(&t);
  }
  // A GPU's actions are committed in the order they run: sorted already.
  auto byStart = [](const TimedAction *a, const TimedAction *b) { return a->startMs < b->startMs; };
  for (auto &list : onGpu)
    if (!std::is_sorted(list.begin(), list.end(), byStart))
      std::sort(list.begin(), list.end(), byStart);
  // A rank frees a taken buffer at once when it waits, else when its action ends.
  auto released = [&](int gpu, double taken) {
    const auto &list = onGpu[static_cast<size_t>(gpu)];
    auto after = std::upper_bound(list.begin(), list.end(), taken,
                                  [](double t, const TimedAction *a) { return t < a->startMs; });
    if (after != list.begin() && taken < (*std::prev(after))->endMs)
      return (*std::prev(after))->endMs;
    return taken;
  };
  struct Event {
    double time;
    int order; // at equal times: allocations, then sent buffers freed, then received ones
    int gpu;
    double bytes;
  };
  std::vector<Event> events;
  events.reserve(4 * timeline.size());
  const ActionKind gradientTaker = splitBackward ? ActionKind::BackwardInput : ActionKind::Backward;
  for (const TimedAction &t : timeline) {
    const size_t s = static_cast<size_t>(t.action.stage);
    const bool forward = t.action.kind == ActionKind::Forward;
    if (!forward && t.action.kind != gradientTaker)
      continue;
    for (const auto &edge : forward ? graph.successors[s] : graph.predecessors[s]) {
      const Action taker{forward ? ActionKind::Forward : gradientTaker, edge.stage,
                         t.action.microbatch};
      const double taken = start.at(taker);
      if (taken < 0)
        continue;
      const int to = graph.gpu[static_cast<size_t>(edge.stage)];
      events.push_back({t.endMs, 0, t.gpu, edge.bytes});
      events.push_back({released(t.gpu, taken), 1, t.gpu, -edge.bytes});
      events.push_back({taken, 0, to, edge.bytes});
      events.push_back({taken, 2, to, -edge.bytes});
    }
  }
  std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) {
    return std::tie(a.time, a.order) < std::tie(b.time, b.order);
  });
  std::vector<double> held(static_cast<size_t>(gpus), 0), peak(held);
  for (const Event &e : events) {
    const size_t g = static_cast<size_t>(e.gpu);
    held[g] += e.bytes;
    peak[g] = std::max(peak[g], held[g]);
  }
  return peak;
}
} // namespace

void recordMessagePeaks(const StageGraph &graph, bool splitBackward, SimulationResult &result) {
  int microbatches = 0;
  for (const TimedAction &t : result.timeline)
    microbatches = std::max(microbatches, t.action.microbatch + 1);
  const std::vector<double> held = messagePeaks(graph, result.timeline, splitBackward,
                                                static_cast<int>(result.memory.size()), microbatches);
  for (size_t g = 0; g < held.size(); ++g)
    result.memory[g].messageBytes = held[g];
}

std::vector<double> peakHeldBytes(const PlanResult &plan, const std::vector<double> &bytesPerStage) {
  return heldPeaks(plan.simulation.timeline, plan.allocation.gpuOfStage,
                   plan.schedule.splitBackward, bytesPerStage,
                   static_cast<int>(plan.simulation.memory.size()));
}

SimulationResult simulate(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule) {
  return simulate(problem, allocation, schedule, buildStageGraph(problem, allocation));
}

SimulationResult simulate(const Problem &problem, const Allocation &allocation,
                          const Schedule &schedule, const StageGraph &graph, bool withMemory) {
  SimulationResult result;
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
  Engine engine(problem, graph, m, schedule.splitBackward, result);
  if (schedule.hasPortOrders())
    engine.usePortOrders(schedule);
  ActionTable &end = engine.end;
  std::vector<size_t> next(static_cast<size_t>(gpus), 0);
  size_t remaining = 0;
  for (const auto &list : schedule.actions)
    remaining += list.size();
  result.timeline.reserve(remaining);
  result.transfers.reserve(remaining);
  // The earliest start of each GPU's next action (infinity: none, or an input is
  // missing). It changes only when that GPU runs an action or a transfer feeds one
  // of its actions, so only those GPUs are priced again after each step.
  std::vector<double> earliest(static_cast<size_t>(gpus), kInfinity);
  auto price = [&](int g) {
    const auto &list = schedule.actions[static_cast<size_t>(g)];
    double &start = earliest[static_cast<size_t>(g)];
    start = kInfinity;
    if (next[static_cast<size_t>(g)] >= list.size())
      return;
    const double ready = engine.readyTime(list[next[static_cast<size_t>(g)]]);
    if (ready >= 0)
      start = std::max(ready, engine.gpuFree[static_cast<size_t>(g)]);
  };
  for (int g = 0; g < gpus; ++g)
    price(g);
  std::vector<int> fed;
  engine.fed = &fed;
  while (remaining > 0) {
    // The earliest start, the lowest GPU among equals.
    int bestGpu = -1;
    double bestStart = kInfinity;
    for (int g = 0; g < gpus; ++g)
      if (earliest[static_cast<size_t>(g)] < bestStart) {
        bestStart = earliest[static_cast<size_t>(g)];
        bestGpu = g;
      }
    if (bestGpu < 0) {
      std::vector<std::vector<Action>> pending(static_cast<size_t>(gpus));
      for (int g = 0; g < gpus; ++g) {
        const auto &list = schedule.actions[static_cast<size_t>(g)];
        if (next[static_cast<size_t>(g)] < list.size())
          pending[static_cast<size_t>(g)].push_back(list[next[static_cast<size_t>(g)]]);
      }
      result.error = engine.blocked(pending);
      return result;
    }
    const Action a = schedule.actions[static_cast<size_t>(bestGpu)][next[static_cast<size_t>(bestGpu)]++];
    fed.clear();
    engine.commit(bestGpu, a, bestStart);
    price(bestGpu);
    for (int g : fed)
      price(g);
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
  double busy = 0;
  int used = 0;
  for (int g = 0; g < gpus; ++g)
    if (!schedule.actions[static_cast<size_t>(g)].empty()) {
      ++used;
      busy += result.gpuBusyMs[static_cast<size_t>(g)];
    }
  result.bubbleFraction = makespan > 0 && used > 0 ? 1 - busy / (used * makespan) : 0;
  result.completed = true;
  if (!withMemory)
    return result;

  // Memory: activations live from the start of F to the end of B (or W); a
  // recomputing stage keeps its inputs there, and its recomputed activations from
  // the start of B (or Bi) to the end of B (or W).
  struct Event {
    double time;
    int order; // frees (0) before allocations (1) at equal times
    int stage;
    int delta;       // micro-batches in flight
    double bytes;
    double keptBytes; // the part kept from F to B (or W): GpuMemory::keptPeakBytes
  };
  std::vector<Event> events;
  events.reserve(result.timeline.size() * 3 / 2);
  const ActionKind release =
      schedule.splitBackward ? ActionKind::BackwardWeight : ActionKind::Backward;
  const ActionKind recomputeAt =
      schedule.splitBackward ? ActionKind::BackwardInput : ActionKind::Backward;
  for (const auto &t : result.timeline) {
    const int s = t.action.stage;
    if (t.action.kind == ActionKind::Forward)
      events.push_back({t.startMs, 1, s, +1, graph.keptBytes(s), graph.keptBytes(s)});
    if (t.action.kind == recomputeAt && graph.recomputedBytes(s) > 0)
      events.push_back({t.startMs, 1, s, 0, graph.recomputedBytes(s), 0.0});
    if (t.action.kind == release)
      events.push_back({t.endMs, 0, s, -1, -(graph.keptBytes(s) + graph.recomputedBytes(s)),
                        -graph.keptBytes(s)});
  }
  std::sort(events.begin(), events.end(), [](const Event &a, const Event &b) {
    return std::tie(a.time, a.order) < std::tie(b.time, b.order);
  });
  result.stageInFlight.assign(static_cast<size_t>(stages), 0);
  std::vector<int> alive(static_cast<size_t>(stages), 0);
  std::vector<double> gpuActivation(static_cast<size_t>(gpus), 0), gpuKept(gpuActivation);
  result.memory.assign(static_cast<size_t>(gpus), GpuMemory{});
  // At equal times and order the events all add or all free: their peaks do not
  // depend on the order among them (heldPeaks, for peakHeldBytes, finds the same).
  for (const Event &e : events) {
    const size_t s = static_cast<size_t>(e.stage);
    alive[s] += e.delta;
    result.stageInFlight[s] = std::max(result.stageInFlight[s], alive[s]);
    const size_t g = static_cast<size_t>(graph.gpu[s]);
    GpuMemory &memory = result.memory[g];
    gpuActivation[g] += e.bytes;
    memory.activationPeakBytes = std::max(memory.activationPeakBytes, gpuActivation[g]);
    gpuKept[g] += e.keptBytes;
    memory.keptPeakBytes = std::max(memory.keptPeakBytes, gpuKept[g]);
  }
  // Charged, the messages are part of every simulation's peak; else they are
  // only reported, and recordMessagePeaks adds them to the plans that are.
  if (problem.training.communicationBuffers && problem.training.messagesFromTimeline)
    recordMessagePeaks(graph, schedule.splitBackward, result);
  for (int s = 0; s < stages; ++s) {
    const size_t g = static_cast<size_t>(graph.gpu[static_cast<size_t>(s)]);
    const double params = graph.parameterBytes[static_cast<size_t>(s)];
    const double read = graph.readParameterBytes[static_cast<size_t>(s)];
    GpuMemory &memory = result.memory[g];
    memory.stateBytes += problem.training.stateMultiplier * params +
                         readerStateMultiplier(problem.training) * read;
    memory.extraWeightBytes +=
        (weightVersions(problem.training, result.stageInFlight[static_cast<size_t>(s)]) - 1) *
        (params + read);
    if (problem.training.communicationBuffers)
      memory.bufferBytes += kBuffersPerCutTensor * (graph.inBytes[static_cast<size_t>(s)] +
                                                    graph.outBytes[static_cast<size_t>(s)]);
    memory.workspaceBytes =
        std::max(memory.workspaceBytes, graph.workspaceBytes[static_cast<size_t>(s)]);
  }
  for (int g = 0; g < gpus; ++g) {
    GpuMemory &memory = result.memory[static_cast<size_t>(g)];
    const double buffers = problem.training.messagesFromTimeline
                               ? std::max(memory.bufferBytes, memory.messageBytes)
                               : memory.bufferBytes;
    memory.peakBytes = memory.stateBytes + memory.extraWeightBytes + buffers +
                       memory.activationPeakBytes + memory.workspaceBytes;
  }
  return result;
}


} // namespace partitioner
