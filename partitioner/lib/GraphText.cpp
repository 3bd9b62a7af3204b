// PipeDream / DAPPLE graph.txt reader.
#include "partitioner/Problem.h"
#include "partitioner/Error.h"
#include "partitioner/Problem.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

namespace partitioner {

namespace {

std::string trim(const std::string &text) {
  size_t begin = 0, end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin])))
    ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])))
    --end;
  return text.substr(begin, end - begin);
}

std::vector<std::string> splitOn(const std::string &text, const std::string &separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    if (at == std::string::npos) {
      parts.push_back(text.substr(start));
      return parts;
    }
    parts.push_back(text.substr(start, at - start));
    start = at + separator.size();
  }
}

double parseNumber(const std::string &value, const std::string &where) {
  std::string text = trim(value);
  // Lists such as "[602112; 4004]" (several outputs) are summed.
  if (!text.empty() && text.front() == '[') {
    if (text.back() != ']')
      throw Error(where + ": unterminated list '" + text + "'");
    double total = 0;
    for (const std::string &item : splitOn(text.substr(1, text.size() - 2), ";"))
      if (!trim(item).empty())
        total += parseNumber(item, where);
    return total;
  }
  size_t used = 0;
  double result = 0;
  try {
    result = std::stod(text, &used);
  } catch (const std::exception &) {
    throw Error(where + ": '" + text + "' is not a number");
  }
  if (used != text.size())
    throw Error(where + ": '" + text + "' is not a number");
  if (!(result >= 0))
    throw Error(where + ": '" + text + "' must be non-negative");
  return result;
}

/// Numeric suffix of "node12" (for PipeDream's deterministic order), without
/// leading zeros, as text: ids of any length compare exactly (no overflow).
/// Empty when the id does not end in a digit.
std::string nodeNumber(const std::string &id) {
  size_t i = id.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(id[i - 1])))
    --i;
  if (i == id.size())
    return "";
  while (i + 1 < id.size() && id[i] == '0')
    ++i;
  return id.substr(i);
}

bool numberLess(const std::string &a, const std::string &b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

} // namespace

