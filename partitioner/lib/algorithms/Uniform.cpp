// `uniform`: equal layer counts per stage along one topological order (the Megatron /
// DeepSpeed default). Ignores time and memory; the simulator judges the result.
#include "partitioner/Algorithm.h"
#include "partitioner/Linearize.h"

#include <algorithm>

namespace partitioner {
namespace {
class UniformAlgorithm : public Algorithm {
public:
  std::string name() const override { return "uniform"; }
  std::string summary() const override {
    return "equal layer counts per GPU (Megatron/DeepSpeed default)";
  }
  AlgorithmOutput run(const Problem &problem, const AlgorithmContext &) const override {
    const std::vector<int> order = topologicalOrder(problem);
    const int layers = static_cast<int>(order.size());
    const int stages = std::min(problem.platform.gpus, layers);
    std::vector<int> sizes;
    // Spread the remainder over the first stages, not the last (DeepSpeed PR #4053).
    for (int s = 0; s < stages; ++s)
      sizes.push_back(layers / stages + (s < layers % stages ? 1 : 0));
    AlgorithmOutput output;
    output.allocation = allocationFromSizes(problem, order, sizes);
    return output;
  }
};
} // namespace

std::unique_ptr<Algorithm> makeUniformAlgorithm() { return std::make_unique<UniformAlgorithm>(); }

} // namespace partitioner
