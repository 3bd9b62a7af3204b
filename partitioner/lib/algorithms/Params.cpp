// `params`: balance parameter bytes per stage (DeepSpeed's `parameters` method with
// its original min-max objective) along one topological order. Exact min-max over
// splits into exactly min(P, layers) non-empty stages; ignores time and memory.
#include "partitioner/Algorithm.h"
#include "partitioner/Linearize.h"

#include <algorithm>

namespace partitioner {

/// Exposed for the oracle tests: sizes of the min-max split of `weights` into exactly
/// `stages` non-empty contiguous parts (ties: earliest cut positions).
std::vector<int> minMaxSplitSizes(const std::vector<double> &weights, int stages);

std::vector<int> minMaxSplitSizes(const std::vector<double> &weights, int stages) {
  const int n = static_cast<int>(weights.size());
  stages = std::max(1, std::min(stages, n));
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  for (int i = 0; i < n; ++i)
    prefix[static_cast<size_t>(i) + 1] = prefix[static_cast<size_t>(i)] + weights[static_cast<size_t>(i)];
  // value[k][j]: best max for the first j items in k parts; choice: the earliest
  // i of the best max(value[k-1][i], prefix[j] - prefix[i]). Over i in
  // [k-1, j-1] the first term never falls as i grows (one more item never lowers
  // the best max) and the second never rises (the weights are not negative), so
  // the best i sits where the first reaches the second: two binary searches per
  // cell instead of a scan (O(S n log n)).
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<double> value((static_cast<size_t>(stages) + 1) * width, kInfinity);
  std::vector<int> choice(value.size(), -1);
  value[0] = 0;
  for (int k = 1; k <= stages; ++k) {
    const double *previous = &value[static_cast<size_t>(k - 1) * width];
    auto last = [&](int i, int j) {
      return prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)];
    };
    for (int j = k; j <= n - (stages - k); ++j) {
      // The first i in [k-1, j-1] whose previous value reaches the last part (j if none).
      int low = k - 1, high = j;
      while (low < high) {
        const int mid = low + (high - low) / 2;
        if (previous[mid] >= last(mid, j))
          high = mid;
        else
          low = mid + 1;
      }
      const int crossing = low;
      int best = -1;
      double bestValue = kInfinity;
      if (crossing > k - 1) {
        // Before the crossing the last part is the max, falling with i: the best
        // there is at crossing - 1, and the earliest i with the same last part wins.
        const double target = last(crossing - 1, j);
        int first = k - 1, upTo = crossing - 1;
        while (first < upTo) {
          const int mid = first + (upTo - first) / 2;
          if (last(mid, j) <= target)
            upTo = mid;
          else
            first = mid + 1;
        }
        best = first;
        bestValue = target;
      }
      if (crossing < j && previous[crossing] < bestValue) {
        best = crossing;
        bestValue = previous[crossing];
      }
      value[static_cast<size_t>(k) * width + static_cast<size_t>(j)] = bestValue;
      choice[static_cast<size_t>(k) * width + static_cast<size_t>(j)] = best;
    }
  }
  std::vector<int> sizes(static_cast<size_t>(stages));
  int j = n;
  for (int k = stages; k >= 1; --k) {
    int i = choice[static_cast<size_t>(k) * width + static_cast<size_t>(j)];
    sizes[static_cast<size_t>(k - 1)] = j - i;
    j = i;
  }
  return sizes;
}

namespace {
class ParamsAlgorithm : public Algorithm {
public:
  std::string name() const override { return "params"; }
  std::string summary() const override {
    return "min-max parameter bytes per GPU (DeepSpeed 'parameters')";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &) const override {
    const std::vector<int> order = topologicalOrder(problem);
    // A shared parameter weighs on every layer that reads it, as each module
    // counts the parameters it uses.
    std::vector<double> own(problem.layers.size(), 0.0);
    for (size_t l = 0; l < problem.layers.size(); ++l)
      own[l] = problem.layers[l].parameterBytes;
    for (const SharedParameter &value : problem.sharedParameters)
      for (int layer : value.layers)
        own[static_cast<size_t>(layer)] += value.bytes;
    std::vector<double> weights;
    for (int layer : order)
      weights.push_back(own[static_cast<size_t>(layer)]);
    AlgorithmOutput output;
    output.allocation =
        allocationFromSizes(problem, order, minMaxSplitSizes(weights, problem.platform.gpus));
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makeParamsAlgorithm() { return std::make_unique<ParamsAlgorithm>(); }

} // namespace partitioner