namespace {
Problem parseGraphText(std::istream &in, const std::string &name) {
  struct NodeLine {
    std::string id, description;
    double forward = 0, backward = 0, activation = 0, parameters = 0;
    int line = 0;
  };
  std::vector<NodeLine> nodes;
  std::vector<std::pair<std::string, std::string>> edges;
  std::vector<int> edgeLines;
  std::unordered_map<std::string, size_t> nodeIndex;
  std::string raw;
  int lineNumber = 0;
  while (std::getline(in, raw)) {
    ++lineNumber;
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#')
      continue;
    const std::string where = name + ":" + std::to_string(lineNumber);
    // Node ids become layer names and JSON keys: they must be text.
    if (!isValidUtf8(line))
      throw Error(where + ": the line is not valid UTF-8: '" + printableName(line.substr(0, 80)) +
                  "'");
    std::vector<std::string> parts = splitOn(line, " -- ");
    if (parts.size() == 2) {
      edges.emplace_back(trim(parts[0]), trim(parts[1]));
      edgeLines.push_back(lineNumber);
      continue;
    }
    if (parts.size() < 3)
      throw Error(where + ": expected 'nodeA -- nodeB' or 'nodeX -- description -- "
                          "forward_compute_time=..., ...', got '" + line + "'");
    NodeLine node;
    node.line = lineNumber;
    node.id = trim(parts.front());
    for (size_t i = 1; i + 1 < parts.size(); ++i)
      node.description += (i > 1 ? " -- " : "") + parts[i];
    node.description = trim(node.description);
    std::map<std::string, std::string> fields;
    for (const std::string &field : splitOn(parts.back(), ", ")) {
      size_t eq = field.find('=');
      if (eq == std::string::npos)
        throw Error(where + ": field '" + trim(field) + "' of node " + node.id + " has no '='");
      fields[trim(field.substr(0, eq))] = field.substr(eq + 1);
    }
    auto get = [&](const char *key) {
      auto it = fields.find(key);
      if (it == fields.end())
        throw Error(where + ": node " + node.id + " has no " + key);
      return parseNumber(it->second, where + " (" + node.id + "." + key + ")");
    };
    node.forward = get("forward_compute_time");
    node.backward = get("backward_compute_time");
    node.activation = get("activation_size");
    node.parameters = get("parameter_size");
    if (node.id.empty())
      throw Error(where + ": a node line needs an id before ' -- '");
    if (nodes.size() >= kMaxLayers)
      throw Error(where + ": more than " + std::to_string(kMaxLayers) + " nodes");
    if (nodeIndex.count(node.id))
      throw Error(where + ": node " + node.id + " is defined twice (first on line " +
                  std::to_string(nodes[nodeIndex[node.id]].line) + ")");
    nodeIndex[node.id] = nodes.size();
    nodes.push_back(node);
  }
  if (nodes.empty())
    throw Error(name + ": no node lines found (is this a graph.txt profile?)");
  // Layer order: by node number when every id has one (PipeDream numbers nodes in
  // creation order), else file order.
  std::vector<size_t> order(nodes.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  bool numbered = std::all_of(nodes.begin(), nodes.end(),
                              [](const NodeLine &n) { return !nodeNumber(n.id).empty(); });
  if (numbered)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return numberLess(nodeNumber(nodes[a].id), nodeNumber(nodes[b].id));
    });
  Problem problem;
  problem.name = name;
  std::unordered_map<std::string, int> layerOf;
  for (size_t i : order) {
    const NodeLine &node = nodes[i];
    Layer layer;
    layer.name = node.id;
    layer.nodeIds = {node.id};
    // Input nodes stand for data loading; like the reference evaluator, they are free.
    const bool input = node.description.rfind("Input", 0) == 0;
    layer.forwardMs = input ? 0 : node.forward;
    layer.backwardMs = input ? 0 : node.backward;
    layer.parameterBytes = input ? 0 : node.parameters;
    layer.savedBytes = input ? 0 : node.activation;
    layer.inputBytes = input ? node.activation : 0; // the data a recomputing stage keeps
    layer.outputBytes = node.activation;
    layerOf[node.id] = static_cast<int>(problem.layers.size());
    problem.layers.push_back(layer);
  }
  std::vector<Tensor> tensors(problem.layers.size());
  for (size_t l = 0; l < tensors.size(); ++l) {
    tensors[l].producer = static_cast<int>(l);
    tensors[l].bytes = problem.layers[l].outputBytes;
  }
  for (size_t e = 0; e < edges.size(); ++e) {
    const std::string where = name + ":" + std::to_string(edgeLines[e]);
    auto from = layerOf.find(edges[e].first);
    auto to = layerOf.find(edges[e].second);
    if (from == layerOf.end())
      throw Error(where + ": edge from unknown node " + edges[e].first);
    if (to == layerOf.end())
      throw Error(where + ": edge to unknown node " + edges[e].second);
    if (from->second == to->second)
      throw Error(where + ": self loop on node " + edges[e].first);
    tensors[static_cast<size_t>(from->second)].consumers.push_back(to->second);
  }
  for (Tensor &tensor : tensors)
    if (!tensor.consumers.empty())
      problem.tensors.push_back(tensor);
  if (problem.tensors.empty() && problem.layers.size() > 1)
    throw Error(name + ": " + std::to_string(problem.layers.size()) +
                " nodes but no edges; a profile must connect its nodes");
  orThrow(problem.finalize());
  return problem;
}
} // namespace

Expected<Problem> readGraphText(std::istream &in, const std::string &name) {
  return catchErrors([&] { return parseGraphText(in, name); });
}

Expected<Problem> readProblemFile(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return Expected<Problem>::failure("cannot open '" + path + "'");
  if (path.size() >= 5 && path.substr(path.size() - 5) == ".json")
    return readProblemJson(in, path);
  return readGraphText(in, path);
}

} // namespace partitioner
