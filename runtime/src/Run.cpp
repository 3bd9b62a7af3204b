//===- Run.cpp - running rank programs: threads, or one rank of a world ----===//
//
// The life of a rank in a run: set-up, a barrier (the clock starts there), the
// steps, a barrier, the check that no message was left unreceived, the wait
// for its own sends to leave. In-process runs give each rank a thread; the
// first failure stops the hub, every other rank unwinds at its next wait or
// call, and the failure's message is the run's.
//
//===----------------------------------------------------------------------===//
#include "Run.h"

#include "Internal.h"
#include "Rank.h"
#include "ThreadTransport.h"
#include "cpu/KernelSupport.h"

#include <condition_variable>
#include <mutex>
#include <thread>

#include <cstring>
#include <pthread.h>
#include <sched.h>

namespace piperun {

namespace {

/// Barriers wait twice the receive timeout and 5 s more, so that a rank stuck in
/// a receive fails first and its message names the peer and the tag: under MPI
/// its MPI_Abort must also reach the rank waiting in the barrier, which took
/// over a second on a loaded 2-core machine (the waiting rank then reported its
/// own timeout as a second error).
double barrierTimeout(const pipe_rank *r) { return 2 * r->settings.timeoutSeconds + 5; }

void runBody(pipe_rank *r, const RankProgram &program, int64_t steps, const RunHooks &hooks) {
  Transport &transport = *r->transport;
  program.setup(r);
  if (r->inStep)
    fail(r, "pipe_program_setup began a step");
  if (!transport.barrier(barrierTimeout(r)))
    fail(r, "the other ranks did not finish their set-up within %g s", barrierTimeout(r));
  r->epoch = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    program.step(r);
    if (r->inStep)
      fail(r, "pipe_program_step returned inside step %lld (no pipe_step_end)",
           static_cast<long long>(r->step));
    if (r->step != step + 1)
      fail(r, "pipe_program_step ran %lld steps instead of one",
           static_cast<long long>(r->step - step));
  }
  if (!transport.barrier(barrierTimeout(r)))
    fail(r, "the other ranks did not finish step %lld within %g s",
         static_cast<long long>(steps - 1), barrierTimeout(r));
  if (std::optional<MessageKey> left = transport.unreceived())
    fail(r, "the %s was sent but never received", describeIncoming(*left).c_str());
  drainSends(r);
  if (hooks.finished)
    hooks.finished(r);
}

/// The message of an exception that escaped a rank (Failure: complete already).
std::string messageOf(int rank, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Failure &failure) {
    return failure.what();
  } catch (const std::exception &e) {
    return "rank " + std::to_string(rank) + ": " + e.what();
  } catch (...) {
    return "rank " + std::to_string(rank) + ": an unknown exception";
  }
}

/// Keeps the calling thread on `cpus` (nothing when empty): 0, or the error. A
/// failure leaves it where it was: pinning is an aid to steady timing, not a
/// condition of the run.
int pinCallingThread(const std::vector<int> &cpus) {
  if (cpus.empty())
    return 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus)
    CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

} // namespace

std::vector<std::vector<int>> rankCpus(int ranks, int threadsPerRank) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (ranks < 1 || threadsPerRank < 1 || sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
    return {};
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &allowed))
      cpus.push_back(cpu);
  if (static_cast<int64_t>(cpus.size()) < static_cast<int64_t>(ranks) * threadsPerRank)
    return {};
  std::vector<std::vector<int>> sets(static_cast<size_t>(ranks));
  for (int k = 0; k < ranks; ++k)
    sets[static_cast<size_t>(k)].assign(cpus.begin() + k * threadsPerRank,
                                        cpus.begin() + (k + 1) * threadsPerRank);
  return sets;
}

