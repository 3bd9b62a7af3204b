// A lower bound on the period of every general allocation (any map layer -> GPU,
// several stages per GPU allowed), proven with CBC (docs/partitioner.md, "A bound
// over every general allocation").
//
// The relaxation at a period T: each layer l goes to one GPU g (x[l][g] binary);
//   load:   sum_l work(l) x[l][g] <= T * speed(g);
//   memory: sum_l (state(l) + saved(l) * min(m, span(l) / T)) x[l][g] <= M,
// with span(l) the layer's downstream critical path on the fastest GPU. The second
// row is Little's law per GPU: in a periodic schedule of period T each micro-batch
// keeps layer l's saved bytes for at least span(l), so on average span(l) / T copies
// are alive (at most m), and a GPU's time-averaged memory is at most its peak.
// Everything else a GPU holds (workspace, buffers, extra weight versions, shared
// parameters) is left out, which keeps it a relaxation. Every plan of period T that
// fits without recomputation is a solution at T; the rows only tighten as T falls,
// so "no solution at T" proves that no allocation reaches a period below T.
// Bisection on T between a known bound and the chosen plan's period finds the
// largest T proven infeasible.
#include "partitioner/Bounds.h"
#include "partitioner/Linearize.h"

#include "CbcUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>

namespace partitioner {
namespace {

enum class Verdict { Feasible, Infeasible, Unknown };

/// The relaxation's items: the layers that weigh anything, with their work, state,
/// saved bytes and span (feasibleAt orders them, largest first, for each T).
struct Items {
  std::vector<double> work, state, saved, span;
};

Items itemsOf(const Problem &problem) {
  const std::vector<double> down = downstreamWork(problem);
  double fastest = 0;
  for (int g = 0; g < problem.platform.gpus; ++g)
    fastest = std::max(fastest, problem.platform.speedOf(g));
  Items items;
  for (size_t l = 0; l < problem.layers.size(); ++l) {
    const Layer &layer = problem.layers[l];
    const double state = problem.training.stateMultiplier * layer.parameterBytes;
    if (layer.workMs() <= 0 && state <= 0 && layer.savedBytes <= 0)
      continue; // goes anywhere
    items.work.push_back(layer.workMs());
    items.state.push_back(state);
    items.saved.push_back(layer.savedBytes);
    items.span.push_back(down[l] / fastest);
  }
  return items;
}

/// A quick search for a solution before CBC: the items, largest first, each on
/// the GPU that it leaves least full (the larger of its load and memory fractions).
bool greedyFits(const Problem &problem, const std::vector<double> &load,
                const std::vector<double> &bytes, const std::vector<size_t> &order,
                double fastest) {
  const int P = problem.platform.gpus;
  std::vector<double> loads(static_cast<size_t>(P), 0.0), memories(static_cast<size_t>(P), 0.0);
  for (size_t item : order) {
    int chosen = -1;
    double fullest = kInfinity;
    for (int g = 0; g < P; ++g) {
      const double l = loads[static_cast<size_t>(g)] +
                       load[item] * fastest / problem.platform.speedOf(g);
      const double b = memories[static_cast<size_t>(g)] + bytes[item];
      if (l > 1 || b > 1 || std::max(l, b) >= fullest)
        continue;
      chosen = g;
      fullest = std::max(l, b);
    }
    if (chosen < 0)
      return false;
    loads[static_cast<size_t>(chosen)] += load[item] * fastest / problem.platform.speedOf(chosen);
    memories[static_cast<size_t>(chosen)] += bytes[item];
  }
  return true;
}

/// Is there a map of the items to GPUs within period T and the memory limit?
Verdict feasibleAt(const Problem &problem, const Items &items, double T,
                   const detail::Deadline &deadline) {
  const Platform &platform = problem.platform;
  const int P = platform.gpus;
  const int m = problem.training.microbatches;
  const double limit = platform.memoryBytesPerGpu;
  const bool memory = limit < kInfinity;
  const size_t L = items.work.size();
  double fastest = 0;
  for (int g = 0; g < P; ++g)
    fastest = std::max(fastest, platform.speedOf(g));
  // Load and memory of each item as fractions of one GPU's capacity (of the
  // fastest GPU for the load): byte-sized coefficients upset CBC's tolerances.
  std::vector<double> load(L), bytes(L, 0.0);
  for (size_t l = 0; l < L; ++l) {
    load[l] = items.work[l] / (T * fastest);
    if (memory)
      bytes[l] = (items.state[l] + items.saved[l] * std::min<double>(m, items.span[l] / T)) / limit;
    if (load[l] > 1 + 1e-12 || bytes[l] > 1 + 1e-12)
      return Verdict::Infeasible; // fits no GPU
  }
  std::vector<size_t> order(L);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::max(load[a], bytes[a]) > std::max(load[b], bytes[b]);
  });
  if (greedyFits(problem, load, bytes, order, fastest))
    return Verdict::Feasible;
  bool identical = true;
  for (int g = 1; g < P; ++g)
    identical &= platform.speedOf(g) == platform.speedOf(0);

