// Reader for the profiles people already have: PipeDream / DAPPLE `graph.txt`
// (one line per node with fwd/bwd ms, activation and parameter bytes, then edges).
#ifndef PARTITIONER_GRAPHTEXT_H
#define PARTITIONER_GRAPHTEXT_H

#include "partitioner/Problem.h"

#include <istream>
#include <string>

namespace partitioner {

/// Parses a graph.txt stream into a Problem (one layer per node, one tensor per node
/// output, platform/training left at their defaults). Nodes whose description starts
/// with "Input" are data sources and cost nothing (as in the reference evaluator).
/// Throws Error naming the line on malformed input, unknown nodes or duplicates.
Problem readGraphText(std::istream &in, const std::string &name);
Problem readGraphTextFile(const std::string &path);

/// Reads a problem from a path: `.json` files are problem JSON, others graph.txt.
Problem readProblemFile(const std::string &path);

} // namespace partitioner

#endif
