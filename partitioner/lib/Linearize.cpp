// Topological orders, cut sets and downstream critical paths of the layer DAG.
#include "partitioner/Linearize.h"
#include "partitioner/Error.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace partitioner {

std::vector<std::vector<int>> successorLists(const Problem &problem) {
  std::vector<std::vector<int>> successors(problem.layers.size());
  for (const Tensor &tensor : problem.tensors)
    for (int consumer : tensor.consumers)
      successors[static_cast<size_t>(tensor.producer)].push_back(consumer);
  for (auto &list : successors) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return successors;
}

std::vector<std::vector<int>> predecessorLists(const Problem &problem) {
  std::vector<std::vector<int>> predecessors(problem.layers.size());
  for (const Tensor &tensor : problem.tensors)
    for (int consumer : tensor.consumers)
      predecessors[static_cast<size_t>(consumer)].push_back(tensor.producer);
  for (auto &list : predecessors) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return predecessors;
}

std::vector<int> topologicalOrder(const Problem &problem) {
  const size_t count = problem.layers.size();
  auto successors = successorLists(problem);
  std::vector<int> indegree(count, 0);
  for (const auto &list : successors)
    for (int v : list)
      ++indegree[static_cast<size_t>(v)];
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (size_t v = 0; v < count; ++v)
    if (indegree[v] == 0)
      ready.push(static_cast<int>(v));
  std::vector<int> order;
  order.reserve(count);
  while (!ready.empty()) {
    int u = ready.top();
    ready.pop();
    order.push_back(u);
    for (int v : successors[static_cast<size_t>(u)])
      if (--indegree[static_cast<size_t>(v)] == 0)
        ready.push(v);
  }
  if (order.size() == count)
    return order;
  // Walk predecessors inside the unsorted remainder until a layer repeats: a cycle.
  auto predecessors = predecessorLists(problem);
  int start = -1;
  for (size_t v = 0; v < count; ++v)
    if (indegree[v] > 0) {
      start = static_cast<int>(v);
      break;
    }
  std::vector<int> seenAt(count, -1);
  std::vector<int> path;
  int current = start;
  while (seenAt[static_cast<size_t>(current)] < 0) {
    seenAt[static_cast<size_t>(current)] = static_cast<int>(path.size());
    path.push_back(current);
    for (int p : predecessors[static_cast<size_t>(current)])
      if (indegree[static_cast<size_t>(p)] > 0) {
        current = p;
        break;
      }
  }
  std::vector<int> cycle(path.begin() + seenAt[static_cast<size_t>(current)], path.end());
  std::reverse(cycle.begin(), cycle.end());
  std::string text;
  for (int v : cycle)
    text += problem.layers[static_cast<size_t>(v)].name + " -> ";
  text += problem.layers[static_cast<size_t>(cycle.front())].name;
  throw Error("the graph has a cycle: " + text);
}

std::vector<double> cutBytesAlong(const Problem &problem, const std::vector<int> &order) {
  const size_t count = order.size();
  std::vector<int> position(problem.layers.size(), -1);
  for (size_t i = 0; i < count; ++i)
    position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  std::vector<double> delta(count + 1, 0.0);
  for (const Tensor &tensor : problem.tensors) {
    if (tensor.consumers.empty())
      continue;
    int from = position[static_cast<size_t>(tensor.producer)];
    int last = from;
    for (int consumer : tensor.consumers)
      last = std::max(last, position[static_cast<size_t>(consumer)]);
    // The tensor crosses the cuts after positions from .. last-1.
    delta[static_cast<size_t>(from)] += tensor.bytes;
    delta[static_cast<size_t>(last)] -= tensor.bytes;
  }
  std::vector<double> cut(count, 0.0);
  double running = 0;
  for (size_t i = 0; i < count; ++i) {
    running += delta[i];
    cut[i] = std::max(0.0, running);
  }
  if (count > 0)
    cut[count - 1] = 0;
  return cut;
}

std::vector<double> downstreamWork(const Problem &problem) {
  std::vector<int> order = topologicalOrder(problem);
  auto successors = successorLists(problem);
  std::vector<double> down(problem.layers.size(), 0.0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    double best = 0;
    for (int v : successors[static_cast<size_t>(*it)])
      best = std::max(best, down[static_cast<size_t>(v)]);
    down[static_cast<size_t>(*it)] = best + problem.layers[static_cast<size_t>(*it)].workMs();
  }
  return down;
}

} // namespace partitioner
