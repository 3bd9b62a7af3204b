//===- Transfers.cpp - pipe_send, pipe_recv and tied-parameter transfers ---===//
//
// A message is a 128-byte header (dtype and shape, checked by the receiver)
// followed by the tensor's bytes. The sender copies the tensor into a COMM
// buffer the transport holds until the message has been taken, so a send
// never blocks and the caller may free its tensor at once. How the bytes
// travel depends on where the tensors live (Route):
//  - CPU backend: the bytes follow the header; the received tensor is a view of
//    the received buffer past the header (COMM until freed or saved).
//  - A device backend with ranks in one process: the header names the sender's
//    device buffer (COMM on its device), and the receiver copies it, device to
//    device, into a new device tensor (COMM) before the sender learns that the
//    message was taken. Both ends count the bytes as the CPU backend does.
//  - A device backend across processes (MPI): the bytes travel through host
//    memory. The send buffer and the received message are host staging, not
//    charged (the account measures the device); the received tensor is a new
//    device tensor (COMM).
//
//===----------------------------------------------------------------------===//
#include "HostAccess.h"
#include "Internal.h"
#include "Rank.h"
#include "Tensor.h"

#include <algorithm>
#include <cstring>

namespace piperun {
namespace {

constexpr uint32_t kWireMarker = 0x50495045; // "PIPE"
constexpr size_t kHeaderBytes = 128;

struct WireHeader {
  uint32_t marker;
  int32_t dtype;
  int32_t rank;
  int32_t reserved;
  int64_t shape[PIPE_MAX_RANK];
  /// Route::Device: the sender's Device and the buffer there holding the bytes.
  uint64_t device;
  uint64_t payload;
};
static_assert(sizeof(WireHeader) <= kHeaderBytes, "the header must fit its slot");

enum class Route { Host, Device, Staged };

Route routeOf(pipe_rank *r, const Transport &transport) {
  if (!deviceOf(r))
    return Route::Host;
  return transport.sharesAddressSpace() ? Route::Device : Route::Staged;
}

Transport &transportOf(pipe_rank *r, const char *what) {
  if (!r->transport)
    fail(r, "%s: a standalone rank has no peers", what);
  r->transport->checkStopped();
  return *r->transport;
}

MessageKey keyOf(pipe_rank *r, const char *what, int32_t from, int32_t to, int32_t tag,
                 int32_t kind, int32_t microbatch) {
  int32_t peer = from == r->id ? to : from;
  if (peer < 0 || peer >= r->pipelineRanks)
    fail(r, "%s: peer rank %d is not a rank of this run's pipeline (%d ranks)", what, peer,
         r->pipelineRanks);
  if (kind < PIPE_TRANSFER_ACTIVATION || kind > PIPE_TRANSFER_PARAM)
    fail(r, "%s: unknown transfer kind %d", what, kind);
  if (tag < 0 || microbatch < -1)
    fail(r, "%s: tag %d, micro-batch %d", what, tag, microbatch);
  MessageKey key{transportRank(r, from), transportRank(r, to), tag, kind, microbatch};
  std::string problem = r->transport->checkKey(key);
  if (!problem.empty())
    fail(r, "%s: %s", what, problem.c_str());
  return key;
}

/// Sends `t` under `key`. With `fill`, on the host route, the message's bytes
/// are written by fill(bytes) instead of copied from `t` (whose dtype and shape
/// the header still gives): a chunk gathered from several tensors. `label`
/// names the message in failures (by default, its key).
void sendTensor(pipe_rank *r, const pipe_tensor *t, const MessageKey &key, const char *what,
                const std::function<void(char *)> &fill = {}, const std::string &label = "") {
  Transport &transport = transportOf(r, what);
  const int64_t bytes = tensorBytes(r, t);
  const Route route = routeOf(r, transport);
  // Bytes in the message itself: charged on the CPU, staging on a device (also
  // host messages a device rank sends from a HostKernelScope).
  const int64_t inlineBytes = route == Route::Device ? 0 : bytes;
  const int64_t charged = route == Route::Host && !r->device ? bytes : 0;
  Storage *buffer = allocateStorage(r->memory, charged, PIPE_MEM_COMM,
                                    static_cast<int64_t>(kHeaderBytes) + inlineBytes - charged);
  if (!buffer)
    fail(r, "%s: out of memory for a %lld-byte send buffer", what, static_cast<long long>(bytes));
  OutstandingSend send;
  send.buffer = buffer;
  send.key = key;
  send.label = label;
  WireHeader header{};
  header.marker = kWireMarker;
  header.dtype = t->dtype;
  header.rank = t->rank;
  for (int i = 0; i < t->rank; ++i)
    header.shape[i] = t->shape[i];
  auto *out = static_cast<char *>(buffer->data);
  try {
    if (route == Route::Device) {
      Device *device = deviceOf(r);
      send.payload =
          onDevice(r, [&] { return allocateDeviceStorage(r->memory, bytes, PIPE_MEM_COMM); });
      if (!send.payload)
        failOutOfMemory(r, what, bytes, PIPE_MEM_COMM,
                        "the send buffer of " + describe(t->dtype, shapeOf(t)));
      onDevice(r, [&] {
        device->withinDevice(send.payload->data, t->data, static_cast<size_t>(bytes));
      });
      header.device = reinterpret_cast<uintptr_t>(device);
      header.payload = reinterpret_cast<uintptr_t>(send.payload->data);
    } else if (fill && route == Route::Host) {
      fill(out + kHeaderBytes);
    } else {
      downloadTensor(r, out + kHeaderBytes, t);
    }
  } catch (...) {
    release(r->memory, buffer);
    if (send.payload)
      release(r->memory, send.payload);
    throw;
  }
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, &header, sizeof header);
  send.handle = transport.send(key, out, kHeaderBytes + static_cast<size_t>(inlineBytes));
  r->pendingSendBytes += send.bytes();
  r->sends.push_back(std::move(send));
  reapSends(r);
}

/// The received message's tensor: checks the header against what the program
/// expects, then makes the tensor as the route has it (a view of `storage`, or
/// a new device tensor the bytes are copied into). Releases `storage` unless
/// the tensor is a view of it.
pipe_tensor *landMessage(pipe_rank *r, Route route, Storage *storage, size_t received,
                         const MessageKey &key, int32_t dtype, const pipe_ints &shape,
                         int64_t numel, const char *what) {
  WireHeader header{};
  if (received >= kHeaderBytes)
    std::memcpy(&header, storage->data, sizeof header);
  const std::string expected = describe(dtype, shape);
  if (header.marker != kWireMarker) {
    release(r->memory, storage);
    fail(r, "the %s is not a runtime message", describeIncoming(key).c_str());
  }
  pipe_ints got{};
  got.n = header.rank;
  for (int i = 0; i < header.rank && i < PIPE_MAX_RANK; ++i)
    got.v[i] = header.shape[i];
  const std::string actual = describe(header.dtype, got);
  const size_t bytes = static_cast<size_t>(numel) * dtypeSize(r, dtype);
  if (actual != expected || received != kHeaderBytes + (route == Route::Device ? 0 : bytes)) {
    release(r->memory, storage);
    fail(r, "the %s is %s, expected %s", describeIncoming(key).c_str(), actual.c_str(),
         expected.c_str());
  }
  if (route == Route::Host)
    return tensorOver(r, storage, static_cast<char *>(storage->data) + kHeaderBytes, dtype, shape,
                      numel);
  pipe_tensor *t = nullptr;
  try {
    t = newTensor(r, dtype, shape, PIPE_MEM_COMM, what);
    if (route == Route::Device) {
      const auto *source = reinterpret_cast<const Device *>(static_cast<uintptr_t>(header.device));
      const auto *from = reinterpret_cast<const void *>(static_cast<uintptr_t>(header.payload));
      onDevice(r, [&] { deviceOf(r)->fromPeer(t->data, *source, from, bytes); });
    } else {
      uploadTensor(r, t, static_cast<char *>(storage->data) + kHeaderBytes);
    }
  } catch (...) {
    release(r->memory, storage);
    throw;
  }
  release(r->memory, storage);
  return t;
}

/// Receives the tensor sent under `key`; `label` names it in failures (by
/// default, its key).
pipe_tensor *receiveTensor(pipe_rank *r, const MessageKey &key, int32_t dtype,
                           const pipe_ints &shape, const char *what,
                           const std::string &label = "") {
  Transport &transport = transportOf(r, what);
  const int64_t numel = checkedNumel(r, shape, what);
  const Route route = routeOf(r, transport);
  Storage *storage = nullptr;
  pipe_tensor *tensor = nullptr;
  reapSends(r);
  const double waitStart = nowMs(r);
  size_t received = 0;
  bool arrived = transport.receive(
      key, r->settings.timeoutSeconds,
      [&](size_t size) {
        received = size;
        // A device backend's message is host staging: uncharged (also a host
        // message a device rank takes in a HostKernelScope).
        const int64_t header = route != Route::Host || r->device
                                   ? static_cast<int64_t>(size)
                                   : std::min<int64_t>(static_cast<int64_t>(size), kHeaderBytes);
        storage =
            allocateStorage(r->memory, static_cast<int64_t>(size) - header, PIPE_MEM_COMM, header);
        if (!storage)
          fail(r, "%s: out of memory for a %zu-byte message", what, size);
        return storage->data;
      },
      [r] { reapSends(r); },
      [&] { tensor = landMessage(r, route, storage, received, key, dtype, shape, numel, what); });
  const double waited = nowMs(r) - waitStart;
  r->nodeWaitMs += waited;
  r->waitMs += waited;
  if (!arrived)
    fail(r, "no %s within %g s", (label.empty() ? describeIncoming(key) : label).c_str(),
         r->settings.timeoutSeconds);
  return tensor;
}

} // namespace

