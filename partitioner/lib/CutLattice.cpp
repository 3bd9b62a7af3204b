// Chain and downset (ideal) lattices of cut points.
#include "partitioner/CutLattice.h"
#include "partitioner/Error.h"
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

double CutLattice::workspaceBetween(int from, int to) const {
  if ((workspaceLevels.empty() && layerWorkspace.empty()) || from >= to)
    return 0;
  double best = 0;
  if (isChain) {
    // Positions [from, to): the two blocks of 2^j that cover them.
    const size_t length = static_cast<size_t>(to - from);
    const size_t level = static_cast<size_t>(63 - __builtin_clzll(length));
    const std::vector<double> &row = workspaceLevels[level];
    return std::max(row[static_cast<size_t>(from)],
                    row[static_cast<size_t>(to) - (size_t{1} << level)]);
  }
  const uint64_t *outer = &bits[static_cast<size_t>(to) * words];
  const uint64_t *inner = &bits[static_cast<size_t>(from) * words];
  for (size_t w = 0; w < words; ++w)
    for (uint64_t only = outer[w] & ~inner[w]; only; only &= only - 1)
      best = std::max(best, layerWorkspace[w * 64 + static_cast<size_t>(__builtin_ctzll(only))]);
  return best;
}

namespace {
/// Bytes of the entries of `shared` held both in A and in B \ A.
double heldAgain(const CutLattice &lattice, const SharedAcrossCuts &shared, int from, int to) {
  if (shared.across.empty())
    return 0;
  double bytes = 0;
  for (int v : shared.across[static_cast<size_t>(from)])
    for (int layer : shared.sharers[static_cast<size_t>(v)])
      if (lattice.contains(to, layer) && !lattice.contains(from, layer)) {
        bytes += shared.bytes[static_cast<size_t>(v)];
        break;
      }
  return bytes;
}
} // namespace

double CutLattice::savedBetween(int from, int to) const {
  return saved[static_cast<size_t>(to)] - saved[static_cast<size_t>(from)] +
         heldAgain(*this, sharedSaved, from, to);
}

double CutLattice::readParametersBetween(int from, int to) const {
  return heldAgain(*this, sharedParameters, from, to);
}

namespace {
/// Entries of the per-cut lists of shared values a lattice may hold.
constexpr size_t kMaxSharedAcross = size_t{1} << 24;

/// Fills `shared` from `list` (SharedSaved or SharedParameter), and adds each
/// entry's bytes to `totals` of every cut that holds one of its sharers.
template <typename List>
void addShared(const List &list, const char *what, CutLattice &lattice, SharedAcrossCuts &shared,
               std::vector<double> &totals) {
  if (list.empty())
    return;
  for (const auto &value : list) {
    shared.sharers.push_back(value.layers);
    shared.bytes.push_back(value.bytes);
  }
  const size_t cuts = lattice.numCuts();
  shared.across.assign(cuts, {});
  size_t entries = 0;
  auto count = [&] {
    if (++entries > kMaxSharedAcross)
      throw Error(std::string("the ") + what + " straddle more than " +
                  std::to_string(kMaxSharedAcross) + " cut points in all");
  };
  if (lattice.isChain) {
    // Cut i holds positions [0, i): an entry with sharers at positions first..last
    // counts from cut first + 1 on, and straddles cuts first + 1 .. last.
    std::vector<double> added(cuts + 1, 0.0);
    for (size_t v = 0; v < list.size(); ++v) {
      int first = static_cast<int>(cuts), last = -1;
      for (int layer : shared.sharers[v]) {
        first = std::min(first, lattice.position[static_cast<size_t>(layer)]);
        last = std::max(last, lattice.position[static_cast<size_t>(layer)]);
      }
      added[static_cast<size_t>(first) + 1] += shared.bytes[v];
      for (int c = first + 1; c <= last; ++c) {
        shared.across[static_cast<size_t>(c)].push_back(static_cast<int>(v));
        count();
      }
    }
    double running = 0;
    for (size_t c = 0; c < cuts; ++c)
      totals[c] += (running += added[c]);
    return;
  }
  for (size_t c = 0; c < cuts; ++c)
    for (size_t v = 0; v < list.size(); ++v) {
      int inside = 0;
      for (int layer : shared.sharers[v])
        inside += lattice.contains(static_cast<int>(c), layer);
      if (inside > 0)
        totals[c] += shared.bytes[v];
      if (inside > 0 && inside < static_cast<int>(shared.sharers[v].size())) {
        shared.across[c].push_back(static_cast<int>(v));
        count();
      }
    }
}

void addShared(const Problem &problem, CutLattice &lattice) {
  addShared(problem.sharedSaved, "shared saved values", lattice, lattice.sharedSaved,
            lattice.saved);
  addShared(problem.sharedParameters, "shared parameters", lattice, lattice.sharedParameters,
            lattice.params);
}

bool anyWorkspace(const Problem &problem) {
  for (const Layer &layer : problem.layers)
    if (layer.workspaceBytes > 0)
      return true;
  return false;
}
} // namespace

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
  addShared(problem, lattice);
  if (anyWorkspace(problem)) {
    std::vector<double> layers(count);
    for (size_t i = 0; i < count; ++i)
      layers[i] = problem.layers[static_cast<size_t>(order[i])].workspaceBytes;
    lattice.workspaceLevels.push_back(std::move(layers));
    for (size_t half = 1; 2 * half <= count; half *= 2) {
      const std::vector<double> &below = lattice.workspaceLevels.back();
      std::vector<double> level(count - 2 * half + 1);
      for (size_t i = 0; i < level.size(); ++i)
        level[i] = std::max(below[i], below[i + half]);
      lattice.workspaceLevels.push_back(std::move(level));
    }
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
  addShared(problem, lattice);
  if (anyWorkspace(problem))
    for (const Layer &layer : problem.layers)
      lattice.layerWorkspace.push_back(layer.workspaceBytes);
  return lattice;
}

} // namespace partitioner
