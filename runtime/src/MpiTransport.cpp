//===- MpiTransport.cpp - messages between MPI processes -------------------===//
//
// A send is an MPI_Isend of the rank's COMM buffer, done when MPI_Test says
// so; a receive polls MPI_Improbe for its (source, tag) against a deadline and
// takes the matched message with MPI_Imrecv into a buffer of the probed size,
// still against the deadline.
// The key packs into the MPI tag: kind in bits 0-1, micro-batch + 1 in bits
// 2-12, the program's tag in bits 13-30 (MPI guarantees order per source and
// tag, so each key's messages arrive in order).
//
//===----------------------------------------------------------------------===//
#include "Mpi.h"

#ifdef PIPE_RUNTIME_HAS_MPI
#include <mpi.h>

#include <chrono>
#include <climits>
#include <stdexcept>
#include <thread>

namespace piperun {

namespace {

constexpr int kKindBits = 2, kMicrobatchBits = 11, kTagBits = 18;

int packTag(const MessageKey &key) {
  return key.kind | ((key.microbatch + 1) << kKindBits) |
         (key.tag << (kKindBits + kMicrobatchBits));
}

MessageKey unpackTag(int from, int to, int packed) {
  MessageKey key;
  key.from = from;
  key.to = to;
  key.kind = packed & ((1 << kKindBits) - 1);
  key.microbatch = ((packed >> kKindBits) & ((1 << kMicrobatchBits) - 1)) - 1;
  key.tag = packed >> (kKindBits + kMicrobatchBits);
  return key;
}

class MpiSend : public PendingSend {
public:
  explicit MpiSend(MPI_Request request) : request_(request) {}
  bool done() override {
    if (request_ == MPI_REQUEST_NULL)
      return true;
    int finished = 0;
    MPI_Test(&request_, &finished, MPI_STATUS_IGNORE);
    return finished != 0;
  }

private:
  MPI_Request request_;
};

class MpiTransport : public Transport {
public:
  MpiTransport() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    int *upperBound = nullptr, found = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &upperBound, &found);
    tagUpperBound_ = found ? *upperBound : 32767;
  }
  ~MpiTransport() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::string checkKey(const MessageKey &key) const override {
    if (key.tag >= (1 << kTagBits) || key.microbatch + 1 >= (1 << kMicrobatchBits) ||
        packTag(key) > tagUpperBound_)
      return "tag " + std::to_string(key.tag) + ", micro-batch " + std::to_string(key.microbatch) +
             " do not fit this MPI's tags (at most tag " + std::to_string((1 << kTagBits) - 1) +
             ", micro-batch " + std::to_string((1 << kMicrobatchBits) - 2) + ", MPI_TAG_UB " +
             std::to_string(tagUpperBound_) + ")";
    return "";
  }

  std::unique_ptr<PendingSend> send(const MessageKey &key, const void *data, size_t size) override {
    if (size > static_cast<size_t>(INT_MAX))
      throw std::runtime_error("a " + std::to_string(size) + "-byte " + describeOutgoing(key) +
                               " exceeds MPI's 2 GiB message count");
    MPI_Request request;
    MPI_Isend(data, static_cast<int>(size), MPI_BYTE, key.to, packTag(key), comm_, &request);
    return std::make_unique<MpiSend>(request);
  }

  bool receive(const MessageKey &key, double timeoutSeconds,
               const std::function<void *(size_t)> &buffer, const std::function<void()> &taken,
               const std::function<void()> &landed) override {
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    // Poll quickly at first (a message is often on its way), then back off so
    // a waiting rank leaves the cores to the ranks that compute.
    auto pause = std::chrono::microseconds(1);
    for (;;) {
      int found = 0;
      MPI_Message message;
      MPI_Status status;
      MPI_Improbe(key.from, packTag(key), comm_, &found, &message, &status);
      if (found) {
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        void *into = buffer(static_cast<size_t>(count));
        // A large message may need the sender's progress: wait for it against
        // the same deadline rather than in a blocking MPI_Mrecv.
        MPI_Request request;
        MPI_Imrecv(into, count, MPI_BYTE, &message, &request);
        for (;;) {
          int done = 0;
          MPI_Test(&request, &done, MPI_STATUS_IGNORE);
          if (done) {
            if (landed)
              landed();
            return true;
          }
          if (std::chrono::steady_clock::now() > deadline)
            return false;
          std::this_thread::sleep_for(std::chrono::microseconds(20));
        }
      }
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      if (taken)
        taken(); // tests this rank's sends: those that completed free their buffers
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(500));
    }
  }

  void checkStopped() override {}

  bool barrier(double timeoutSeconds) override {
    MPI_Request request;
    MPI_Ibarrier(comm_, &request);
    auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
    for (;;) {
      int done = 0;
      MPI_Test(&request, &done, MPI_STATUS_IGNORE);
      if (done)
        return true;
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::optional<MessageKey> unreceived() override {
    int found = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &status);
    if (!found)
      return std::nullopt;
    return unpackTag(status.MPI_SOURCE, rank_, status.MPI_TAG);
  }

private:
  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  int tagUpperBound_ = 32767;
};

} // namespace

std::unique_ptr<Transport> makeMpiTransport() { return std::make_unique<MpiTransport>(); }

} // namespace piperun

#endif // PIPE_RUNTIME_HAS_MPI
