//===- ThreadTransport.cpp - ranks as threads of one process ---------------===//
//
// A send queues a pointer to the sender's buffer in the receiver's mailbox and
// returns; the receiver copies the bytes out (and whatever device buffer they
// name) and marks the message received, which is when the sender may free the
// buffer. Waits wake on arrival, on the
// hub's stop and on their deadline, so a failing rank stops the others at once,
// and when a message the waiting rank sent was taken, so that it frees it then.
//
//===----------------------------------------------------------------------===//
#include "ThreadTransport.h"

#include <chrono>
#include <cstring>

namespace piperun {

namespace {
using Clock = std::chrono::steady_clock;

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}
} // namespace

class ThreadTransport : public Transport {
public:
  ThreadTransport(ThreadHub &hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.ranks(); }
  bool sharesAddressSpace() const override { return true; }

  std::unique_ptr<PendingSend> send(const MessageKey &key, const void *data, size_t size) override {
    auto message = std::make_shared<ThreadHub::Message>();
    message->data = data;
    message->size = size;
    ThreadHub::Mailbox &box = *hub_.mailboxes_[static_cast<size_t>(key.to)];
    {
      std::lock_guard<std::mutex> lock(box.mutex);
      box.queues[key].push_back(message);
    }
    box.arrived.notify_all();
    struct Pending : PendingSend {
      std::shared_ptr<ThreadHub::Message> message;
      bool done() override { return message->received.load(std::memory_order_acquire); }
    };
    auto pending = std::make_unique<Pending>();
    pending->message = std::move(message);
    return pending;
  }

  bool receive(const MessageKey &key, double timeoutSeconds,
               const std::function<void *(size_t)> &buffer, const std::function<void()> &taken,
               const std::function<void()> &landed) override {
    ThreadHub::Mailbox &box = *hub_.mailboxes_[static_cast<size_t>(rank_)];
    std::unique_lock<std::mutex> lock(box.mutex);
    auto deadline = deadlineAfter(timeoutSeconds);
    auto there = [&] {
      auto it = box.queues.find(key);
      return it != box.queues.end() && !it->second.empty();
    };
    uint64_t seen = box.taken;
    auto ready = [&] { return hub_.stopped() || there() || (taken && box.taken != seen); };
    for (;;) {
      if (!box.arrived.wait_until(lock, deadline, ready))
        return false;
      if (hub_.stopped() || there())
        break;
      seen = box.taken; // a take from here on wakes the wait again
      lock.unlock();
      taken();
      lock.lock();
    }
    checkStopped();
    auto it = box.queues.find(key);
    std::shared_ptr<ThreadHub::Message> message = it->second.front();
    it->second.pop_front();
    if (it->second.empty())
      box.queues.erase(it);
    lock.unlock();
    void *into = buffer(message->size);
    std::memcpy(into, message->data, message->size);
    if (landed)
      landed();
    message->received.store(true, std::memory_order_release);
    // Wake the sender if it waits, so that it frees the buffer now.
    ThreadHub::Mailbox &from = *hub_.mailboxes_[static_cast<size_t>(key.from)];
    {
      std::lock_guard<std::mutex> fromLock(from.mutex);
      ++from.taken;
    }
    from.arrived.notify_all();
    return true;
  }

  void checkStopped() override {
    if (hub_.stopped())
      throw Stopped{};
  }

  bool barrier(double timeoutSeconds) override {
    std::unique_lock<std::mutex> lock(hub_.barrierMutex_);
    int64_t generation = hub_.barrierGeneration_;
    if (++hub_.barrierWaiting_ == hub_.ranks()) {
      hub_.barrierWaiting_ = 0;
      ++hub_.barrierGeneration_;
      hub_.barrierChanged_.notify_all();
      return true;
    }
    bool passed = hub_.barrierChanged_.wait_until(lock, deadlineAfter(timeoutSeconds), [&] {
      return hub_.barrierGeneration_ != generation || hub_.stopped();
    });
    if (hub_.barrierGeneration_ != generation)
      return true;
    --hub_.barrierWaiting_;
    lock.unlock();
    checkStopped();
    (void)passed;
    return false;
  }

  std::optional<MessageKey> unreceived() override {
    ThreadHub::Mailbox &box = *hub_.mailboxes_[static_cast<size_t>(rank_)];
    std::lock_guard<std::mutex> lock(box.mutex);
    if (box.queues.empty())
      return std::nullopt;
    return box.queues.begin()->first;
  }

private:
  ThreadHub &hub_;
  int rank_;
};

ThreadHub::ThreadHub(int ranks) {
  for (int i = 0; i < ranks; ++i)
    mailboxes_.push_back(std::make_unique<Mailbox>());
}

void ThreadHub::stop() {
  stopped_.store(true);
  for (auto &box : mailboxes_) {
    // Taking the lock orders the flag before any waiter's next predicate check.
    { std::lock_guard<std::mutex> lock(box->mutex); }
    box->arrived.notify_all();
  }
  { std::lock_guard<std::mutex> lock(barrierMutex_); }
  barrierChanged_.notify_all();
}

std::unique_ptr<Transport> ThreadHub::transport(int rank) {
  return std::make_unique<ThreadTransport>(*this, rank);
}

} // namespace piperun
