// k-periodic orders of one stage per GPU: generation, evaluation, search.
#include "partitioner/KPeriodic.h"
#include "partitioner/Error.h"
#include "partitioner/Simulator.h"

#include <algorithm>
#include <functional>

namespace partitioner {

std::string toString(const StageOrder &order) {
  return std::to_string(order.warmup) + ":" + order.word;
}

Expected<StageOrder> parseStageOrder(const std::string &text) {
  auto fail = [&](const std::string &why) {
    return Expected<StageOrder>::failure("stage order '" + printableName(text) + "': " + why);
  };
  const size_t colon = text.find(':');
  if (colon == std::string::npos || colon == 0 || colon > 4)
    return fail("expected WARMUP:WORD, e.g. 3:BFBF");
  StageOrder order;
  order.warmup = 0;
  for (size_t i = 0; i < colon; ++i) {
    if (text[i] < '0' || text[i] > '9')
      return fail("the warm-up is not a number");
    order.warmup = order.warmup * 10 + (text[i] - '0');
  }
  if (order.warmup < 1 || order.warmup > kMaxGpus)
    return fail("the warm-up must be in 1.." + std::to_string(kMaxGpus));
  order.word = text.substr(colon + 1);
  const size_t backwards = static_cast<size_t>(std::count(order.word.begin(), order.word.end(), 'B'));
  const size_t forwards = static_cast<size_t>(std::count(order.word.begin(), order.word.end(), 'F'));
  if (order.word.empty() || order.word.front() != 'B' || backwards != forwards ||
      backwards + forwards != order.word.size() || backwards > 4)
    return fail("the word must hold k 'B's and k 'F's (1 <= k <= 4) and start with 'B'");
  if (peakInFlight(order) < 0)
    return fail("a backward comes when no micro-batch is alive");
  return order;
}

int peakInFlight(const StageOrder &order) {
  if (order.warmup < 1)
    return -1;
  int alive = order.warmup, peak = alive;
  for (char c : order.word) {
    if (c == 'F') {
      peak = std::max(peak, ++alive);
    } else if (alive-- == 0) {
      return -1;
    }
  }
  return peak;
}

std::vector<StageOrder> stageWords(int k, int maxPeak) {
  std::vector<StageOrder> orders;
  if (k < 1 || maxPeak < 1)
    return orders;
  // Every word of k 'B's and k 'F's that starts with 'B': the positions of the
  // other k - 1 'B's among the last 2k - 1 letters.
  const int length = 2 * k;
  for (unsigned mask = 0; mask < (1u << (length - 1)); ++mask) {
    if (__builtin_popcount(mask) != k - 1)
      continue;
    std::string word = "B";
    for (int i = 0; i < length - 1; ++i)
      word += (mask >> i & 1u) ? 'B' : 'F';
    for (int warmup = 1; warmup <= maxPeak; ++warmup) {
      const int peak = peakInFlight({warmup, word});
      if (peak >= 1 && peak <= maxPeak)
        orders.push_back({warmup, word});
    }
  }
  return orders;
}

Schedule wordSchedule(const Problem &problem, const Allocation &allocation,
                      const std::vector<StageOrder> &orders, int microbatches) {
  if (orders.size() != allocation.gpuOfStage.size())
    throw Error("k-periodic orders: " + std::to_string(orders.size()) + " orders for " +
                std::to_string(allocation.gpuOfStage.size()) + " stages (one per stage)");
  std::vector<int> stageOnGpu(static_cast<size_t>(problem.platform.gpus), -1);
  for (int s = 0; s < allocation.numStages(); ++s) {
    const int gpu = allocation.gpuOfStage[static_cast<size_t>(s)];
    if (gpu < 0 || gpu >= problem.platform.gpus)
      throw Error("k-periodic orders: stage " + std::to_string(s) + " is on GPU " +
                  std::to_string(gpu) + ", outside 0.." + std::to_string(problem.platform.gpus - 1));
    int &first = stageOnGpu[static_cast<size_t>(gpu)];
    if (first >= 0)
      throw Error("k-periodic orders need one stage per GPU: GPU " + std::to_string(gpu) +
                  " holds stages " + std::to_string(first) + " and " + std::to_string(s));
    first = s;
  }
  Schedule schedule;
  schedule.kind = ScheduleKind::OneFOneB;
  schedule.microbatches = microbatches;
  schedule.actions.resize(static_cast<size_t>(problem.platform.gpus));
  for (int s = 0; s < allocation.numStages(); ++s) {
    const StageOrder &order = orders[static_cast<size_t>(s)];
    auto &list = schedule.actions[static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(s)])];
    int forwards = 0, backwards = 0;
    auto forward = [&] {
      if (forwards < microbatches)
        list.push_back({ActionKind::Forward, s, forwards++});
    };
    for (int i = 0; i < order.warmup; ++i)
      forward();
    while (forwards < microbatches) {
      for (char c : order.word) {
        if (c == 'F')
          forward();
        else if (backwards < forwards)
          list.push_back({ActionKind::Backward, s, backwards++});
      }
    }
    while (backwards < microbatches)
      list.push_back({ActionKind::Backward, s, backwards++});
  }
  return schedule;
}

