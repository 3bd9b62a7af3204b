// The cut points a contiguous partition may use. For a chain: the prefixes of one
// topological order. For a DAG: all its downsets (ideals), so that stages are
// differences of nested downsets — DAG-aware cuts — when their number is small enough.
#ifndef PARTITIONER_CUTLATTICE_H
#define PARTITIONER_CUTLATTICE_H

#include "partitioner/Problem.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace partitioner {

/// Cuts are numbered by non-decreasing size; cut 0 is empty, the last one is full.
/// Every quantity is a sum over the layers inside the cut, so a stage between cuts
/// A ⊂ B costs value[B] - value[A]. `cutBytes` are the exact bytes leaving the cut.
/// The one maximum, the workspace of a stage, is `workspaceBetween`; the saved bytes
/// of a stage are `savedBetween` (values kept on both sides of a cut count twice).
/// A shared parameter counts in `params` once, at the first cut holding one of its
/// readers (the stage that owns it); a later stage reading it holds
/// `readParametersBetween` (the weight and its gradient).
/// Values or parameters several layers share (Problem::sharedSaved,
/// Problem::sharedParameters): each one's sharers and bytes, and per cut the
/// indices of those with sharers on both sides of it (all empty when there are none).
struct SharedAcrossCuts {
  std::vector<std::vector<int>> sharers;
  std::vector<double> bytes;
  std::vector<std::vector<int>> across;
};

struct CutLattice {
  std::vector<double> forward, backward, work, saved, params, weightGradient, inputs;
  std::vector<double> cutBytes;
  std::vector<int> size;
  std::vector<std::vector<int>> up; ///< cuts reachable by adding one layer

  bool isChain = true;
  std::vector<int> order;    ///< chain lattices: the layer order (cut i = order[0..i))
  std::vector<int> position; ///< chain lattices: position of each layer in `order`
  size_t words = 0;          ///< ideal lattices: 64-bit words per membership bitset
  std::vector<uint64_t> bits;

  size_t numCuts() const { return work.size(); }
  int emptyCut() const { return 0; }
  int fullCut() const { return static_cast<int>(work.size()) - 1; }
  bool contains(int cut, int layer) const;
  /// Layers of the difference B \ A (A ⊂ B), in increasing layer index.
  std::vector<int> layersBetween(int from, int to) const;
  /// The largest Layer::workspaceBytes among the layers of B \ A (0 when empty):
  /// O(log layers) on chains (a max tree over `order`), O(words + |B \ A|) on ideal
  /// lattices.
  double workspaceBetween(int from, int to) const;
  /// Saved bytes of the stage B \ A: saved[B] - saved[A], where a shared saved value
  /// counts once, at its first keeper, plus each value kept both in A and in B \ A
  /// (the stage keeps its own copy).
  double savedBetween(int from, int to) const;

  /// Bytes of the parameters that B \ A reads and A reads too: they belong to an
  /// earlier stage, and this one keeps a copy.
  double readParametersBetween(int from, int to) const;

  SharedAcrossCuts sharedSaved, sharedParameters;

  /// Chain lattices: a sparse table of the layers' workspace over positions, level j
  /// holding at i the largest of positions [i, i + 2^j) (workspaceLevels[0]: the
  /// layers'), so that any range's largest is two reads. Empty on ideal lattices and
  /// when no layer has a workspace.
  std::vector<std::vector<double>> workspaceLevels;
  /// Ideal lattices: the workspace of each layer. Empty on chain lattices and when no
  /// layer has a workspace.
  std::vector<double> layerWorkspace;
};

/// The prefixes of `order` (which must be a topological order of the problem).
CutLattice chainLattice(const Problem &problem, const std::vector<int> &order);

/// All downsets of the layer DAG, or nothing when there are more than `maxCuts`.
std::optional<CutLattice> idealLattice(const Problem &problem, size_t maxCuts);

} // namespace partitioner

#endif
