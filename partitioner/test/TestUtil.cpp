// Random instances for the oracle tests.
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace partitioner::testing {

namespace {
double uniform(std::mt19937 &rng, double low, double high) {
  return std::uniform_real_distribution<double>(low, high)(rng);
}
} // namespace

Problem randomChain(std::mt19937 &rng, int layers, int gpus) {
  Problem problem;
  problem.name = "random-chain";
  for (int i = 0; i < layers; ++i) {
    Layer layer;
    layer.name = "l" + std::to_string(i);
    layer.forwardMs = uniform(rng, 0.1, 10);
    layer.backwardMs = uniform(rng, 0.1, 10);
    layer.parameterBytes = uniform(rng, 0, 1e6);
    layer.savedBytes = uniform(rng, 0, 1e6);
    layer.outputBytes = uniform(rng, 0, 1e6);
    problem.layers.push_back(layer);
  }
  problem.platform.gpus = gpus;
  problem.platform.memoryBytesPerGpu = uniform(rng, 2e6, 1.2e7);
  problem.platform.gpusPerNode = 2;
  problem.platform.intraNode = LinkSpec{uniform(rng, 1e8, 1e9), uniform(rng, 0, 0.5)};
  problem.platform.interNode = LinkSpec{uniform(rng, 5e7, 5e8), uniform(rng, 0, 1)};
  problem.training.microbatches = 1 + static_cast<int>(rng() % 6);
  problem.training.communicationBuffers = rng() % 2 == 0;
  if (rng() % 3 == 0) // heterogeneous GPUs
    for (int g = 0; g < gpus; ++g)
      problem.platform.speed.push_back(uniform(rng, 0.5, 2.0));
  orThrow(problem.finalize());
  return problem;
}

Problem randomDag(std::mt19937 &rng, int layers, int gpus) {
  Problem problem = randomChain(rng, layers, gpus);
  problem.tensors.clear();
  for (int i = 0; i < layers; ++i) {
    Tensor tensor;
    tensor.producer = i;
    tensor.bytes = problem.layers[static_cast<size_t>(i)].outputBytes;
    problem.tensors.push_back(tensor);
  }
  for (int i = 1; i < layers; ++i) {
    int first = static_cast<int>(rng() % static_cast<unsigned>(i));
    problem.tensors[static_cast<size_t>(first)].consumers.push_back(i);
    if (i > 1 && rng() % 2 == 0) {
      int second = static_cast<int>(rng() % static_cast<unsigned>(i));
      problem.tensors[static_cast<size_t>(second)].consumers.push_back(i);
    }
  }
  std::vector<Tensor> kept;
  for (const Tensor &t : problem.tensors)
    if (!t.consumers.empty())
      kept.push_back(t);
  problem.tensors = kept;
  orThrow(problem.finalize());
  return problem;
}

void addRandomWorkspace(std::mt19937 &rng, Problem &problem) {
  for (Layer &layer : problem.layers)
    if (rng() % 2 == 0)
      layer.workspaceBytes = uniform(rng, 0, 2e6);
  orThrow(problem.finalize());
}

namespace {
/// Adds 1..maxValues entries of two or three random layers each, bytes in [0, 1e6].
template <typename Shared>
void addRandomShared(std::mt19937 &rng, Problem &problem, int maxValues,
                     std::vector<Shared> &list) {
  const int layers = static_cast<int>(problem.layers.size());
  if (layers < 2)
    return;
  const int values = 1 + static_cast<int>(rng() % static_cast<unsigned>(maxValues));
  for (int v = 0; v < values; ++v) {
    Shared value;
    const int sharers = 2 + static_cast<int>(rng() % 2);
    for (int k = 0; k < sharers; ++k)
      value.layers.push_back(static_cast<int>(rng() % static_cast<unsigned>(layers)));
    value.bytes = uniform(rng, 0, 1e6);
    std::sort(value.layers.begin(), value.layers.end());
    value.layers.erase(std::unique(value.layers.begin(), value.layers.end()), value.layers.end());
    if (value.layers.size() >= 2)
      list.push_back(value);
  }
  orThrow(problem.finalize());
}
} // namespace

void addRandomSharedSaved(std::mt19937 &rng, Problem &problem) {
  addRandomShared(rng, problem, 3, problem.sharedSaved);
}

void addRandomSharedParameters(std::mt19937 &rng, Problem &problem) {
  addRandomShared(rng, problem, 2, problem.sharedParameters);
}

std::vector<StageParameters> stageParameters(const Problem &problem,
                                             const std::vector<std::vector<int>> &stages,
                                             const std::vector<int> &gpuOfStage) {
  std::vector<StageParameters> result(stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    for (int l : stages[s])
      result[s].owned += problem.layers[static_cast<size_t>(l)].parameterBytes;
  for (const SharedParameter &value : problem.sharedParameters) {
    std::vector<int> gpusSeen;
    for (size_t s = 0; s < stages.size(); ++s) {
      bool reads = false;
      for (int l : stages[s])
        reads |= std::find(value.layers.begin(), value.layers.end(), l) != value.layers.end();
      const int gpu = gpuOfStage[s];
      if (!reads || std::find(gpusSeen.begin(), gpusSeen.end(), gpu) != gpusSeen.end())
        continue;
      (gpusSeen.empty() ? result[s].owned : result[s].read) += value.bytes;
      gpusSeen.push_back(gpu);
    }
  }
  return result;
}

std::vector<StageParameters> stageParameters(const Problem &problem,
                                             const std::vector<std::vector<int>> &stages) {
  std::vector<int> gpus(stages.size());
  for (size_t s = 0; s < stages.size(); ++s)
    gpus[s] = static_cast<int>(s);
  return stageParameters(problem, stages, gpus);
}

double stageSavedBytes(const Problem &problem, const std::vector<int> &layers) {
  double bytes = 0;
  for (int l : layers)
    bytes += problem.layers[static_cast<size_t>(l)].savedBytes;
  for (const SharedSaved &value : problem.sharedSaved)
    for (int keeper : value.layers)
      if (std::find(layers.begin(), layers.end(), keeper) != layers.end()) {
        bytes += value.bytes;
        break;
      }
  return bytes;
}

double largestWorkspace(const Problem &problem, const std::vector<int> &layers) {
  double largest = 0;
  for (int l : layers)
    largest = std::max(largest, problem.layers[static_cast<size_t>(l)].workspaceBytes);
  return largest;
}

std::vector<std::vector<int>> allCompositions(int n, int maxParts) {
  std::vector<std::vector<int>> result;
  std::vector<int> current;
  std::function<void(int)> recurse = [&](int left) {
    if (left == 0) {
      result.push_back(current);
      return;
    }
    if (static_cast<int>(current.size()) == maxParts)
      return;
    for (int size = 1; size <= left; ++size) {
      current.push_back(size);
      recurse(left - size);
      current.pop_back();
    }
  };
  recurse(n);
  return result;
}

int scaledTrials(int trials) {
  const char *text = std::getenv("PARTITIONER_TEST_TRIAL_SCALE");
  if (!text || !*text)
    return trials;
  char *end = nullptr;
  const double scale = std::strtod(text, &end);
  if (*end != '\0' || !(scale > 0 && scale <= 1))
    throw Error(std::string("PARTITIONER_TEST_TRIAL_SCALE is '") + text +
                "', expected a fraction in (0, 1]");
  // At least ten trials (or all, when fewer): the tests that count how often
  // something happens need a few.
  return std::max(std::min(trials, 10), static_cast<int>(std::lround(trials * scale)));
}

std::string profilesDirectory() { return PIPE_PARTITIONER_PROFILES_DIR; }

} // namespace partitioner::testing
