// The MIP algorithms (ilp, ilp-general) in a partitioner built without CBC
// (PIPE_WITH_CBC=OFF, or coinor-libcbc-dev missing at configure time): they
// keep their names, so that `--algo ilp` and `best` say what is missing
// instead of failing as unknown, and return no allocation with that reason.
#include "partitioner/Algorithm.h"
#include "partitioner/Bounds.h"

namespace partitioner {
namespace {

class UnavailableMip : public Algorithm {
public:
  UnavailableMip(std::string algorithm, std::string what)
      : algorithm(std::move(algorithm)), what(std::move(what)) {}
  std::string name() const override { return algorithm; }
  std::string summary() const override { return what + " [not built: no CBC]"; }
  AlgorithmOutput run(const Problem &, const AlgorithmContext &) const override {
    AlgorithmOutput output;
    output.reason = algorithm + ": unavailable: this build has no MIP solver (CBC, Debian's "
                                "coinor-libcbc-dev, was not found when it was configured)";
    return output;
  }

private:
  std::string algorithm, what;
};

} // namespace

bool haveMipSolver() { return false; }

GeneralAllocationBound generalAllocationBound(const Problem &, double lowerMs, double, double) {
  GeneralAllocationBound result;
  result.periodMs = lowerMs;
  result.notes = "not computed: this build has no MIP solver (CBC)";
  return result;
}

// The tests' entry points (they skip without a MIP solver, but still link).
double ilpMinMaxBoundMs(const Problem &, const AlgorithmContext &) { return 0; }
AlgorithmOutput runIlp(const Problem &problem, const AlgorithmContext &context, bool, IlpLinks) {
  return makeIlpAlgorithm()->run(problem, context);
}

std::unique_ptr<Algorithm> makeIlpAlgorithm() {
  return std::make_unique<UnavailableMip>("ilp", "exact MIP over contiguous allocations");
}

std::unique_ptr<Algorithm> makeIlpGeneralAlgorithm() {
  return std::make_unique<UnavailableMip>("ilp-general", "exact MIP over general allocations");
}

} // namespace partitioner
