// Small helpers shared by the CBC-based algorithms (ilp, ilp-general).
#ifndef PARTITIONER_ALGORITHMS_CBCUTIL_H
#define PARTITIONER_ALGORITHMS_CBCUTIL_H

#include <coin/Cbc_C_Interface.h>

#include <string>
#include <vector>

namespace partitioner::detail {

/// Gives CBC a starting solution: the named columns with their values.
inline void setMipStart(Cbc_Model *model, const std::vector<std::string> &names,
                        const std::vector<double> &values) {
  std::vector<const char *> pointers;
  pointers.reserve(names.size());
  for (const std::string &name : names)
    pointers.push_back(name.c_str());
  Cbc_setMIPStart(model, static_cast<int>(names.size()), pointers.data(), values.data());
}

/// The solution after Cbc_solve, or null when CBC found none (proven optimal
/// or at least one saved solution counts).
inline const double *solutionOf(Cbc_Model *model) {
  const double *solution = Cbc_getColSolution(model);
  if ((!Cbc_isProvenOptimal(model) && Cbc_numberSavedSolutions(model) < 1) || !solution)
    return nullptr;
  return solution;
}

} // namespace partitioner::detail

#endif