std::string runRank(const RunSettings &settings, Transport &transport, const RankProgram &program,
                    int64_t steps, const RunHooks &hooks) {
  cpu::setBlasThreads(settings.kernelThreads);
  pipe_rank *r = nullptr;
  try {
    r = createRank(settings, transport.rank());
    placeInReplica(r, transport.rank(), transport.size());
  } catch (const Failure &failure) {
    if (r)
      pipe_rank_destroy(r);
    return failure.what();
  }
  r->transport = &transport;
  r->stepEnded = hooks.stepEnded;
  try {
    runBody(r, program, steps, hooks);
  } catch (const Stopped &) {
    return rankName(r) + ": stopped";
  } catch (...) {
    // The rank stays: its sends may still be in the transport's hands, and the
    // caller aborts the world next.
    return messageOf(transport.rank(), std::current_exception());
  }
  pipe_rank_destroy(r);
  return "";
}

std::string runInThreads(const RunSettings &settings, const std::vector<RankProgram> &programs,
                         int64_t steps, const RunHooks &hooks) {
  // Everything the rank threads touch lives on the heap: a thread left behind
  // in a kernel after the grace period must not outlive what it refers to.
  struct Shared {
    explicit Shared(int n) : hub(n) {}
    ThreadHub hub;
    std::vector<std::unique_ptr<Transport>> transports;
    std::vector<pipe_rank *> ranks;
    std::vector<RankProgram> programs;
    RunHooks hooks;
    std::mutex mutex;
    std::condition_variable changed;
    std::string firstFailure;
    int finished = 0;
  };
  const int n = static_cast<int>(programs.size());
  cpu::setBlasThreads(settings.kernelThreads);
  auto *shared = new Shared(n);
  shared->programs = programs;
  shared->hooks = hooks;
  for (int k = 0; k < n; ++k) {
    shared->transports.push_back(shared->hub.transport(k));
    pipe_rank *r = nullptr;
    try {
      r = createRank(settings, k);
      placeInReplica(r, k, n);
    } catch (const Failure &failure) {
      if (r)
        pipe_rank_destroy(r);
      for (pipe_rank *made : shared->ranks)
        pipe_rank_destroy(made);
      delete shared;
      return failure.what();
    }
    r->transport = shared->transports[k].get();
    r->stepEnded = hooks.stepEnded;
    shared->ranks.push_back(r);
  }

  // Two ranks left to the scheduler may share a CPU for the first tenths of a
  // second until the load balancer parts them: the early steps then run at
  // half speed (a 2-rank step of 13 ms measured 20-30 ms for its first 5 steps).
  const std::vector<std::vector<int>> cpus =
      settings.pinThreads ? rankCpus(n, settings.kernelThreads) : std::vector<std::vector<int>>{};
  std::vector<std::thread> threads;
  for (int k = 0; k < n; ++k)
    threads.emplace_back([shared, k, steps, mine = cpus.empty() ? std::vector<int>{}
                                                                 : cpus[static_cast<size_t>(k)]] {
      if (int error = pinCallingThread(mine); error != 0 && shared->hooks.notPinned)
        shared->hooks.notPinned(k, std::strerror(error));
      std::string failure;
      try {
        runBody(shared->ranks[k], shared->programs[k], steps, shared->hooks);
      } catch (const Stopped &) {
      } catch (...) {
        failure = messageOf(k, std::current_exception());
      }
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (!failure.empty() && shared->firstFailure.empty()) {
        shared->firstFailure = failure;
        shared->hub.stop();
      }
      ++shared->finished;
      shared->changed.notify_all();
    });

  // Once stopped, every rank unwinds at its next runtime call; one inside a
  // long kernel gets a grace period, then is left behind with its state.
  std::unique_lock<std::mutex> lock(shared->mutex);
  shared->changed.wait(lock, [&] { return shared->finished == n || shared->hub.stopped(); });
  bool allDone = shared->changed.wait_for(lock, std::chrono::seconds(10),
                                          [&] { return shared->finished == n; });
  std::string failure = shared->firstFailure;
  lock.unlock();
  if (!allDone) {
    for (std::thread &t : threads)
      t.detach();
    return failure + " (a rank did not stop within 10 s)";
  }
  for (std::thread &t : threads)
    t.join();
  for (pipe_rank *r : shared->ranks)
    pipe_rank_destroy(r);
  delete shared;
  return failure;
}

} // namespace piperun
