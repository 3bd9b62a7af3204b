// Shared helpers of the partitioner tests: random instances and independent
// (brute-force) evaluation of contiguous splits.
#ifndef PARTITIONER_TEST_TESTUTIL_H
#define PARTITIONER_TEST_TESTUTIL_H

#include "partitioner/Error.h"
#include "partitioner/Problem.h"

#include <functional>
#include <random>
#include <string>
#include <vector>

namespace partitioner::testing {

/// A random chain: times in [0.1, 10], bytes in [0, 1e6], random platform memory.
Problem randomChain(std::mt19937 &rng, int layers, int gpus);

/// A random DAG of `layers` nodes (each node consumes 1-2 earlier nodes).
Problem randomDag(std::mt19937 &rng, int layers, int gpus);

/// Every composition of `n` into 1..maxParts positive parts.
std::vector<std::vector<int>> allCompositions(int n, int maxParts);

/// Directory of the reference profiles (may not exist).
std::string profilesDirectory();

} // namespace partitioner::testing

#endif
