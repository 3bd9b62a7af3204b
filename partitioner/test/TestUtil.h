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

/// Gives about half of the layers a workspace in [0, 2e6] bytes (held while the
/// layer runs; a stage holds the largest of its layers').
void addRandomWorkspace(std::mt19937 &rng, Problem &problem);

/// Adds one to three values kept by two or three random layers each (bytes in
/// [0, 1e6]; each stage holding one of them keeps a copy).
void addRandomSharedSaved(std::mt19937 &rng, Problem &problem);

/// Adds one or two trainable parameters read by two or three random layers each
/// (bytes in [0, 1e6]; the first stage reading one owns it, every other GPU
/// reading it keeps the weight and its gradient).
void addRandomSharedParameters(std::mt19937 &rng, Problem &problem);

/// Parameter bytes of each stage of a split (`stages[s]`: its layers, stages in
/// pipeline order, stage s on GPU gpuOfStage[s]), from Problem::sharedParameters'
/// definition: `owned`, its layers' own and the shared ones it reads first (x
/// stateMultiplier); `read`, the shared ones an earlier stage owns, on the first
/// stage of each other GPU reading them (x readerStateMultiplier).
struct StageParameters {
  double owned = 0, read = 0;
};
std::vector<StageParameters> stageParameters(const Problem &problem,
                                             const std::vector<std::vector<int>> &stages,
                                             const std::vector<int> &gpuOfStage);
/// The same with one GPU per stage.
std::vector<StageParameters> stageParameters(const Problem &problem,
                                             const std::vector<std::vector<int>> &stages);

/// Bytes a stage made of `layers` keeps per micro-batch: its layers' saved bytes
/// and one copy of each shared saved value one of them keeps.
double stageSavedBytes(const Problem &problem, const std::vector<int> &layers);

/// The largest workspace among `layers`: what a stage (or a GPU) of them holds.
double largestWorkspace(const Problem &problem, const std::vector<int> &layers);

/// Every composition of `n` into 1..maxParts positive parts.
std::vector<std::vector<int>> allCompositions(int n, int maxParts);

/// `trials` times PARTITIONER_TEST_TRIAL_SCALE, a fraction in (0, 1] (default 1),
/// at least min(trials, 10). scripts/sanitize.sh sets it for the longest randomized tests, whose
/// trials cost about ten times more under the sanitizers; the plain build runs
/// them all.
int scaledTrials(int trials);

/// Directory of the reference profiles (may not exist).
std::string profilesDirectory();

} // namespace partitioner::testing

#endif
