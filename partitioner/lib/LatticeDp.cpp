// Dynamic programs over cut lattices (PipeDream-style min-max with a memory filter,
// and MadPipe-style memory-aware periodic DP). See LatticeDp.h for the guarantees.
#include "partitioner/LatticeDp.h"

#include "PeriodicSlot.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <cstdio>
#include <sstream>

namespace partitioner {

namespace {

constexpr double kRelativeTolerance = 1e-9;

/// Calls visit(to) for every cut `to` strictly above `from` whose extra work is at
/// most maxWork. Chains scan forward; ideal lattices walk the up-edges (work only
/// grows along them, so pruning a cut prunes all its supersets reached through it).
class LargerCuts {
public:
  /// `stateMultiplier` and `maxBytes` prune stages whose saved bytes plus parameter
  /// state exceed the memory (one copy in flight is the least any stage keeps; the
  /// prefix difference leaves out the copies of shared saved values, a lower bound).
  LargerCuts(const CutLattice &lattice, double stateMultiplier = 0, double maxBytes = kInfinity)
      : lattice_(lattice), stamp_(lattice.isChain ? 0 : lattice.numCuts(), 0),
        multiplier_(stateMultiplier), maxBytes_(maxBytes) {}

  bool tooBig(int from, int to, double maxWork) const {
    const CutLattice &l = lattice_;
    const size_t a = static_cast<size_t>(from), b = static_cast<size_t>(to);
    if (l.work[b] - l.work[a] > maxWork)
      return true;
    return maxBytes_ < kInfinity &&
           (l.saved[b] - l.saved[a]) + multiplier_ * (l.params[b] - l.params[a]) > maxBytes_;
  }

