// Chain and downset (ideal) lattices of cut points.
#include "partitioner/CutLattice.h"
#include "partitioner/Linearize.h"

#include <algorithm>
#include <deque>
#include <numeric>
#include <string>
#include <unordered_map>

namespace partitioner {

namespace {
/// Memory the downset enumeration may use for its bitsets.
constexpr size_t kMaxLatticeBytes = size_t{256} << 20;
} // namespace

bool CutLattice::contains(int cut, int layer) const {
  if (isChain)
    return position[static_cast<size_t>(layer)] < cut;
  const uint64_t word = bits[static_cast<size_t>(cut) * words + static_cast<size_t>(layer) / 64];
  return (word >> (static_cast<unsigned>(layer) % 64)) & 1u;
}

std::vector<int> CutLattice::layersBetween(int from, int to) const {
  std::vector<int> result;
  if (isChain) {
    for (int i = from; i < to; ++i)
      result.push_back(order[static_cast<size_t>(i)]);
    std::sort(result.begin(), result.end());
    return result;
  }
  const int layers = static_cast<int>(position.size());
  for (int layer = 0; layer < layers; ++layer)
    if (contains(to, layer) && !contains(from, layer))
      result.push_back(layer);
  return result;
}

CutLattice chainLattice(const Problem &problem, const std::vector<int> &order) {
  CutLattice lattice;
  const size_t count = order.size();
  lattice.isChain = true;
  lattice.order = order;
  lattice.position.assign(problem.layers.size(), 0);
  for (size_t i = 0; i < count; ++i)
    lattice.position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  std::vector<double> cut = cutBytesAlong(problem, order);
  auto resize = [&](std::vector<double> &v) { v.assign(count + 1, 0.0); };
  resize(lattice.forward);
  resize(lattice.backward);
  resize(lattice.work);
  resize(lattice.saved);
  resize(lattice.inputs);
  resize(lattice.params);
  resize(lattice.weightGradient);
  resize(lattice.cutBytes);
  lattice.size.resize(count + 1);
  lattice.up.resize(count + 1);
  for (size_t i = 0; i <= count; ++i) {
    lattice.size[i] = static_cast<int>(i);
    if (i < count)
      lattice.up[i].push_back(static_cast<int>(i + 1));
    if (i == 0)
      continue;
    const Layer &layer = problem.layers[static_cast<size_t>(order[i - 1])];
    lattice.forward[i] = lattice.forward[i - 1] + layer.forwardMs;
    lattice.backward[i] = lattice.backward[i - 1] + layer.backwardMs;
    lattice.work[i] = lattice.work[i - 1] + layer.workMs();
    lattice.saved[i] = lattice.saved[i - 1] + layer.savedBytes;
    lattice.inputs[i] = lattice.inputs[i - 1] + layer.inputBytes;
    lattice.params[i] = lattice.params[i - 1] + layer.parameterBytes;
    lattice.weightGradient[i] = lattice.weightGradient[i - 1] + layer.weightGradientMs();
    lattice.cutBytes[i] = i < count ? cut[i - 1] : 0.0;
  }
  return lattice;
}

std::optional<CutLattice> idealLattice(const Problem &problem, size_t maxCuts) {
  const size_t count = problem.layers.size();
  const size_t words = (count + 63) / 64;
  // Each downset is a bitset of `words` words, held twice while enumerating (the
  // list and the index): whatever the caller's budget, stay within kMaxLatticeBytes.
  maxCuts = std::min(maxCuts, kMaxLatticeBytes / (2 * words * sizeof(uint64_t) + 64));
  // Every prefix of a topological order is a downset: more layers than the budget
  // means more downsets than the budget.
  if (count + 1 > maxCuts)
    return std::nullopt;
  // Enumeration costs O(downsets x layers): keep it to a few tens of millions of steps
  // so that graphs of thousands of nodes fall back to one order quickly.
  maxCuts = std::min(maxCuts, std::max<size_t>(count + 1, static_cast<size_t>(4e7) / std::max<size_t>(count, 1)));
  auto predecessors = predecessorLists(problem);
  CutLattice lattice;
  lattice.isChain = false;
  lattice.words = words;
  lattice.position.assign(count, 0); // only its size is used for ideal lattices

  std::unordered_map<std::string, int> index;
  std::vector<std::string> keys;
  // Breadth-first from the empty downset: BFS levels have non-decreasing sizes.
  std::string empty(words * sizeof(uint64_t), '\0');
  index.emplace(empty, 0);
  keys.push_back(empty);
  std::vector<std::vector<int>> up(1);
  std::vector<int> sizes{0};
  auto has = [&](const std::string &key, size_t layer) {
    uint64_t word;
    std::copy_n(key.data() + (layer / 64) * sizeof(uint64_t), sizeof(uint64_t),
                reinterpret_cast<char *>(&word));
    return (word >> (layer % 64)) & 1u;
  };
  for (size_t current = 0; current < keys.size(); ++current) {
    const std::string key = keys[current];
    for (size_t layer = 0; layer < count; ++layer) {
      if (has(key, layer))
        continue;
      bool ready = true;
      for (int p : predecessors[layer])
        if (!has(key, static_cast<size_t>(p))) {
          ready = false;
          break;
        }
      if (!ready)
        continue;
      std::string next = key;
      uint64_t word;
      std::copy_n(next.data() + (layer / 64) * sizeof(uint64_t), sizeof(uint64_t),
                  reinterpret_cast<char *>(&word));
      word |= uint64_t{1} << (layer % 64);
      std::copy_n(reinterpret_cast<const char *>(&word), sizeof(uint64_t),
                  next.data() + (layer / 64) * sizeof(uint64_t));
      auto [it, inserted] = index.emplace(next, static_cast<int>(keys.size()));
      if (inserted) {
        if (keys.size() >= maxCuts)
          return std::nullopt;
        keys.push_back(next);
        up.emplace_back();
        sizes.push_back(sizes[current] + 1);
      }
      up[current].push_back(it->second);
    }
  }
  const size_t cuts = keys.size();
  lattice.bits.resize(cuts * words);
  for (size_t c = 0; c < cuts; ++c)
    std::copy_n(keys[c].data(), words * sizeof(uint64_t),
                reinterpret_cast<char *>(lattice.bits.data() + c * words));
  lattice.up = std::move(up);
  lattice.size = std::move(sizes);
  auto resize = [&](std::vector<double> &v) { v.assign(cuts, 0.0); };
  resize(lattice.forward);
  resize(lattice.backward);
  resize(lattice.work);
  resize(lattice.saved);
  resize(lattice.inputs);
  resize(lattice.params);
  resize(lattice.weightGradient);
  resize(lattice.cutBytes);
  for (size_t c = 0; c < cuts; ++c) {
    for (size_t layer = 0; layer < count; ++layer) {
      if (!lattice.contains(static_cast<int>(c), static_cast<int>(layer)))
        continue;
      const Layer &l = problem.layers[layer];
      lattice.forward[c] += l.forwardMs;
      lattice.backward[c] += l.backwardMs;
      lattice.work[c] += l.workMs();
      lattice.saved[c] += l.savedBytes;
      lattice.inputs[c] += l.inputBytes;
      lattice.params[c] += l.parameterBytes;
      lattice.weightGradient[c] += l.weightGradientMs();
    }
    for (const Tensor &tensor : problem.tensors) {
      if (!lattice.contains(static_cast<int>(c), tensor.producer))
        continue;
      for (int consumer : tensor.consumers)
        if (!lattice.contains(static_cast<int>(c), consumer)) {
          lattice.cutBytes[c] += tensor.bytes;
          break;
        }
    }
  }
  return lattice;
}

} // namespace partitioner
