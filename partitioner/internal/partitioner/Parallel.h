// Work spread over threads with results in a fixed order, so that what the
// planner returns does not depend on how many threads computed it.
#ifndef PARTITIONER_PARALLEL_H
#define PARTITIONER_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace partitioner {

/// Stages x micro-batches of a plan from which the local searches (boundary and
/// block moves) simulate their candidates on threads: a simulation of about a
/// millisecond and more, which pays for starting them.
constexpr int kThreadedSimulationWork = 1024;

/// The threads `threads` asks for: itself when positive, else one per core.
inline int threadCount(int threads) {
  return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

/// fn(0), ..., fn(count - 1) on up to threadCount(threads) threads at once, the
/// results in index order. The exception of the lowest index that threw is
/// thrown here, once every thread has stopped.
template <class T, class F>
std::vector<T> mapOnThreads(std::size_t count, int threads, F fn) {
  std::vector<T> results(count);
  const std::size_t workers =
      std::min(count, static_cast<std::size_t>(threadCount(threads)));
  if (workers <= 1) {
    for (std::size_t i = 0; i < count; ++i)
      results[i] = fn(i);
    return results;
  }
  std::vector<std::exception_ptr> errors(count);
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (std::size_t i = next++; i < count; i = next++) {
        try {
          results[i] = fn(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      }
    });
  for (std::thread &thread : pool)
    thread.join();
  for (const std::exception_ptr &error : errors)
    if (error)
      std::rethrow_exception(error);
  return results;
}

} // namespace partitioner

#endif // PARTITIONER_PARALLEL_H
