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
  // value[k][j]: best max for the first j items in k parts.
  const size_t width = static_cast<size_t>(n) + 1;
  std::vector<double> value((static_cast<size_t>(stages) + 1) * width, kInfinity);
  std::vector<int> choice(value.size(), -1);
  value[0] = 0;
  for (int k = 1; k <= stages; ++k)
    for (int j = k; j <= n - (stages - k); ++j)
      for (int i = k - 1; i < j; ++i) {
        const double prev = value[static_cast<size_t>(k - 1) * width + static_cast<size_t>(i)];
        if (prev == kInfinity)
          continue;
        const double v = std::max(prev, prefix[static_cast<size_t>(j)] - prefix[static_cast<size_t>(i)]);
        double &cell = value[static_cast<size_t>(k) * width + static_cast<size_t>(j)];
        if (v < cell) {
          cell = v;
          choice[static_cast<size_t>(k) * width + static_cast<size_t>(j)] = i;
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
    if (static_cast<double>(weights.size()) * static_cast<double>(weights.size()) *
            problem.platform.gpus > 4e9) {
      output.reason = "params: too many layers for the exact split";
      return output;
    }
    output.allocation =
        allocationFromSizes(problem, order, minMaxSplitSizes(weights, problem.platform.gpus));
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makeParamsAlgorithm() { return std::make_unique<ParamsAlgorithm>(); }

} // namespace partitioner