  template <class Visit> void forEach(int from, double maxWork, Visit &&visit) {
    const CutLattice &l = lattice_;
    if (l.isChain) {
      for (int to = from + 1; to <= l.fullCut(); ++to) {
        if (tooBig(from, to, maxWork))
          break;
        visit(to);
      }
      return;
    }
    ++stampValue_;
    stack_.clear();
    stack_.push_back(from);
    stamp_[static_cast<size_t>(from)] = stampValue_;
    while (!stack_.empty()) {
      int current = stack_.back();
      stack_.pop_back();
      for (int next : l.up[static_cast<size_t>(current)]) {
        if (stamp_[static_cast<size_t>(next)] == stampValue_)
          continue;
        stamp_[static_cast<size_t>(next)] = stampValue_;
        if (tooBig(from, next, maxWork))
          continue;
        visit(next);
        stack_.push_back(next);
      }
    }
  }

private:
  const CutLattice &lattice_;
  std::vector<unsigned> stamp_;
  double multiplier_;
  double maxBytes_;
  unsigned stampValue_ = 0;
  std::vector<int> stack_;
};

int stageBudget(const StageModel &model, int maxStages) {
  const int layers = static_cast<int>(model.problem().layers.size());
  return std::max(1, std::min({maxStages, layers, model.problem().platform.gpus}));
}

double maxSpeed(const Problem &problem) {
  double best = 1;
  if (!problem.platform.speed.empty())
    best = *std::max_element(problem.platform.speed.begin(), problem.platform.speed.end());
  return best;
}

/// Generic "from the end" min-max DP: value(A, k) = min over B of
/// max(value(B, k-1), cost(A, B, k, gpu)), gpu = P - k.
/// `costPerWork` > 0 promises cost(A, B, ...) >= (work(B) - work(A)) x costPerWork
/// (a stage is never faster than its work on the fastest GPU). Work only grows with
/// B, so once that bound reaches value(A, k) no larger B can improve it: the stage
/// is not priced there (after the crossing of cost and value(B, k-1), about half of
/// a row's stages on long chains).
template <class Cost>
std::optional<CutPartition> minMaxCore(const StageModel &model, int stages, bool exact,
                                       double maxWork, bool tieBreak, Cost cost,
                                       double maxStageBytes = kInfinity,
                                       double keepOnlyBelow = kInfinity,
                                       double costPerWork = 0) {
  const CutLattice &lattice = model.lattice();
  const Problem &problem = model.problem();
  const size_t cuts = lattice.numCuts();
  const int gpus = problem.platform.gpus;
  const size_t width = static_cast<size_t>(stages) + 1;
  const int full = lattice.fullCut();
  std::vector<double> value(cuts * width, kInfinity);
  std::vector<int> choice(cuts * width, -1);
  value[static_cast<size_t>(full) * width] = 0;
  LargerCuts larger(lattice, problem.training.stateMultiplier, maxStageBytes);
  // The bound, a hair low so that rounding never makes it exceed the cost.
  const double boundPerWork = costPerWork * (1 - 1e-12);
  // Every stage has at most `stageWork` of work, so k stages from cut A onwards
  // need work(A..end) <= k x stageWork, and the stages before A, at most
  // `stages` - k of them, need work(..A) <= (stages - k) x stageWork: rows outside
  // [first, last] are never finite, or never reached from the empty cut (a reached
  // row only reads reached rows). A hair of slack keeps rounding from excluding one.
  auto rowsOf = [&](int from, double stageWork) {
    const double slack = stageWork * (1 + 1e-9);
    const double before = lattice.work[static_cast<size_t>(from)] -
                          lattice.work[static_cast<size_t>(lattice.emptyCut())];
    const double after = lattice.work[static_cast<size_t>(full)] -
                         lattice.work[static_cast<size_t>(from)];
    auto stagesFor = [&](double work) { // the fewest stages of at most `slack` each
      if (slack == kInfinity || work <= 0)
        return work > 0 ? 1 : 0;
      return static_cast<int>(std::min<double>(std::ceil(work / slack), stages + 1));
    };
    const int first = std::max(1, stagesFor(after));
    const int last = stages - (from == lattice.emptyCut() ? 0 : std::max(1, stagesFor(before)));
    return std::pair<int, int>(first, last);
  };
  for (int from = full - 1; from >= 0; --from) {
    double *row = &value[static_cast<size_t>(from) * width];
    int *rowChoice = &choice[static_cast<size_t>(from) * width];
    const double fromWork = lattice.work[static_cast<size_t>(from)];
    const auto [first, last] = rowsOf(from, maxWork);
    if (first > last)
      continue;
    larger.forEach(from, maxWork, [&](int to) {
      const double *next = &value[static_cast<size_t>(to) * width];
      const double least = (lattice.work[static_cast<size_t>(to)] - fromWork) * boundPerWork;
      for (int k = first; k <= last; ++k) {
        // max(next, cost) cannot beat row[k] when next does not, nor when the
        // least the cost can be does not.
        if (next[k - 1] == kInfinity || next[k - 1] >= row[k] || least >= row[k])
          continue;
        double c = cost(from, to, k, gpus - k);
        if (c == kInfinity)
          continue;
        double v = std::max(next[k - 1], c);
        if (v < row[k]) {
          row[k] = v;
          rowChoice[k] = to;
        }
      }
    });
  }
  int bestStages = -1;
  double best = kInfinity;
  for (int k = exact ? stages : 1; k <= stages; ++k)
    if (value[static_cast<size_t>(k)] < best) {
      best = value[static_cast<size_t>(k)];
      bestStages = k;
    }
  if (bestStages < 0)
    return std::nullopt;

  // Not below the caller's incumbent: it will not keep this partition, whichever
  // of the equal ones the second pass would pick.
  if (tieBreak && best < keepOnlyBelow * (1 - 1e-12)) {
    // Second pass: at the optimal bottleneck, fewest bytes crossing stage boundaries
    // (then fewer stages): no degenerate stages unless they are truly better.
    const double limit = best * (1 + kRelativeTolerance) + 1e-12;
    // No stage above the bottleneck: none with more work than it allows.
    const double limitWork =
        costPerWork > 0 ? std::min(maxWork, limit / boundPerWork) : maxWork;
    std::vector<double> bytes(cuts * width, kInfinity);
    std::vector<int> bytesChoice(cuts * width, -1);
    bytes[static_cast<size_t>(full) * width] = 0;
    for (int from = full - 1; from >= 0; --from) {
      double *row = &bytes[static_cast<size_t>(from) * width];
      int *rowChoice = &bytesChoice[static_cast<size_t>(from) * width];
      const auto [first, last] = rowsOf(from, limitWork);
      if (first > last)
        continue;
      larger.forEach(from, limitWork, [&](int to) {
        const double *next = &bytes[static_cast<size_t>(to) * width];
        const double crossing = to == full ? 0.0 : lattice.cutBytes[static_cast<size_t>(to)];
        for (int k = first; k <= last; ++k) {
          if (next[k - 1] == kInfinity)
            continue;
          double v = next[k - 1] + crossing;
          if (!(v < row[k] * (1 - 1e-12) - 1e-9))
            continue; // no fewer bytes: not worth pricing the stage
          if (cost(from, to, k, gpus - k) > limit)
            continue;
          row[k] = v;
          rowChoice[k] = to;
        }
      });
    }
    double fewest = kInfinity;
    int chosen = -1;
    for (int k = exact ? stages : 1; k <= stages; ++k)
      if (bytes[static_cast<size_t>(k)] < fewest * (1 - 1e-12) - 1e-9) {
        fewest = bytes[static_cast<size_t>(k)];
        chosen = k;
      }
    if (chosen > 0) {
      choice.swap(bytesChoice);
      bestStages = chosen;
    }
  }

  CutPartition partition;
  partition.cuts.push_back(0);
  int from = 0;
  double bottleneck = 0;
  for (int k = bestStages; k >= 1; --k) {
    int to = choice[static_cast<size_t>(from) * width + static_cast<size_t>(k)];
    partition.cuts.push_back(to);
    partition.gpus.push_back(gpus - k);
    bottleneck = std::max(bottleneck, cost(from, to, k, gpus - k));
    from = to;
  }
  partition.periodMs = bottleneck;
  return partition;
}

} // namespace

size_t countLatticeStages(const Problem &problem, const CutLattice &lattice, double upperBoundMs,
                          size_t budget) {
  const double maxWork =
      upperBoundMs == kInfinity ? kInfinity : upperBoundMs * (1 + 1e-9) * maxSpeed(problem);
  LargerCuts larger(lattice);
  size_t count = 0;
  for (int from = lattice.fullCut() - 1; from >= 0 && count <= budget; --from)
    larger.forEach(from, maxWork, [&](int) { ++count; });
  return std::min(count, budget + 1);
}

std::optional<CutPartition> minMaxPartition(const StageModel &model,
                                            const MinMaxOptions &options) {
  const Problem &problem = model.problem();
  const int stages = stageBudget(model, options.maxStages);
  const int m = problem.training.microbatches;
  const double limit = model.memoryLimit();
  auto inFlightAt = [&](int k) {
    return options.pipeDreamFilter ? std::max(0, k - 1)
                                   : positionalInFlight(options.inFlightRule, k, m);
  };
  const double maxWork = options.upperBoundMs == kInfinity
                             ? kInfinity
                             : options.upperBoundMs * (1 + 1e-9) * maxSpeed(problem);
  // Where no stage the DP prices can overflow, even at the most micro-batches a
  // position keeps, the checks are left out: the same partition, in about half the
  // time.
  // PipeDream's filter never binds when the whole network's stash, at the most
  // stages after one, fits: every stage holds no more than the network does.
  auto stashNeverBinds = [&] {
    const CutLattice &lattice = model.lattice();
    const StageTerms whole = model.terms(lattice.emptyCut(), lattice.fullCut());
    return (stages - 1) * (whole.savedBytes + whole.readParameterBytes + whole.parameterBytes) <=
           limit;
  };
  const bool memoryAware =
      options.memoryAware && (options.pipeDreamFilter
                                  ? !stashNeverBinds()
                                  : !model.memoryNeverBinds(inFlightAt(stages), maxWork));
  // Memory unchecked, no recomputation, one speed, one link class between the
  // GPUs: a stage costs the same at every position, read straight from the lattice
  // (a stage at k = gpus that is not the first, on GPU 0 after the link from a
  // GPU -1, prices a cell no partition reads).
  const bool uniform = !memoryAware && problem.training.recompute != RecomputePolicy::All &&
                       model.oneSpeed() && model.pipelineLinksAlike();
  // The DPs price one stage (from, to) at every position k in a row: its terms are
  // read from the lattice once.
  int pricedFrom = -1, pricedTo = -1;
  std::optional<PricedStage> priced;
  auto cost = [&](int from, int to, int k, int gpu) {
    if (uniform)
      return model.uniformPeriodMs(from, to);
    if (from != pricedFrom || to != pricedTo) {
      priced.emplace(model, from, to);
      pricedFrom = from;
      pricedTo = to;
    }
    if (memoryAware && options.pipeDreamFilter) {
      const StageTerms &stage = priced->terms();
      double stash =
          (k - 1) * (stage.savedBytes + stage.readParameterBytes + stage.parameterBytes);
      if (stash > limit)
        return kInfinity;
      return priced->choose(inFlightAt(k), gpu, false).periodMs;
    }
    return priced->choose(inFlightAt(k), gpu, memoryAware).periodMs;
  };

  // A stage keeps at least one copy of its activations (PipeDream's filter: none).
  const double maxStageBytes =
      memoryAware && !options.pipeDreamFilter ? limit : kInfinity;
  auto result = minMaxCore(model, stages, options.exactStageCount, maxWork, options.tieBreak, cost,
                           maxStageBytes, options.keepOnlyBelowMs, 1 / maxSpeed(problem));
  if (result) {
    const size_t count = result->gpus.size();
    for (size_t i = 0; i < count; ++i) {
      const int k = static_cast<int>(count - i);
      result->inFlight.push_back(inFlightAt(k));
      const bool checkMemory = options.memoryAware && !options.pipeDreamFilter;
      result->recompute.push_back(model
                                      .choose(result->cuts[i], result->cuts[i + 1],
                                              inFlightAt(k), result->gpus[i], checkMemory)
                                      .recompute);
    }
  }
  return result;
}

std::optional<CutPartition> boundedMinMaxPartition(const StageModel &model,
                                                   MinMaxOptions options) {
  if (options.upperBoundMs == kInfinity)
    options.upperBoundMs = greedyUpperBound(model, options);
  return minMaxPartition(model, options);
}

std::optional<CutPartition> minMemoryPartition(const StageModel &model, int maxStages,
                                               ScheduleKind inFlightRule) {
  const int stages = stageBudget(model, maxStages);
  const int m = model.problem().training.microbatches;
  double limit = model.memoryLimit();
  if (limit == kInfinity)
    limit = 1;
  auto cost = [&](int from, int to, int k, int) {
    return model.memoryBytes(from, to, positionalInFlight(inFlightRule, k, m)) / limit;
  };
  auto result = minMaxCore(model, stages, false, kInfinity, false, cost);
  if (result)
    for (size_t i = 0; i < result->gpus.size(); ++i)
      result->inFlight.push_back(
          positionalInFlight(inFlightRule, static_cast<int>(result->gpus.size() - i), m));
  return result;
}

namespace {
/// When the gradient of its out cut reaches a stage of a chain on `gpu`, relative to
/// the start of its forward (length f), in the pattern at period T (Schedule.cpp,
/// periodicPattern, one stage per GPU): its activation leaves at once (activations
/// are placed first, and on a chain each port carries one), the next stage's span
/// later the gradient is ready, and it takes the first slot that is free, modulo T,
/// of the next stage's own activation send (`nextSend`, relative to that stage's
/// forward start) and of the activation this stage receives. Infinity when there is
/// no such slot; f for the last stage.
double gradientArrival(const StageModel &model, int from, int to, int gpu, double f,
                       double nextSpan, PortSlot nextSend, double T) {
  const CutLattice &lattice = model.lattice();
  if (to == lattice.fullCut())
    return f;
  const double transfer = model.boundaryTransferMs(to, gpu);
  const double occupancy = model.boundaryOccupancyMs(to, gpu);
  const double nextStart = f + transfer;
  const double ready = nextStart + nextSpan;
  if (!(occupancy > 0))
    return ready + transfer;
  PortSlot busy[2];
  size_t count = 0;
  if (nextSend.length > 0)
    busy[count++] = portSlotAt(nextStart + nextSend.start, nextSend.length, T);
  if (from != lattice.emptyCut()) {
    const double received = model.boundaryOccupancyMs(from, gpu - 1);
    if (received > 0)
      busy[count++] = portSlotAt(-model.boundaryTransferMs(from, gpu - 1), received, T);
  }
  const double start = earliestFreeSlot(busy, count, ready, occupancy, T);
  return start == kInfinity ? kInfinity : start + transfer;
}

/// The slot a stage's activation send holds, relative to its forward start.
PortSlot activationSend(const StageModel &model, int to, int gpu, double f) {
  if (to == model.lattice().fullCut())
    return {};
  return {f, model.boundaryOccupancyMs(to, gpu)};
}
} // namespace

std::optional<CutPartition> periodicPartition(const StageModel &model, int maxStages,
                                              double periodMs, CopyRule rule,
                                              TransferModel transfers) {
  const CutLattice &lattice = model.lattice();
  const Problem &problem = model.problem();
  const int stages = stageBudget(model, maxStages);
  const int gpus = problem.platform.gpus;
  const int m = problem.training.microbatches;
  const size_t cuts = lattice.numCuts();
  const size_t width = static_cast<size_t>(stages) + 1;
  const int full = lattice.fullCut();
  const double T = periodMs;
  std::vector<double> span(cuts * width, kInfinity);
  std::vector<int> choice(cuts * width, -1);
  std::vector<int> copies(cuts * width, 0);
  std::vector<char> recomputes(cuts * width, 0);
  // Each state's first stage: its activation send slot, relative to its forward start.
  std::vector<PortSlot> sends(transfers == TransferModel::PortSlots ? cuts * width : 0);
  const std::vector<bool> variants = recomputeVariants(problem.training.recompute);
  span[static_cast<size_t>(full) * width] = 0;
  LargerCuts larger(lattice, problem.training.stateMultiplier, model.memoryLimit());
  const double maxWork = T * (1 + 1e-9) * maxSpeed(problem);
  // Per cut, the range of stage counts to the end with a finite span (the rest of a
  // row is skipped).
  std::vector<int> finiteFrom(cuts, stages + 1), finiteTo(cuts, -1);
  finiteFrom[static_cast<size_t>(full)] = finiteTo[static_cast<size_t>(full)] = 0;
  for (int from = full - 1; from >= 0; --from) {
    double *row = &span[static_cast<size_t>(from) * width];
    larger.forEach(from, maxWork, [&](int to) {
      const double *next = &span[static_cast<size_t>(to) * width];
      const int firstK = finiteFrom[static_cast<size_t>(to)] + 1;
      const int lastK = std::min(stages, finiteTo[static_cast<size_t>(to)] + 1);
      if (firstK > lastK)
        return;
      // Times first; the memory terms only once a position passes the time checks,
      // and then the largest count that fits once per variant.
      const StageTerms stage = model.timeTerms(from, to);
      std::optional<PricedStage> priced;
      auto fits = [&](int copies, bool recompute) {
        if (!priced)
          priced.emplace(model, from, to);
        return priced->fits(recompute, copies);
      };
      for (int k = firstK; k <= lastK; ++k) {
        if (next[k - 1] == kInfinity)
          continue;
        const int gpu = gpus - k;
        const double f = model.forwardMs(stage, gpu);
        double downstream = 0;
        if (to != full)
          downstream = next[k - 1] + 2 * model.boundaryTransferMs(to, gpu);
        // The span is at least f + downstream + b (recomputing lengthens b): no better
        // than this position's best so far, or more copies than 1F1B keeps, at once.
        const double shortest = f + downstream + model.backwardMs(stage, gpu);
        if (shortest >= row[k] ||
            (rule == CopyRule::OneFOneB && k < m && shortest > T * (k + 1e-9)))
          continue;
        // The gradient may wait for a free slot on the ports it crosses.
        const double arrival =
            transfers == TransferModel::Delays
                ? f + (next[k - 1] + 2 * model.boundaryTransferMs(to, gpu))
                : gradientArrival(
                      model, from, to, gpu, f, next[k - 1],
                      sends[static_cast<size_t>(to) * width + static_cast<size_t>(k - 1)], T);
        if (arrival == kInfinity)
          continue;
        // Auto tries the recomputing variant only when the stage does not fit as it is.
        for (bool recompute : variants) {
          const double b = model.backwardMs(stage, gpu, recompute);
          if (f + b > T * (1 + 1e-9) || model.commMs(stage, gpu) > T * (1 + 1e-9))
            break; // recomputing only lengthens the stage
          // The forward occupies [0, f) of the stage's period.
          const double start = alignBackward(arrival, 0, f, b, T);
          const double delta = start + b;
          int n = static_cast<int>(std::ceil(delta / T - 1e-9));
          n = std::max(1, std::min(n, m));
          if (rule == CopyRule::OneFOneB && n > k)
            break; // recomputing only lengthens the span
          if (!fits(n, recompute))
            continue;
          const size_t at = static_cast<size_t>(from) * width + static_cast<size_t>(k);
          if (delta < row[k]) {
            row[k] = delta;
            choice[at] = to;
            copies[at] = n;
            recomputes[at] = recompute;
            if (transfers == TransferModel::PortSlots)
              sends[at] = activationSend(model, to, gpu, f);
          }
          break;
        }
      }
    });
    for (int k = 1; k <= stages; ++k)
      if (row[k] < kInfinity) {
        finiteFrom[static_cast<size_t>(from)] = std::min(finiteFrom[static_cast<size_t>(from)], k);
        finiteTo[static_cast<size_t>(from)] = k;
      }
  }
  int bestStages = -1;
  double best = kInfinity;
  for (int k = 1; k <= stages; ++k)
    if (span[static_cast<size_t>(k)] < best) {
      best = span[static_cast<size_t>(k)];
      bestStages = k;
    }
  if (bestStages < 0)
    return std::nullopt;
  CutPartition partition;
  partition.cuts.push_back(0);
  int from = 0;
  for (int k = bestStages; k >= 1; --k) {
    const size_t at = static_cast<size_t>(from) * width + static_cast<size_t>(k);
    partition.cuts.push_back(choice[at]);
    partition.gpus.push_back(gpus - k);
    partition.inFlight.push_back(copies[at]);
    partition.recompute.push_back(recomputes[at] != 0);
    from = choice[at];
  }
  partition.periodMs = T;
  return partition;
}

std::optional<CutPartition> periodicMinPeriod(const StageModel &model, int maxStages,
                                              double lowMs,
                                              const std::function<bool()> &outOfTime,
                                              CopyRule rule, TransferModel transfers) {
  const CutLattice &lattice = model.lattice();
  const Problem &problem = model.problem();
  double minSpeed = 1;
  if (!problem.platform.speed.empty())
    minSpeed = *std::min_element(problem.platform.speed.begin(), problem.platform.speed.end());
  double commTotal = 0;
  for (size_t c = 0; c < lattice.numCuts(); ++c)
    commTotal = std::max(commTotal, lattice.cutBytes[c]);
  double high = lattice.work[static_cast<size_t>(lattice.fullCut())] / minSpeed;
  // Links can dominate: a stage's ports carry at most two boundaries.
  const LinkSpec &slow = problem.platform.interNode.bandwidthBytesPerSecond <
                                 problem.platform.intraNode.bandwidthBytesPerSecond
                             ? problem.platform.interNode
                             : problem.platform.intraNode;
  high = std::max(high, 2 * slow.transferMs(commTotal)) * (1 + 1e-6) + 1e-9;
  // Each call costs about the number of (cut, cut) pairs whose work fits in T,
  // so the search climbs from the lower bound (doubling T) rather than starting
  // at the single-stage period: on a 6,669-layer chain at 64 GPUs the first call
  // at the total work alone cost more than the rest of the search.
  double low = std::max(0.0, std::min(lowMs, high));
  double t = low > 0 ? low : high / 1024;
  std::optional<CutPartition> best;
  while (!best) {
    t = std::min(t, high);
    best = periodicPartition(model, maxStages, t, rule, transfers);
    if (best) {
      high = t;
      break;
    }
    if (t >= high)
      return std::nullopt;
    low = t;
    t *= 2;
    if (outOfTime())
      return std::nullopt;
  }
  for (int iteration = 0; iteration < 60 && high - low > 1e-7 * high && !outOfTime();
       ++iteration) {
    double mid = 0.5 * (low + high);
    auto attempt = periodicPartition(model, maxStages, mid, rule, transfers);
    if (attempt) {
      high = mid;
      best = attempt;
    } else {
      low = mid;
    }
  }
  return best;
}

bool linksAreFree(const Platform &platform) {
  for (const LinkSpec *link : {&platform.intraNode, &platform.interNode})
    if (link->bandwidthBytesPerSecond != kInfinity || link->latencyMs != 0)
      return false;
  return true;
}

namespace {
/// Whether the spans of `partition` (its stages in order, on its GPUs) fit under
/// CopyRule::OneFOneB at period T, no stage keeping more copies than its memory was
/// checked with (partition.inFlight): periodicPartition's test along one path.
bool oneFOneBSpansFit(const StageModel &model, const CutPartition &partition, double T,
                      TransferModel transfers) {
  const size_t stages = partition.gpus.size();
  const int m = model.problem().training.microbatches;
  double downstream = 0;
  PortSlot send; // the next stage's activation send
  for (size_t i = stages; i-- > 0;) {
    const int from = partition.cuts[i], to = partition.cuts[i + 1], gpu = partition.gpus[i];
    const bool recompute = i < partition.recompute.size() && partition.recompute[i];
    const StageTerms stage = model.timeTerms(from, to);
    const double f = model.forwardMs(stage, gpu), b = model.backwardMs(stage, gpu, recompute);
    if (f + b > T * (1 + 1e-9) || model.commMs(stage, gpu) > T * (1 + 1e-9))
      return false;
    const double arrival =
        transfers == TransferModel::Delays
            ? (i + 1 < stages ? f + (downstream + 2 * model.boundaryTransferMs(to, gpu)) : f)
            : gradientArrival(model, from, to, gpu, f, downstream, send, T);
    if (arrival == kInfinity)
      return false;
    const double delta = alignBackward(arrival, 0, f, b, T) + b;
    send = activationSend(model, to, gpu, f);
    const int n = std::max(1, std::min(static_cast<int>(std::ceil(delta / T - 1e-9)), m));
    int cap = static_cast<int>(stages - i);
    if (i < partition.inFlight.size())
      cap = std::min(cap, partition.inFlight[i]);
    if (n > cap)
      return false;
    downstream = delta;
  }
  return true;
}

/// The smallest T in (below, above] (relative precision 1e-7) at which the spans of
/// `partition` fit (oneFOneBSpansFit), `above` being one at which they do: a
/// partition the DP found at some T often runs at a smaller one, and its own period
/// bounds the search from above at no DP's cost.
double ownOneFOneBPeriod(const StageModel &model, const CutPartition &partition, double below,
                         double above, TransferModel transfers) {
  for (int iteration = 0; iteration < 60 && above - below > 1e-7 * above; ++iteration) {
    const double mid = 0.5 * (below + above);
    (oneFOneBSpansFit(model, partition, mid, transfers) ? above : below) = mid;
  }
  return above;
}
} // namespace

double oneFOneBSpanPeriod(const StageModel &model, const CutPartition &partition,
                          TransferModel transfers) {
  const double low = partition.periodMs;
  if (!(low > 0) || low == kInfinity)
    return kInfinity;
  if (oneFOneBSpansFit(model, partition, low, transfers)) {
    // A partition a DP found at T may fit at a smaller one, down to its stages'
    // own bottleneck (below which none fits).
    double floor = 0;
    for (size_t i = 0; i < partition.gpus.size(); ++i)
      floor = std::max(floor, model.periodMs(partition.cuts[i], partition.cuts[i + 1],
                                             partition.gpus[i],
                                             i < partition.recompute.size() &&
                                                 partition.recompute[i]));
    if (!(floor < low))
      return low;
    if (oneFOneBSpansFit(model, partition, floor, transfers))
      return floor;
    return ownOneFOneBPeriod(model, partition, floor, low, transfers);
  }
  double high = 2 * low;
  while (!oneFOneBSpansFit(model, partition, high, transfers) && high < 64 * low)
    high *= 2;
  return oneFOneBSpansFit(model, partition, high, transfers)
             ? ownOneFOneBPeriod(model, partition, low, high, transfers)
             : kInfinity;
}

std::optional<CutPartition> oneFOneBMinPeriod(const StageModel &model, int maxStages,
                                              const CutPartition &minMax, double upperBoundMs,
                                              bool minMaxFits, TransferModel transfers) {
  // The min-max bottleneck is a lower bound; often it is the answer. A partition
  // whose stages take no time has no period to search for.
  const double low = minMax.periodMs;
  if (!(low > 0) || low == kInfinity)
    return minMaxFits ? std::optional<CutPartition>(minMax) : std::nullopt;
  // The min-max partition's own span period (along its one path, no DP) is an
  // upper bound: the search is between the two.
  const double own = minMaxFits ? oneFOneBSpanPeriod(model, minMax, transfers) : kInfinity;
  // Below an incumbent, a lattice must beat it by more than the bisection's
  // precision (one that only ties it is not an improvement).
  constexpr double kPrecision = 1e-4; // relative; the spans move T by more
  const double bound = upperBoundMs < kInfinity ? upperBoundMs * (1 - 2 * kPrecision) : kInfinity;
  auto at = [&](double T) {
    return periodicPartition(model, maxStages, T, CopyRule::OneFOneB, transfers);
  };
  CutPartition itself = minMax;
  itself.periodMs = own;
  std::optional<CutPartition> best;
  double below = low, high = kInfinity;
  if (own < bound) {
    best = itself; // feasible at its own period, without a DP
    high = own;
  } else if (bound < kInfinity) {
    best = at(bound);
    if (!best)
      return std::nullopt; // nothing at the incumbent's bound (PortSlots: not a proof)
    high = bound;
  } else {
    for (double t = 2 * low; t <= 64 * low && !best; t *= 2)
      if ((best = at(t)))
        high = t;
    if (!best)
      return minMaxFits ? std::optional<CutPartition>(minMax) : std::nullopt;
  }
  // Bisection between the min-max bottleneck and a feasible T.
  while (high - below > kPrecision * high) {
    const double mid = 0.5 * (below + high);
    if (auto attempt = at(mid)) {
      high = mid;
      best = std::move(attempt);
    } else {
      below = mid;
    }
  }
  return best;
}

double greedyUpperBound(const StageModel &model, const MinMaxOptions &options) {
  const CutLattice &lattice = model.lattice();
  if (!lattice.isChain)
    return kInfinity;
  const Problem &problem = model.problem();
  const int stages = stageBudget(model, options.maxStages);
  const int gpus = problem.platform.gpus;
  const int m = problem.training.microbatches;
  const int full = lattice.fullCut();
  auto attempt = [&](double T) -> double {
    int to = full;
    double bottleneck = 0;
    for (int k = 1; k <= stages && to > 0; ++k) {
      const int gpu = gpus - k;
      int bestFrom = -1;
      double bestPeriod = 0;
      for (int from = to - 1; from >= 0; --from) {
        if (model.computeMs(from, to, gpu) > T)
          break;
        const StageChoice stage = model.choose(
            from, to, positionalInFlight(options.inFlightRule, k, m), gpu, options.memoryAware);
        if (!stage.feasible || stage.periodMs > T)
          continue;
        bestFrom = from;
        bestPeriod = stage.periodMs;
      }
      if (bestFrom < 0)
        return kInfinity;
      bottleneck = std::max(bottleneck, bestPeriod);
      to = bestFrom;
    }
    return to == 0 ? bottleneck : kInfinity;
  };
  double high = lattice.work[static_cast<size_t>(full)] * 2 + 1;
  double found = attempt(high);
  if (found == kInfinity)
    return kInfinity;
  double low = 0;
  for (int iteration = 0; iteration < 50 && high - low > 1e-6 * high; ++iteration) {
    double mid = 0.5 * (low + high);
    double value = attempt(mid);
    if (value < kInfinity) {
      high = mid;
      found = std::min(found, value);
    } else {
      low = mid;
    }
  }
  return found;
}


std::string explainMemoryInfeasibility(const StageModel &model, int maxStages,
                                       ScheduleKind inFlightRule) {
  if (model.lattice().numCuts() > 3000) {
    // Too large for the exact min-max-memory DP: report the largest single-layer need.
    const Problem &problem = model.problem();
    const int stages = stageBudget(model, maxStages);
    std::ostringstream out;
    double total = 0;
    for (const Layer &layer : problem.layers)
      total += problem.training.stateMultiplier * layer.parameterBytes + layer.savedBytes;
    for (const SharedSaved &value : problem.sharedSaved)
      total += value.bytes;
    for (const SharedParameter &value : problem.sharedParameters)
      total += problem.training.stateMultiplier * value.bytes;
    out << "infeasible: no split of the " << problem.layers.size() << " layers into at most "
        << stages << " stages fits "
        << formatBytes(model.memoryLimit(), model.problem().platform.byteUnits)
        << " per GPU (parameter state plus one copy of every activation alone is "
        << formatBytes(total, problem.platform.byteUnits) << " in total)";
    return out.str();
  }
  auto partition = minMemoryPartition(model, maxStages, inFlightRule);
  if (!partition)
    return "infeasible: no partition exists";
  const CutLattice &lattice = model.lattice();
  const Problem &problem = model.problem();
  size_t worst = 0;
  double worstBytes = -1;
  for (size_t s = 0; s + 1 < partition->cuts.size(); ++s) {
    double bytes = model.memoryBytes(partition->cuts[s], partition->cuts[s + 1],
                                     partition->inFlight[s]);
    if (bytes > worstBytes) {
      worstBytes = bytes;
      worst = s;
    }
  }
  auto layers = lattice.layersBetween(partition->cuts[worst], partition->cuts[worst + 1]);
  std::ostringstream out;
  out << "infeasible: even the most memory-balanced split into at most "
      << stageBudget(model, maxStages) << " stages needs "
      << formatBytes(worstBytes, problem.platform.byteUnits) << " on stage " << worst << " (";
  if (layers.size() == 1)
    out << "layer " << problem.layers[static_cast<size_t>(layers.front())].name;
  else
    out << layers.size() << " layers, "
        << problem.layers[static_cast<size_t>(layers.front())].name << " .. "
        << problem.layers[static_cast<size_t>(layers.back())].name;
  out << ", " << partition->inFlight[worst] << " micro-batches in flight), limit "
      << formatBytes(model.memoryLimit(), model.problem().platform.byteUnits);
  return out.str();
}

} // namespace partitioner
