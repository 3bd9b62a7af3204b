//===- ThreadTransport.h - ranks as threads of one process ---------*- C++ -*-===//
//
// A hub of mailboxes, one per rank, keyed by message; receives wait on a
// condition variable until their message, the timeout or the run's stop flag.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_THREADTRANSPORT_H
#define PIPE_RUNTIME_THREADTRANSPORT_H

#include "Transport.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <vector>

namespace piperun {

/// What every rank of one in-process run shares.
class PIPE_EXPORT ThreadHub {
public:
  explicit ThreadHub(int ranks);
  int ranks() const { return static_cast<int>(mailboxes_.size()); }

  /// Stops the run: every wait returns and every rank unwinds (Stopped).
  void stop();
  bool stopped() const { return stopped_.load(std::memory_order_relaxed); }

  /// The transport of rank `rank` (owned by the caller).
  std::unique_ptr<Transport> transport(int rank);

private:
  friend class ThreadTransport;
  struct Message {
    const void *data = nullptr;
    size_t size = 0;
    std::atomic<bool> received{false};
  };
  struct Mailbox {
    std::mutex mutex;
    std::condition_variable arrived;
    std::map<MessageKey, std::deque<std::shared_ptr<Message>>> queues;
    /// Messages this mailbox's rank sent that a receiver has taken (wakes the
    /// rank's wait so that it frees their buffers).
    uint64_t taken = 0;
  };
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  std::atomic<bool> stopped_{false};

  std::mutex barrierMutex_;
  std::condition_variable barrierChanged_;
  int barrierWaiting_ = 0;
  int64_t barrierGeneration_ = 0;
};

} // namespace piperun

#endif // PIPE_RUNTIME_THREADTRANSPORT_H
