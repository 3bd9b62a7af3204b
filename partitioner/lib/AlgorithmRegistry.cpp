// The registry of algorithms (one line per algorithm), and what a planning run's
// algorithms share.
#include "partitioner/Algorithm.h"

namespace partitioner {

const std::vector<std::unique_ptr<Algorithm>> &algorithmRegistry() {
  static const std::vector<std::unique_ptr<Algorithm>> registry = [] {
    std::vector<std::unique_ptr<Algorithm>> all;
    all.push_back(makeUniformAlgorithm());
    all.push_back(makeParamsAlgorithm());
    all.push_back(makeBalancedAlgorithm());
    all.push_back(makePipeDreamAlgorithm());
    all.push_back(makeMadPipeAlgorithm());
    all.push_back(makeMadPipeSpanAlgorithm());
    all.push_back(makeInterleavedAlgorithm());
    all.push_back(makeIlpAlgorithm());
    all.push_back(makeGeneralAlgorithm());
    all.push_back(makeGeneralMovesAlgorithm());
    all.push_back(makeIlpGeneralAlgorithm());
    return all;
  }();
  return registry;
}

const Algorithm *findAlgorithm(const std::string &name) {
  for (const auto &algorithm : algorithmRegistry())
    if (algorithm->name() == name)
      return algorithm.get();
  return nullptr;
}

const std::optional<CutLattice> *IdealLatticeCache::find(const Problem &problem,
                                                         size_t maxCuts) {
  if (&problem != &problem_)
    return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!built_) {
    lattice_ = idealLattice(problem_, maxCuts);
    maxCuts_ = maxCuts;
    built_ = true;
  }
  return maxCuts == maxCuts_ ? &lattice_ : nullptr;
}

std::vector<AlgorithmInfo> listAlgorithms() {
  std::vector<AlgorithmInfo> infos;
  for (const auto &algorithm : algorithmRegistry())
    infos.push_back({algorithm->name(), algorithm->summary(), algorithm->partOfBest()});
  return infos;
}

} // namespace partitioner