namespace {

/// The gradients a rank all-reduces, laid end to end in parameter id order:
/// every trainable parameter it owns. Chunks of this flat array may span
/// several parameters; `visit` walks the pieces of one.
class FlatGradients {
public:
  FlatGradients(pipe_rank *r, HostAccess &host) {
    for (Parameter &p : r->params) {
      // Gradients are fp32 (pipe_declare_param makes them so).
      if (!p.declared || !p.trainable || p.owner != r->id || p.gradient->numel == 0)
        continue;
      pieces_.push_back({static_cast<float *>(host.write(p.gradient)), size_});
      size_ += p.gradient->numel;
    }
  }
  int64_t size() const { return size_; }
  /// Calls visit(data, count, offset from `begin`) for each piece of
  /// [begin, begin + count), in order.
  template <typename F> void visit(int64_t begin, int64_t count, F &&visit) const {
    auto piece = std::upper_bound(pieces_.begin(), pieces_.end(), begin,
                                  [](int64_t at, const Piece &p) { return at < p.start; }) -
                 1;
    for (int64_t done = 0; done < count; ++piece) {
      const int64_t end = piece + 1 == pieces_.end() ? size_ : (piece + 1)->start;
      const int64_t from = begin + done - piece->start;
      const int64_t n = std::min(count - done, end - piece->start - from);
      visit(piece->data + from, n, done);
      done += n;
    }
  }

private:
  struct Piece {
    float *data;
    int64_t start; ///< in the flat array
  };
  std::vector<Piece> pieces_;
  int64_t size_ = 0;
};

} // namespace

