// The algorithm interface: an algorithm is one file (lib/algorithms/X.cpp) defining a
// factory, plus one entry in lib/AlgorithmRegistry.cpp. It returns an allocation (and,
// for periodic schedules, per-stage in-flight limits) or a reason; the planner then
// schedules and simulates it, so every algorithm is judged by the same simulator.
#ifndef PARTITIONER_ALGORITHM_H
#define PARTITIONER_ALGORITHM_H

#include "partitioner/Allocation.h"
#include "partitioner/Bounds.h"
#include "partitioner/CutLattice.h"
#include "partitioner/Planner.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace partitioner {

struct PlanOptions;

/// Another plan an algorithm made, by another of its models.
struct AlternativePlan {
  Allocation allocation;
  double predictedPeriodMs = kInfinity;
  std::string notes;
  std::string model; ///< which of the algorithm's models made it, for the notes
};

struct AlgorithmOutput {
  std::optional<Allocation> allocation;
  std::string reason;                    ///< why there is no allocation
  double predictedPeriodMs = kInfinity;  ///< the algorithm's own estimate
  double provenLowerBoundMs = 0;         ///< exact algorithms: their own bound (ILP)
  std::string notes;                     ///< e.g. "DAG-aware cuts (812 downsets)"
  /// Schedule the allocation is meant for; empty = the problem's schedule.
  std::optional<ScheduleKind> schedule;
  /// The DPs: every DAG-convex split was open to the DP (a chain, or a DAG whose
  /// downsets were enumerated), so predictedPeriodMs is the optimum of its model.
  bool everySplit = false;
  /// Plans the algorithm made by its other models, close to `allocation` in
  /// simulation: the planner's boundary moves, a local search whose end depends on
  /// where it starts, start from them too when the algorithm's plan is chosen.
  std::vector<AlternativePlan> alternatives;
};

/// The ideal lattice (downsets) of one problem, built once for every algorithm of
/// a planning run that asks for it: enumerating a DAG's downsets up to the limit
/// is the same work for each (0.17 s on a 2,000-node DAG that has too many), and
/// the algorithms may ask from several threads at once.
class IdealLatticeCache {
public:
  explicit IdealLatticeCache(const Problem &problem) : problem_(problem) {}
  /// idealLattice(problem, maxCuts), built on the first call; nullptr when
  /// `problem` is not the cache's (an algorithm planning a changed copy) or
  /// `maxCuts` differs from the first call's.
  const std::optional<CutLattice> *find(const Problem &problem, size_t maxCuts);

private:
  const Problem &problem_;
  std::mutex mutex_;
  bool built_ = false;
  size_t maxCuts_ = 0;
  std::optional<CutLattice> lattice_;
};

struct AlgorithmContext {
  const PlanOptions &options;
  const LowerBounds &bounds;
  IdealLatticeCache *ideals = nullptr; ///< none: each algorithm builds its own
};

class Algorithm {
public:
  virtual ~Algorithm() = default;
  virtual std::string name() const = 0;
  /// One line: what it optimises and under which assumptions.
  virtual std::string summary() const = 0;
  /// Whether `best` runs it by default.
  virtual bool partOfBest() const { return true; }
  virtual AlgorithmOutput run(const Problem &problem, const AlgorithmContext &context) const = 0;
};

/// All registered algorithms, in the order `best` tries them.
const std::vector<std::unique_ptr<Algorithm>> &algorithmRegistry();
/// nullptr when unknown.
const Algorithm *findAlgorithm(const std::string &name);

// Factories, one per file under lib/algorithms/.
std::unique_ptr<Algorithm> makeUniformAlgorithm();
std::unique_ptr<Algorithm> makeParamsAlgorithm();
std::unique_ptr<Algorithm> makeBalancedAlgorithm();
std::unique_ptr<Algorithm> makePipeDreamAlgorithm();
std::unique_ptr<Algorithm> makeMadPipeAlgorithm();
std::unique_ptr<Algorithm> makeMadPipeSpanAlgorithm();
std::unique_ptr<Algorithm> makeInterleavedAlgorithm();
std::unique_ptr<Algorithm> makeIlpAlgorithm();
std::unique_ptr<Algorithm> makeGeneralAlgorithm();
std::unique_ptr<Algorithm> makeGeneralMovesAlgorithm();
std::unique_ptr<Algorithm> makeIlpGeneralAlgorithm();

/// A lower bound on `ilp`'s objective that its LP relaxation misses: the optimum
/// of the memory-aware min-max DP over every split with every link as fast as the
/// fastest (least latency, most bandwidth). 0 where it is no bound: GPUs of
/// several speeds, recomputation allowed, or too many downsets for the DP to see
/// every split.
double ilpMinMaxBoundMs(const Problem &problem, const AlgorithmContext &context);
/// What `ilp` plans for under 1F1B on links that take time: the span model (span
/// rows, each optimum simulated, a loop that cuts off those slower than planned),
/// or the min-max DPs' model alone (one solve, the tests' oracle of its rows).
enum class IlpLinks { Spans, MinMax };
/// `ilp` itself; without `minMaxBound` CBC proves its optimum unaided (the tests'
/// oracle of the bound).
AlgorithmOutput runIlp(const Problem &problem, const AlgorithmContext &context,
                       bool minMaxBound, IlpLinks links = IlpLinks::Spans);


} // namespace partitioner

#endif