namespace {
constexpr int kMeasuredMicrobatches = 12; // a multiple of every k <= 4

/// The iteration time of `orders` for m micro-batches, or infinity when it does
/// not complete or a GPU overflows.
double fittingIteration(const Problem &problem, const Allocation &allocation,
                        const StageGraph &graph, const std::vector<StageOrder> &orders, int m) {
  const SimulationResult result =
      simulate(problem, allocation, wordSchedule(problem, allocation, orders, m), graph);
  if (!result.completed)
    return kInfinity;
  for (const GpuMemory &memory : result.memory)
    if (memory.peakBytes > problem.platform.memoryBytesPerGpu * (1 + 1e-12))
      return kInfinity;
  return result.iterationMs;
}
} // namespace

double wordPeriod(const Problem &problem, const Allocation &allocation, const StageGraph &graph,
                  const std::vector<StageOrder> &orders) {
  const int m = kMeasuredMicrobatches;
  const double once = fittingIteration(problem, allocation, graph, orders, m);
  if (once == kInfinity)
    return kInfinity;
  const double twice = fittingIteration(problem, allocation, graph, orders, 2 * m);
  return twice == kInfinity ? kInfinity : (twice - once) / m;
}

std::vector<int> memoryCaps(const Problem &problem, const Allocation &allocation,
                            const StageGraph &graph) {
  const int stages = allocation.numStages();
  // The textbook orders (warm-up S - s) give every GPU's fixed part.
  std::vector<StageOrder> textbook;
  for (int s = 0; s < stages; ++s)
    textbook.push_back({stages - s, "BF"});
  const SimulationResult result = simulate(
      problem, allocation, wordSchedule(problem, allocation, textbook, kMeasuredMicrobatches),
      graph);
  std::vector<int> caps(static_cast<size_t>(stages), 0);
  for (int s = 0; s < stages; ++s) {
    const GpuMemory &memory =
        result.memory[static_cast<size_t>(allocation.gpuOfStage[static_cast<size_t>(s)])];
    const double fixed = memory.stateBytes + memory.extraWeightBytes + memory.bufferBytes;
    const double saved = graph.savedBytes[static_cast<size_t>(s)];
    for (int p = stages - s; p >= 1; --p)
      if (fixed + p * saved <= problem.platform.memoryBytesPerGpu * (1 + 1e-12)) {
        caps[static_cast<size_t>(s)] = p;
        break;
      }
  }
  return caps;
}

WordScheduleResult bestWordSchedule(const Problem &problem, const Allocation &allocation, int k,
                                    long long exhaustiveLimit, long long maxEvaluations) {
  const StageGraph graph = buildStageGraph(problem, allocation);
  const std::vector<int> caps = memoryCaps(problem, allocation, graph);
  const int stages = allocation.numStages();
  WordScheduleResult best;
  std::vector<std::vector<StageOrder>> options;
  long long combinations = 1;
  for (int s = 0; s < stages; ++s) {
    options.push_back(stageWords(k, caps[static_cast<size_t>(s)]));
    if (options.back().empty())
      return best; // a stage cannot keep even one micro-batch
    combinations = std::min<long long>(combinations * static_cast<long long>(options.back().size()),
                                       exhaustiveLimit + 1);
  }
  auto consider = [&](const std::vector<StageOrder> &orders) {
    if (best.evaluated >= maxEvaluations) {
      best.stoppedAtLimit = true;
      return false;
    }
    ++best.evaluated;
    const double period = wordPeriod(problem, allocation, graph, orders);
    if (period < best.periodMs - 1e-12) {
      best.periodMs = period;
      best.orders = orders;
      return true;
    }
    return false;
  };
  if (combinations <= exhaustiveLimit) {
    std::vector<size_t> index(static_cast<size_t>(stages), 0);
    std::vector<StageOrder> orders(static_cast<size_t>(stages));
    while (true) {
      for (int s = 0; s < stages; ++s)
        orders[static_cast<size_t>(s)] = options[static_cast<size_t>(s)][index[static_cast<size_t>(s)]];
      consider(orders);
      if (best.stoppedAtLimit)
        break;
      int s = 0;
      while (s < stages && ++index[static_cast<size_t>(s)] == options[static_cast<size_t>(s)].size())
        index[static_cast<size_t>(s++)] = 0;
      if (s == stages)
        break;
    }
    return best;
  }
  // Descent from the best 1-periodic orders, each word repeated k times.
  std::vector<StageOrder> start;
  if (k == 1) {
    // Warm-ups that do not grow downstream (a stage's first backward waits for
    // the forwards of every stage after it).
    int warmup = caps.front();
    for (int s = 0; s < stages; ++s) {
      warmup = std::min(warmup, caps[static_cast<size_t>(s)]);
      start.push_back({warmup, "BF"});
    }
  } else {
    const WordScheduleResult one =
        bestWordSchedule(problem, allocation, 1, exhaustiveLimit, maxEvaluations / 2);
    best.evaluated += one.evaluated;
    if (one.orders.empty())
      return best;
    for (StageOrder order : one.orders) {
      std::string word;
      for (int i = 0; i < k; ++i)
        word += order.word;
      start.push_back({order.warmup, word});
    }
  }
  consider(start);
  if (best.orders.empty())
    best.orders = start;
  for (bool improved = true; improved && !best.stoppedAtLimit;) {
    improved = false;
    for (int s = 0; s < stages && !best.stoppedAtLimit; ++s) {
      std::vector<StageOrder> orders = best.orders;
      for (const StageOrder &option : options[static_cast<size_t>(s)]) {
        orders[static_cast<size_t>(s)] = option;
        improved |= consider(orders);
      }
    }
  }
  if (best.periodMs == kInfinity)
    best.orders.clear();
  return best;
}

} // namespace partitioner