void allReduceGradients(pipe_rank *r) {
  const char *what = "pipe_all_reduce_grads";
  if (!r->inStep)
    fail(r, "%s: outside a step (pipe_step_begin .. pipe_step_end)", what);
  const int32_t replicas = r->settings.replicas;
  if (replicas <= 1)
    return;
  if (r->averagedStep == r->step)
    fail(r, "%s: called twice in step %lld", what, static_cast<long long>(r->step));
  r->averagedStep = r->step;
  transportOf(r, what);
  // The pipeline's sends still in flight (a last gradient, a tied parameter's)
  // leave first, so that the chunks below never add to them: a wait for the
  // previous rank to take them, counted as waiting for peers, not as the
  // all-reduce's time.
  const double drainStart = nowMs(r);
  drainSends(r);
  r->waitMs += nowMs(r) - drainStart;
  const double start = nowMs(r);
  // A ring over the replicas, the all-reduce the planner prices: the rank's
  // gradients laid end to end, cut into buckets of at most
  // RunSettings::allReduceBucketBytes, each bucket a ring: in `replicas`
  // chunks, R - 1 steps of reduce-scatter (each replica passes a chunk to the
  // next, which adds its own), the owner of each summed chunk scales it by
  // 1/R, R - 1 steps of all-gather pass the means around. Each chunk is summed
  // in one fixed order, so every replica, and every transport, ends with the
  // same bits. Messages are host bytes (the gradients are read and written
  // through HostAccess; a device backend does not charge them), one chunk at a
  // time: COMM holds the chunk's message, gathered from its parameters, until
  // the next replica takes it (the next send waits for that), and the chunk
  // received.
  const int32_t me = r->replica, next = (me + 1) % replicas,
                previous = (me + replicas - 1) % replicas;
  auto key = [&](int32_t fromReplica, int32_t toReplica) {
    MessageKey k{transportRank(r, r->id, fromReplica), transportRank(r, r->id, toReplica), 0,
                 PIPE_TRANSFER_PARAM_GRAD, -1};
    std::string problem = r->transport->checkKey(k);
    if (!problem.empty())
      fail(r, "%s: %s", what, problem.c_str());
    return k;
  };
  // The ring's messages share one key per pair of replicas (each transport
  // keeps their order); failures name them as what they are.
  const std::string outgoing =
      "gradient all-reduce chunk to rank " + std::to_string(transportRank(r, r->id, next));
  const std::string incoming =
      "gradient all-reduce chunk from rank " + std::to_string(transportRank(r, r->id, previous));
  HostAccess host(r);
  const FlatGradients flat(r, host);
  const int64_t total = flat.size();
  const int64_t bucket = std::max<int64_t>(1, r->settings.allReduceBucketBytes / 4);
  {
    HostKernelScope hostMessages(r);
    for (int64_t bucketBegin = 0; bucketBegin < total; bucketBegin += bucket) {
      const int64_t numel = std::min(bucket, total - bucketBegin);
      auto chunk = [&](int32_t c) {
        c = ((c % replicas) + replicas) % replicas;
        const int64_t begin = numel / replicas * c + std::min<int64_t>(c, numel % replicas);
        const int64_t size = numel / replicas + (c < numel % replicas ? 1 : 0);
        return std::make_pair(bucketBegin + begin, size);
      };
      // Sends chunk c to the next replica, then takes the previous replica's
      // chunk c - 1 and adds it to (or copies it over) this replica's (an empty
      // chunk is neither sent nor received).
      auto pass = [&](int32_t c, bool add) {
        auto [sendBegin, sendSize] = chunk(c);
        if (sendSize > 0) {
          // One message in flight at a time: the ring runs in lockstep anyway.
          drainSends(r);
          pipe_tensor shape{}; // the header's dtype and shape; the bytes come from `flat`
          shape.dtype = PIPE_F32;
          shape.rank = 1;
          shape.shape[0] = sendSize;
          shape.numel = sendSize;
          sendTensor(
              r, &shape, key(me, next), what,
              [&](char *bytes) {
                flat.visit(sendBegin, sendSize, [&](const float *from, int64_t n, int64_t at) {
                  std::memcpy(bytes + at * sizeof(float), from,
                              static_cast<size_t>(n) * sizeof(float));
                });
              },
              outgoing);
        }
        auto [receiveBegin, receiveSize] = chunk(c - 1);
        if (receiveSize > 0) {
          pipe_tensor *in = receiveTensor(r, key(previous, me), PIPE_F32,
                                          pipe_ints{1, {receiveSize}}, what, incoming);
          const auto *received = static_cast<const float *>(in->data);
          flat.visit(receiveBegin, receiveSize, [&](float *into, int64_t n, int64_t at) {
            if (add)
              for (int64_t i = 0; i < n; ++i)
                into[i] += received[at + i];
            else
              std::memcpy(into, received + at, static_cast<size_t>(n) * sizeof(float));
          });
          destroyTensor(r, in);
        }
      };
      for (int32_t step = 0; step + 1 < replicas; ++step)
        pass(me - step, true);
      // This replica now holds the whole sum of chunk me + 1.
      const float scale = 1.0f / static_cast<float>(replicas);
      auto [ownBegin, ownSize] = chunk(me + 1);
      flat.visit(ownBegin, ownSize, [&](float *into, int64_t n, int64_t) {
        for (int64_t i = 0; i < n; ++i)
          into[i] *= scale;
      });
      for (int32_t step = 0; step + 1 < replicas; ++step)
        pass(me + 1 - step, false);
    }
  }
  host.commit();
  r->current.allReduceMs += nowMs(r) - start;
}

} // namespace piperun

