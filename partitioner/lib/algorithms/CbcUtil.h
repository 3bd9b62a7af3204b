// Small helpers shared by the CBC-based algorithms (ilp, ilp-general).
#ifndef PARTITIONER_ALGORITHMS_CBCUTIL_H
#define PARTITIONER_ALGORITHMS_CBCUTIL_H

#include "partitioner/Problem.h"

#include <coin/Cbc_C_Interface.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <stdexcept>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

namespace partitioner::detail {

/// An algorithm's time limit, counted in wall-clock time from its start, so that
/// building the model and the warm start come out of the same budget as CBC.
class Deadline {
public:
  explicit Deadline(double seconds) : seconds_(seconds), start_(Clock::now()) {}
  double limitSeconds() const { return seconds_; }
  double remainingSeconds() const {
    return seconds_ - std::chrono::duration<double>(Clock::now() - start_).count();
  }

private:
  using Clock = std::chrono::steady_clock;
  double seconds_;
  Clock::time_point start_;
};

/// The MIPs do not model recomputation: with it allowed, what they prove holds
/// only without it (" without recomputation", or "" under RecomputePolicy::None).
inline std::string withoutRecomputation(const Problem &problem) {
  return problem.training.recompute == RecomputePolicy::None
             ? ""
             : " without recomputation (which the MIP does not model)";
}

/// Gives CBC what is left of `deadline`, less a tenth of the limit. CBC counts
/// CPU time unless told otherwise, and on a loaded machine CPU time runs slower
/// than the clock (a 10 s limit took 18.8 s on a 2-core machine shared with a
/// build). Its search stops at the limit, but the root node does not always
/// look at the clock and the clean-up after the stop (final LP solves, undoing
/// the preprocessing) comes on top: 0.2 to 1.8 s on BERT's 1,386 binaries on
/// that machine, which the tenth held back covers for limits of 10 s and more.
inline void setTimeLimit(Cbc_Model *model, const Deadline &deadline) {
  Cbc_setParameter(model, "timeMode", "elapsed");
  // CBC's preprocessing (CglPreProcess) crashes in postProcess when the time
  // limit stops the search it prepared: a SEGV under load or the sanitizers,
  // `pipe-opt moe.onnx --pipeline-stages=4 --time-limit=1`. Our models are
  // small; the search runs on them as they are.
  Cbc_setParameter(model, "preprocess", "off");
  Cbc_setMaximumSeconds(
      model, std::max(0.01, deadline.remainingSeconds() - 0.1 * deadline.limitSeconds()));
}

/// OpenBLAS limited to one thread while it lives, where the process has it.
/// CBC's LP solver factorises through LAPACK, and on our small models each call
/// is tiny: OpenBLAS's other threads then spin in sched_yield between calls. On
/// the 1,000 small MIPs of IlpGeneralFindsTheFastestSimulatedMapOfItsModel that
/// was 47 s of CPU for 22 s of wall time; on one thread, 19 s for 19 s. Found
/// with dlsym, so nothing links OpenBLAS for it; the count is restored after.
class OneBlasThread {
public:
  OneBlasThread() {
    get_ = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    set_ = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (get_ && set_ && (saved_ = get_()) > 1)
      set_(1);
  }
  ~OneBlasThread() {
    if (get_ && set_ && saved_ > 1)
      set_(saved_);
  }
  OneBlasThread(const OneBlasThread &) = delete;
  OneBlasThread &operator=(const OneBlasThread &) = delete;

private:
  int (*get_)() = nullptr;
  void (*set_)(int) = nullptr;
  int saved_ = 1;
};

/// Solves `model` within what is left of `deadline`. CBC keeps process-wide
/// state: two solves at once in one process (two threads planning) interfere,
/// one of them stopping "without a solution" long before its limit. Solves
/// therefore take turns; the time limit is set once this one's turn has come,
/// so that waiting does not count against the search.
inline void solve(Cbc_Model *model, const Deadline &deadline) {
  static std::mutex oneSolveAtATime;
  std::lock_guard<std::mutex> lock(oneSolveAtATime);
  const OneBlasThread oneThread;
  setTimeLimit(model, deadline);
  Cbc_solve(model);
}

/// Gives CBC a starting solution: the named columns with their values.
inline void setMipStart(Cbc_Model *model, const std::vector<std::string> &names,
                        const std::vector<double> &values) {
  std::vector<const char *> pointers;
  pointers.reserve(names.size());
  for (const std::string &name : names)
    pointers.push_back(name.c_str());
  Cbc_setMIPStart(model, static_cast<int>(names.size()), pointers.data(), values.data());
}

/// A MIP gathered row by row and handed to CBC column by column: Cbc_addRow on a
/// growing model copies the whole matrix each time (3.8 s for the rows of `ilp` on
/// DenseNet-121 at 16 GPUs, 430 layers, against 1.6 s this way).
class MipBuilder {
public:
  int addColumn(const std::string &name, double lower, double upper, bool integer,
                double objective) {
    names_.push_back(name);
    lower_.push_back(lower);
    upper_.push_back(upper);
    integer_.push_back(integer);
    objective_.push_back(objective);
    columns_.emplace_back();
    return static_cast<int>(names_.size()) - 1;
  }
  /// sense: 'L' (<=), 'G' (>=) or 'E' (=); each column once.
  void addRow(const std::vector<int> &columns, const std::vector<double> &values, char sense,
              double rhs) {
    if (columns.size() != values.size() || (sense != 'L' && sense != 'G' && sense != 'E'))
      throw std::logic_error("MipBuilder::addRow: malformed row");
    for (int column : columns)
      if (column < 0 || column >= numColumns())
        throw std::logic_error("MipBuilder::addRow: no column " + std::to_string(column));
    const int row = static_cast<int>(rowLower_.size());
    for (size_t i = 0; i < columns.size(); ++i)
      columns_[static_cast<size_t>(columns[i])].push_back({row, values[i]});
    rowLower_.push_back(sense == 'L' ? -kUnbounded : rhs);
    rowUpper_.push_back(sense == 'G' ? kUnbounded : rhs);
  }
  int numColumns() const { return static_cast<int>(names_.size()); }
  double lower(int column) const { return lower_.at(static_cast<size_t>(column)); }
  double upper(int column) const { return upper_.at(static_cast<size_t>(column)); }
  /// Loads the columns and rows into an empty `model`: the rows first, empty, then
  /// each column with its entries. (Cbc_loadProblem, faster still, left CBC 2.10's
  /// C interface in a state its presolve crashed on for `ilp-general`'s models.)
  void load(Cbc_Model *model) const {
    for (size_t r = 0; r < rowLower_.size(); ++r) {
      const char sense = rowLower_[r] == -kUnbounded ? 'L' : rowUpper_[r] == kUnbounded ? 'G' : 'E';
      Cbc_addRow(model, "", 0, nullptr, nullptr, sense,
                 sense == 'G' ? rowLower_[r] : rowUpper_[r]);
    }
    std::vector<int> rows;
    std::vector<double> values;
    for (int c = 0; c < numColumns(); ++c) {
      rows.clear();
      values.clear();
      for (const auto &[row, coefficient] : columns_[static_cast<size_t>(c)]) {
        rows.push_back(row);
        values.push_back(coefficient);
      }
      Cbc_addCol(model, names_[static_cast<size_t>(c)].c_str(), lower_[static_cast<size_t>(c)],
                 upper_[static_cast<size_t>(c)], objective_[static_cast<size_t>(c)],
                 integer_[static_cast<size_t>(c)] ? 1 : 0, static_cast<int>(rows.size()),
                 rows.data(), values.data());
    }
  }

private:
  static constexpr double kUnbounded = std::numeric_limits<double>::max();
  std::vector<std::string> names_;
  std::vector<double> lower_, upper_, objective_;
  std::vector<bool> integer_;
  std::vector<std::vector<std::pair<int, double>>> columns_;
  std::vector<double> rowLower_, rowUpper_;
};

/// A linear row being written: terms merged by column, and a constant that moves to
/// the right-hand side.
class MipRow {
public:
  void add(int column, double coefficient) {
    if (coefficient != 0)
      terms_[column] += coefficient;
  }
  double constant = 0;
  /// Adds `factor` times `other` (its terms and its constant).
  void add(const MipRow &other, double factor) {
    for (const auto &[column, coefficient] : other.terms_)
      add(column, factor * coefficient);
    constant += factor * other.constant;
  }
  /// The row's largest value over the columns' bounds in `mip` (with its constant).
  double largest(const MipBuilder &mip) const {
    double value = constant;
    for (const auto &[column, coefficient] : terms_)
      value += coefficient * (coefficient > 0 ? mip.upper(column) : mip.lower(column));
    return value;
  }
  void addTo(MipBuilder &mip, char sense, double rhs) const {
    std::vector<int> columns;
    std::vector<double> values;
    for (const auto &[column, value] : terms_)
      if (value != 0) {
        columns.push_back(column);
        values.push_back(value);
      }
    mip.addRow(columns, values, sense, rhs - constant);
  }

private:
  std::map<int, double> terms_;
};

/// The solution after Cbc_solve, or null when CBC found none (proven optimal
/// or at least one saved solution counts).
inline const double *solutionOf(Cbc_Model *model) {
  const double *solution = Cbc_getColSolution(model);
  if ((!Cbc_isProvenOptimal(model) && Cbc_numberSavedSolutions(model) < 1) || !solution)
    return nullptr;
  return solution;
}

/// What CBC proved of a solution of value `objective`: "CBC: optimal" (the lower
/// bound is the objective), or "CBC: stopped by its limit, bound B ms, gap G %"
/// (the lower bound is `bound`, the best CBC proved).
inline std::string cbcOutcome(Cbc_Model *model, double objective, double bound,
                              double &provenLowerBoundMs) {
  if (Cbc_isProvenOptimal(model)) {
    provenLowerBoundMs = objective;
    return "CBC: optimal";
  }
  provenLowerBoundMs = bound;
  char text[128];
  std::snprintf(text, sizeof text, "CBC: stopped by its limit, bound %.3f ms, gap %.3f %%", bound,
                bound > 0 ? 100 * (objective / bound - 1) : 0.0);
  return text;
}

} // namespace partitioner::detail

#endif
