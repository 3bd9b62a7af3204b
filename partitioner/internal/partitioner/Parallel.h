// Work spread over threads with results in a fixed order, so that what the
// planner returns does not depend on how many threads computed it.
#ifndef PARTITIONER_PARALLEL_H
#define PARTITIONER_PARALLEL_H

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
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
/// results in index order; ready(i, result) runs on the calling thread for each i
/// in index order, as soon as fn(0..i) are done (to report progress while the
/// rest runs). The first exception in index order, of fn or of ready, is thrown
/// here once every thread has stopped; no ready call follows it.
template <class T, class F, class Ready>
std::vector<T> mapOnThreads(std::size_t count, int threads, F fn, Ready ready) {
  std::vector<T> results(count);
  std::vector<std::exception_ptr> errors(count);
  std::exception_ptr first;
  auto compute = [&](std::size_t i) {
    try {
      results[i] = fn(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  auto deliver = [&](std::size_t i) {
    if (!first && errors[i])
      first = errors[i];
    if (!first) {
      try {
        ready(i, results[i]);
      } catch (...) {
        first = std::current_exception();
      }
    }
  };
  const std::size_t workers =
      std::min(count, static_cast<std::size_t>(threadCount(threads)));
  if (workers <= 1) {
    for (std::size_t i = 0; i < count && !first; ++i) {
      compute(i);
      deliver(i);
    }
  } else {
    std::vector<char> done(count, 0);
    std::mutex mutex;
    std::condition_variable changed;
    std::atomic<std::size_t> next{0};
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (std::size_t i = next++; i < count; i = next++) {
          compute(i);
          std::lock_guard<std::mutex> lock(mutex);
          done[i] = 1;
          changed.notify_all();
        }
      });
    for (std::size_t i = 0; i < count; ++i) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return done[i] != 0; });
      }
      deliver(i);
    }
    for (std::thread &thread : pool)
      thread.join();
  }
  if (first)
    std::rethrow_exception(first);
  return results;
}

/// The same without a ready callback.
template <class T, class F>
std::vector<T> mapOnThreads(std::size_t count, int threads, F fn) {
  return mapOnThreads<T>(count, threads, fn, [](std::size_t, const T &) {});
}

} // namespace partitioner

#endif // PARTITIONER_PARALLEL_H