  std::unique_ptr<Cbc_Model, void (*)(Cbc_Model *)> owner(Cbc_newModel(), Cbc_deleteModel);
  Cbc_Model *model = owner.get();
  Cbc_setLogLevel(model, 0);
  // x[i][g]: the i-th item of `order` on GPU g; with identical GPUs, item i only on
  // GPUs 0..i, and GPU g only once GPU g-1 holds an earlier item.
  auto column = [&](size_t i, int g) { return static_cast<int>(i) * P + g; };
  for (size_t i = 0; i < L; ++i)
    for (int g = 0; g < P; ++g) {
      const bool allowed = !identical || static_cast<size_t>(g) <= i;
      Cbc_addCol(model, "", 0, allowed ? 1 : 0, 0, 1, 0, nullptr, nullptr);
    }
  auto addRow = [&](const std::vector<int> &columns, const std::vector<double> &values,
                    char sense, double rhs) {
    Cbc_addRow(model, "", static_cast<int>(columns.size()), columns.data(), values.data(), sense,
               rhs);
  };
  for (size_t i = 0; i < L; ++i) {
    std::vector<int> columns;
    for (int g = 0; g < P; ++g)
      columns.push_back(column(i, g));
    addRow(columns, std::vector<double>(static_cast<size_t>(P), 1.0), 'E', 1);
  }
  for (int g = 0; g < P; ++g) {
    std::vector<int> columns;
    std::vector<double> loads, memories;
    for (size_t i = 0; i < L; ++i) {
      columns.push_back(column(i, g));
      loads.push_back(load[order[i]] * fastest / platform.speedOf(g));
      memories.push_back(bytes[order[i]]);
    }
    addRow(columns, loads, 'L', 1);
    if (memory)
      addRow(columns, memories, 'L', 1);
  }
  if (identical && P > 1) {
    // opened[i][g] = sum_{k <= i} x[k][g] (continuous, in [0, 1] per item count), so
    // that "GPU g only once GPU g-1 holds an earlier item" is x[i][g] <= opened[i-1][g-1]:
    // O(L P) short rows instead of O(L^2 P) terms.
    const int first = static_cast<int>(L) * P;
    auto opened = [&](size_t i, int g) { return first + static_cast<int>(i) * (P - 1) + g; };
    for (size_t i = 0; i < L; ++i)
      for (int g = 0; g + 1 < P; ++g)
        Cbc_addCol(model, "", 0, static_cast<double>(i + 1), 0, 0, 0, nullptr, nullptr);
    for (size_t i = 0; i < L; ++i)
      for (int g = 0; g + 1 < P; ++g) {
        std::vector<int> columns{opened(i, g), column(i, g)};
        std::vector<double> values{1.0, -1.0};
        if (i > 0) {
          columns.push_back(opened(i - 1, g));
          values.push_back(-1.0);
        }
        addRow(columns, values, 'E', 0);
        if (i > 0) // x[i][g+1] <= opened[i-1][g]
          addRow({column(i, g + 1), opened(i - 1, g)}, {1.0, -1.0}, 'L', 0);
      }
  }
  Cbc_setObjSense(model, 1.0); // no objective: the first solution ends the search
  detail::solve(model, deadline);
  if (Cbc_isProvenInfeasible(model))
    return Verdict::Infeasible;
  if (Cbc_isProvenOptimal(model) || Cbc_numberSavedSolutions(model) > 0)
    return Verdict::Feasible;
  return Verdict::Unknown;
}

} // namespace

GeneralAllocationBound generalAllocationBound(const Problem &problem, double lowerMs,
                                              double upperMs, double seconds) {
  GeneralAllocationBound result;
  result.periodMs = lowerMs;
  if (problem.training.recompute != RecomputePolicy::None) {
    result.notes = "not computed: the relaxation holds only without recomputation";
    return result;
  }
  if (!(upperMs > lowerMs) || !(upperMs < kInfinity)) {
    result.notes = "not computed: no plan to compare with";
    return result;
  }
  const Items items = itemsOf(problem);
  const detail::Deadline deadline(seconds);
  // What CBC could not settle: the bound stays below it.
  auto settle = [&](double T) {
    const double share = deadline.remainingSeconds();
    if (share <= 0.05 * seconds)
      return Verdict::Unknown;
    // The first solve (the plan's own period) gets half of the time, the rest a
    // quarter of what is left, so that a hard one leaves room for the others.
    const detail::Deadline each(result.solves == 0 ? 0.5 * share : 0.25 * share);
    ++result.solves;
    const Verdict verdict = feasibleAt(problem, items, T, each);
    result.unknown += verdict == Verdict::Unknown;
    return verdict;
  };
  // Within this of the plan's period, a general allocation cannot help.
  constexpr double kTolerance = 1e-3;
  double low = lowerMs, high = upperMs * (1 - kTolerance);
  const Verdict top = settle(high);
  if (top == Verdict::Infeasible) {
    result.periodMs = high;
  } else {
    result.feasibleMs = top == Verdict::Feasible ? high : kInfinity;
    while (high / low > 1.005 && deadline.remainingSeconds() > 0.05 * seconds) {
      const double middle = std::sqrt(low * high);
      const Verdict verdict = settle(middle);
      if (verdict == Verdict::Infeasible) {
        low = middle;
      } else {
        high = middle;
        if (verdict == Verdict::Feasible)
          result.feasibleMs = std::min(result.feasibleMs, middle);
      }
    }
    result.periodMs = low;
  }
  char text[160];
  std::snprintf(text, sizeof text, "CBC: %d solves (%d stopped by the time limit)",
                result.solves, result.unknown);
  result.notes = text;
  result.seconds = seconds - deadline.remainingSeconds();
  return result;
}

} // namespace partitioner
