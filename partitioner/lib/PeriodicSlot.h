// Where a backward fits in a 1-periodic pattern: used by the periodic dynamic
// program (LatticeDp.cpp) and by the pattern behind the 1F1B orders
// (Schedule.cpp), so that both place a stage's backward the same way.
#ifndef PARTITIONER_LIB_PERIODICSLOT_H
#define PARTITIONER_LIB_PERIODICSLOT_H

#include <cmath>

namespace partitioner {

/// Smallest x >= earliest such that a backward of length b starting at x does not
/// overlap, modulo T = period, the stage's forward slot [forwardStart, forwardStart + f)
/// (docs/partitioner.md, "Schedules": each backward in the first slot that does not
/// overlap its forward modulo T).
inline double alignBackward(double earliest, double forwardStart, double f, double b,
                            double period) {
  const double relative = earliest - forwardStart;
  double r = std::fmod(relative, period);
  if (r < 0)
    r += period;
  const double eps = 1e-9 * period;
  if (r + eps >= f && r <= period - b + eps)
    return earliest;
  if (r < f)
    return earliest + (f - r);
  return earliest + (period - r) + f;
}

} // namespace partitioner

#endif // PARTITIONER_LIB_PERIODICSLOT_H
