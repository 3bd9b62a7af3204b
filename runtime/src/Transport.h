//===- Transport.h - how the ranks of a run exchange messages ------*- C++ -*-===//
//
// One small interface behind pipe_send / pipe_recv: the thread transport
// (mailboxes in one process) and the MPI transport implement it. Messages match
// on (from, to, tag, kind, micro-batch) and arrive in order per key.
//
//===----------------------------------------------------------------------===//
#ifndef PIPE_RUNTIME_TRANSPORT_H
#define PIPE_RUNTIME_TRANSPORT_H

#include "pipe_runtime.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace piperun {

struct MessageKey {
  int32_t from = 0;
  int32_t to = 0;
  int32_t tag = 0;
  int32_t kind = PIPE_TRANSFER_ACTIVATION; ///< pipe_transfer_kind
  int32_t microbatch = -1;

  bool operator<(const MessageKey &other) const;
  bool operator==(const MessageKey &other) const;
};

/// "activation", "gradient", "parameter gradient", "parameter".
PIPE_EXPORT const char *transferKindName(int32_t kind);
/// "activation from rank 0 (tag 3, micro-batch 2)", seen from the receiver.
PIPE_EXPORT std::string describeIncoming(const MessageKey &key);
/// "activation to rank 1 (tag 3, micro-batch 2)", seen from the sender.
PIPE_EXPORT std::string describeOutgoing(const MessageKey &key);

/// Thrown on a rank's thread when another rank failed: the rank unwinds without
/// a message of its own (the failing rank's message is the run's).
struct Stopped {};

/// A send the transport still holds; its bytes must stay valid until done().
class PendingSend {
public:
  virtual ~PendingSend() = default;
  virtual bool done() = 0;
};

class PIPE_EXPORT Transport {
public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// "" when the transport can carry messages with this key, else why not
  /// (MPI packs the key into a bounded tag).
  virtual std::string checkKey(const MessageKey &key) const {
    (void)key;
    return "";
  }
  /// Starts sending `size` bytes from `data`; never blocks.
  virtual std::unique_ptr<PendingSend> send(const MessageKey &key, const void *data,
                                            size_t size) = 0;
  /// Whether the ranks share one address space (threads of one process), so
  /// that a message may name a buffer of its sender's for the receiver to copy
  /// from (a device buffer: Transfers.cpp).
  virtual bool sharesAddressSpace() const { return false; }
  /// Waits up to `timeoutSeconds` for message `key`; when it is there, asks
  /// `buffer(size)` where its bytes go, fills it, and calls `landed()` (when
  /// set) before the sender may learn that the message was taken, so that
  /// whatever the message names in the sender's memory is still there. False on
  /// timeout. While it waits it calls `taken()` (when set) whenever a message
  /// this rank sent may have been received since, so that the rank frees those
  /// buffers then rather than after the wait.
  virtual bool receive(const MessageKey &key, double timeoutSeconds,
                       const std::function<void *(size_t)> &buffer,
                       const std::function<void()> &taken = {},
                       const std::function<void()> &landed = {}) = 0;
  /// Throws Stopped when another rank has failed (the MPI transport never
  /// needs to: a failing MPI rank aborts the world).
  virtual void checkStopped() = 0;
  /// Waits until every rank is here; false when one has not come in time.
  virtual bool barrier(double timeoutSeconds) = 0;
  /// A message addressed to this rank that nobody received (checked after the
  /// run's last barrier, when every send has been issued).
  virtual std::optional<MessageKey> unreceived() = 0;
  /// Lets the transport move data while the rank only waits (MPI progress).
  virtual void progress() {}
};

} // namespace piperun

#endif // PIPE_RUNTIME_TRANSPORT_H
