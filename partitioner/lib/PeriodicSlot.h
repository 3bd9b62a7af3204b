// Where a backward and a transfer fit in a 1-periodic pattern: used by the periodic
// dynamic program (LatticeDp.cpp) and by the pattern behind the 1F1B orders
// (Schedule.cpp), so that both place a stage's backward and its transfers the same way.
#ifndef PARTITIONER_LIB_PERIODICSLOT_H
#define PARTITIONER_LIB_PERIODICSLOT_H

#include <cmath>
#include <cstddef>
#include <limits>

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

/// x modulo period, in [0, period).
inline double wrapToPeriod(double x, double period) {
  const double r = std::fmod(x, period);
  return r < 0 ? r + period : r;
}

/// A transfer holding a port modulo the period: [start, start + length), start in [0, T).
struct PortSlot {
  double start = 0;
  double length = 0;
};

inline PortSlot portSlotAt(double t, double length, double period) {
  return {wrapToPeriod(t, period), length};
}

/// Whether [t, t + length) overlaps none of `slots` modulo `period`.
inline bool portsFreeAt(const PortSlot *slots, std::size_t count, double t, double length,
                        double period) {
  const double x = wrapToPeriod(t, period), eps = 1e-9 * period;
  for (std::size_t i = 0; i < count; ++i)
    if (wrapToPeriod(slots[i].start - x, period) + eps < length ||
        wrapToPeriod(x - slots[i].start, period) + eps < slots[i].length)
      return false;
  return true;
}

/// The earliest start >= t at which a transfer of `length` overlaps none of `slots`
/// (those of its sender's send port and of its receiver's receive port) modulo
/// `period`, or infinity when there is none. The candidates are t and the end of
/// each slot after t.
inline double earliestFreeSlot(const PortSlot *slots, std::size_t count, double t, double length,
                               double period) {
  const double none = std::numeric_limits<double>::infinity();
  if (length > period * (1 + 1e-9))
    return none;
  if (portsFreeAt(slots, count, t, length, period))
    return t;
  double best = none;
  for (std::size_t i = 0; i < count; ++i) {
    const double candidate = t + wrapToPeriod(slots[i].start + slots[i].length - t, period);
    if (candidate < best && portsFreeAt(slots, count, candidate, length, period))
      best = candidate;
  }
  return best;
}

} // namespace partitioner

#endif // PARTITIONER_LIB_PERIODICSLOT_H