using namespace piperun;

extern "C" {

void pipe_send(pipe_rank *r, const pipe_tensor *t, int32_t peer, int32_t tag, int32_t kind,
               int32_t microbatch) {
  boxOf(r, t, "pipe_send");
  transportOf(r, "pipe_send");
  sendTensor(r, t, keyOf(r, "pipe_send", r->id, peer, tag, kind, microbatch), "pipe_send");
}

pipe_tensor *pipe_recv(pipe_rank *r, int32_t peer, int32_t tag, int32_t kind, int32_t microbatch,
                       int32_t dtype, pipe_ints shape) {
  transportOf(r, "pipe_recv");
  return receiveTensor(r, keyOf(r, "pipe_recv", peer, r->id, tag, kind, microbatch), dtype, shape,
                       "pipe_recv");
}

void pipe_all_reduce_grads(pipe_rank *r) { allReduceGradients(r); }

void pipe_send_param_grad(pipe_rank *r, int32_t id, int32_t owner_rank) {
  Parameter &p = parameterOf(r, id, "pipe_send_param_grad");
  if (!p.gradient)
    fail(r, "pipe_send_param_grad: parameter %s is not trainable", p.name.c_str());
  transportOf(r, "pipe_send_param_grad");
  sendTensor(r, p.gradient,
             keyOf(r, "pipe_send_param_grad", r->id, owner_rank, id, PIPE_TRANSFER_PARAM_GRAD, -1),
             "pipe_send_param_grad");
}

void pipe_recv_add_param_grad(pipe_rank *r, int32_t id, int32_t user_rank) {
  Parameter &p = parameterOf(r, id, "pipe_recv_add_param_grad");
  if (!p.gradient)
    fail(r, "pipe_recv_add_param_grad: parameter %s is not trainable", p.name.c_str());
  transportOf(r, "pipe_recv_add_param_grad");
  pipe_tensor *grad = receiveTensor(
      r, keyOf(r, "pipe_recv_add_param_grad", user_rank, r->id, id, PIPE_TRANSFER_PARAM_GRAD, -1),
      PIPE_F32, shapeOf(p.gradient), "pipe_recv_add_param_grad");
  pipe_accumulate_grad(r, id, grad);
  destroyTensor(r, grad);
}

void pipe_send_param(pipe_rank *r, int32_t id, int32_t user_rank) {
  Parameter &p = parameterOf(r, id, "pipe_send_param");
  transportOf(r, "pipe_send_param");
  sendTensor(r, p.value, keyOf(r, "pipe_send_param", r->id, user_rank, id, PIPE_TRANSFER_PARAM, -1),
             "pipe_send_param");
}

void pipe_recv_param(pipe_rank *r, int32_t id, int32_t owner_rank) {
  Parameter &p = parameterOf(r, id, "pipe_recv_param");
  transportOf(r, "pipe_recv_param");
  pipe_tensor *value =
      receiveTensor(r, keyOf(r, "pipe_recv_param", owner_rank, r->id, id, PIPE_TRANSFER_PARAM, -1),
                    p.value->dtype, shapeOf(p.value), "pipe_recv_param");
  copyTensor(r, p.value, value);
  destroyTensor(r, value);
}

} // extern "C"
