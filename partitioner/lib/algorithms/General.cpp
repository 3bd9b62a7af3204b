// `general`: a fast heuristic for general allocations. For a few chunk counts K
// (P .. 4P), split the chain into K contiguous chunks of balanced work, assign them to
// GPUs by LPT (largest chunk first, to the GPU that finishes it earliest), then move or
// swap chunks off the busiest GPU while that lowers its load. Adjacent chunks on one
// GPU merge into one stage. Each candidate is scheduled and simulated; the best valid
// one is returned (memory is judged by the simulator only).
#include "General.h"
#include "partitioner/Planner.h"
#include "partitioner/PlannerImpl.h"
#include "partitioner/Schedule.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace partitioner {
namespace {

constexpr double kBestWork = 1.5e5;

/// Contiguous split into at most k chunks minimising the largest chunk (bisection on
/// the cap with greedy filling); returns chunk end positions (exclusive).
std::vector<int> balancedChunks(const std::vector<double> &work, int k) {
  const int n = static_cast<int>(work.size());
  auto fill = [&](double cap) {
    std::vector<int> ends;
    double current = 0;
    for (int i = 0; i < n; ++i) {
      if (i > 0 && current + work[static_cast<size_t>(i)] > cap) {
        ends.push_back(i);
        current = 0;
      }
      current += work[static_cast<size_t>(i)];
    }
    ends.push_back(n);
    return ends;
  };
  double low = *std::max_element(work.begin(), work.end());
  double high = std::accumulate(work.begin(), work.end(), 0.0);
  if (static_cast<int>(fill(low).size()) <= k)
    high = low;
  for (int iteration = 0; iteration < 60 && high - low > 1e-9 * high; ++iteration) {
    const double mid = 0.5 * (low + high);
    if (static_cast<int>(fill(mid).size()) <= k)
      high = mid;
    else
      low = mid;
  }
  return fill(high);
}

/// LPT, then moves and swaps off the busiest GPU. Returns the GPU of each chunk.
std::vector<int> assignChunks(const std::vector<double> &chunkWork, const Platform &platform) {
  const size_t count = chunkWork.size();
  const size_t gpus = static_cast<size_t>(platform.gpus);
  std::vector<double> load(gpus, 0);
  std::vector<int> gpuOf(count, 0);
  std::vector<size_t> byWork(count);
  std::iota(byWork.begin(), byWork.end(), 0);
  std::stable_sort(byWork.begin(), byWork.end(),
                   [&](size_t a, size_t b) { return chunkWork[a] > chunkWork[b]; });
  auto time = [&](size_t g, double work) { return work / platform.speedOf(static_cast<int>(g)); };
  for (size_t i : byWork) {
    size_t best = 0;
    for (size_t g = 1; g < gpus; ++g)
      if (time(g, load[g] + chunkWork[i]) < time(best, load[best] + chunkWork[i]) - 1e-12)
        best = g;
    gpuOf[i] = static_cast<int>(best);
    load[best] += chunkWork[i];
  }
  for (int round = 0; round < 200; ++round) {
    size_t top = 0;
    for (size_t g = 1; g < gpus; ++g)
      if (time(g, load[g]) > time(top, load[top]))
        top = g;
    const double peak = time(top, load[top]);
    bool improved = false;
    for (size_t i = 0; i < count && !improved; ++i) {
      if (static_cast<size_t>(gpuOf[i]) != top)
        continue;
      for (size_t h = 0; h < gpus && !improved; ++h) {
        if (h == top)
          continue;
        if (std::max(time(top, load[top] - chunkWork[i]), time(h, load[h] + chunkWork[i])) < peak - 1e-9 * peak) {
          load[top] -= chunkWork[i];
          load[h] += chunkWork[i];
          gpuOf[i] = static_cast<int>(h);
          improved = true;
          break;
        }
        for (size_t j = 0; j < count; ++j) {
          if (static_cast<size_t>(gpuOf[j]) != h || chunkWork[j] >= chunkWork[i])
            continue;
          const double delta = chunkWork[i] - chunkWork[j];
          if (std::max(time(top, load[top] - delta), time(h, load[h] + delta)) < peak - 1e-9 * peak) {
            load[top] -= delta;
            load[h] += delta;
            std::swap(gpuOf[i], gpuOf[j]);
            improved = true;
            break;
          }
        }
      }
    }
    if (!improved)
      break;
  }
  return gpuOf;
}

class GeneralAlgorithm : public Algorithm {
public:
  std::string name() const override { return "general"; }
  std::string summary() const override {
    return "heuristic general allocation: balanced chunks (P..4P) assigned by LPT + moves, "
           "best simulated candidate";
  }

  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const override {
    AlgorithmOutput output;
    const ScheduleKind kind = detail::generalScheduleKind(problem);
    output.schedule = kind;
    const int P = problem.platform.gpus;
    const detail::GeneralChain chain(problem);
    const int L = chain.size();
    if (P < 2 || L < 3) {
      output.reason = "general: needs at least 2 GPUs and 3 layers";
      return output;
    }
    const auto &asked = context.options.algorithms;
    const bool askedFor = std::find(asked.begin(), asked.end(), name()) != asked.end() ||
                          std::find(asked.begin(), asked.end(), "all") != asked.end();
    // Inside `best`, only as many chunk counts as keep the schedules cheap to build and
    // simulate: about K^2 m steps each, kBestWork in all (deterministic, unlike a time
    // budget).
    const double m = problem.training.microbatches;
    std::vector<int> counts;
    double work = 0;
    for (int k : {P, P + 1, P + 2, (3 * P) / 2, 2 * P, 3 * P, 4 * P}) {
      if (k > L || std::find(counts.begin(), counts.end(), k) != counts.end())
        continue;
      work += static_cast<double>(k) * k * m;
      if (!askedFor && work > kBestWork)
        break;
      counts.push_back(k);
    }
    if (counts.empty()) {
      output.reason = "general: not run by best on " + std::to_string(P) + " GPUs x " +
                      std::to_string(problem.training.microbatches) +
                      " micro-batches; ask for it with --algo general";
      return output;
    }
    std::optional<PlanResult> best;
    int bestChunks = 0, tried = 0;
    std::string firstReason;
    for (int k : counts) {
      ++tried;
      const std::vector<int> ends = balancedChunks(chain.work, k);
      std::vector<double> chunkWork;
      int begin = 0;
      for (int end : ends) {
        chunkWork.push_back(std::accumulate(chain.work.begin() + begin, chain.work.begin() + end, 0.0));
        begin = end;
      }
      const std::vector<int> gpuOfChunk = assignChunks(chunkWork, problem.platform);
      std::vector<int> gpuOf(static_cast<size_t>(L), 0);
      begin = 0;
      for (size_t i = 0; i < ends.size(); ++i) {
        for (int l = begin; l < ends[i]; ++l)
          gpuOf[static_cast<size_t>(l)] = gpuOfChunk[i];
        begin = ends[i];
      }
      const Allocation allocation = detail::allocationFromGpuMap(problem, chain, gpuOf);
      PlanResult result = evaluateUnderPolicyOrThrow(problem, allocation, kind, context.bounds);
      if (!result.valid) {
        if (firstReason.empty())
          firstReason = result.reason;
        continue;
      }
      if (!best || betterPlan(result, *best)) {
        best = std::move(result);
        bestChunks = k;
      }
    }
    if (!best) {
      output.reason = "general: no valid candidate among " + std::to_string(tried) +
                      " chunk counts (" + firstReason + ")";
      return output;
    }
    output.allocation = best->allocation;
    output.predictedPeriodMs = bottleneckPeriod(problem, best->allocation);
    std::ostringstream notes;
    notes << bestChunks << " chunks -> " << best->allocation.numStages() << " stages on "
          << best->allocation.numGpusUsed() << " GPUs (" << tried << " chunk counts tried)";
    output.notes = notes.str();
    return output;
  }
};

} // namespace

std::unique_ptr<Algorithm> makeGeneralAlgorithm() { return std::make_unique<GeneralAlgorithm>(); }

} // namespace partitioner
