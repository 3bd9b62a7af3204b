// Linearisation of a layer DAG into a chain: topological orders, exact cut sets
// (a tensor crosses a cut once, whatever its number of consumers behind it) and the
// downstream critical path of every layer.
#ifndef PARTITIONER_LINEARIZE_H
#define PARTITIONER_LINEARIZE_H

#include "partitioner/Problem.h"

#include <vector>

namespace partitioner {

/// Kahn's algorithm, ties broken by layer index. Throws Error naming the layers of a
/// cycle when the graph has one. O(layers + edges).
std::vector<int> topologicalOrder(const Problem &problem);

/// c(i) for each position i of `order`: bytes of the tensors produced at or before
/// position i and consumed after it (docs/partitioner.md, "Layers and tensors").
/// O(layers + edges).
std::vector<double> cutBytesAlong(const Problem &problem, const std::vector<int> &order);

/// For each layer, the largest fwd+bwd work of a path from it to a sink, itself
/// included: the shortest possible F(l)-start to B(l)-end span on one GPU of speed 1.
std::vector<double> downstreamWork(const Problem &problem);

/// Successor / predecessor layer lists derived from the tensors.
std::vector<std::vector<int>> successorLists(const Problem &problem);
std::vector<std::vector<int>> predecessorLists(const Problem &problem);

} // namespace partitioner

#endif
