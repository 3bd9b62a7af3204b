//===- Transfers.cpp - pipe_send, pipe_recv and tied-parameter transfers ---===//
//
// A message is a 128-byte header (dtype and shape, checked by the receiver)
// followed by the tensor's bytes. The sender copies both into a COMM buffer the
// transport holds until the message has left, so a send never blocks and the
// caller may free its tensor at once; the receiver's tensor is a view of the
// received buffer past the header (COMM until freed or saved). On a device
// backend the bytes travel through host memory: the send buffer and the
// received message are host staging, not charged (the account measures the
// device), and the received tensor is a new device tensor (COMM).
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
};
static_assert(sizeof(WireHeader) <= kHeaderBytes, "the header must fit its slot");

Transport &transportOf(pipe_rank *r, const char *what) {
  if (!r->transport)
    fail(r, "%s: a standalone rank has no peers", what);
  r->transport->checkStopped();
  return *r->transport;
}

MessageKey keyOf(pipe_rank *r, const char *what, int32_t from, int32_t to, int32_t tag,
                 int32_t kind, int32_t microbatch) {
  int32_t peer = from == r->id ? to : from;
  if (peer < 0 || peer >= r->transport->size())
    fail(r, "%s: peer rank %d is not a rank of this run (%d ranks)", what, peer,
         r->transport->size());
  if (kind < PIPE_TRANSFER_ACTIVATION || kind > PIPE_TRANSFER_PARAM)
    fail(r, "%s: unknown transfer kind %d", what, kind);
  if (tag < 0 || microbatch < -1)
    fail(r, "%s: tag %d, micro-batch %d", what, tag, microbatch);
  MessageKey key{from, to, tag, kind, microbatch};
  std::string problem = r->transport->checkKey(key);
  if (!problem.empty())
    fail(r, "%s: %s", what, problem.c_str());
  return key;
}

void sendTensor(pipe_rank *r, const pipe_tensor *t, const MessageKey &key, const char *what) {
  Transport &transport = transportOf(r, what);
  const int64_t bytes = tensorBytes(r, t);
  const bool staged = deviceOf(r) != nullptr;
  Storage *buffer = allocateStorage(r->memory, staged ? 0 : bytes, PIPE_MEM_COMM,
                                    static_cast<int64_t>(kHeaderBytes) + (staged ? bytes : 0));
  if (!buffer)
    fail(r, "%s: out of memory for a %lld-byte send buffer", what, static_cast<long long>(bytes));
  WireHeader header{};
  header.marker = kWireMarker;
  header.dtype = t->dtype;
  header.rank = t->rank;
  for (int i = 0; i < t->rank; ++i)
    header.shape[i] = t->shape[i];
  auto *out = static_cast<char *>(buffer->data);
  std::memset(out, 0, kHeaderBytes);
  std::memcpy(out, &header, sizeof header);
  downloadTensor(r, out + kHeaderBytes, t);
  OutstandingSend send;
  send.handle = transport.send(key, out, kHeaderBytes + static_cast<size_t>(bytes));
  send.buffer = buffer;
  send.key = key;
  r->pendingSendBytes += buffer->bytes;
  r->sends.push_back(std::move(send));
  reapSends(r);
}

pipe_tensor *receiveTensor(pipe_rank *r, const MessageKey &key, int32_t dtype,
                           const pipe_ints &shape, const char *what) {
  Transport &transport = transportOf(r, what);
  const int64_t numel = checkedNumel(r, shape, what);
  Storage *storage = nullptr;
  const bool staged = deviceOf(r) != nullptr;
  reapSends(r);
  const double waitStart = nowMs(r);
  size_t received = 0;
  bool arrived = transport.receive(key, r->settings.timeoutSeconds, [&](size_t size) {
    received = size;
    const int64_t header =
        staged ? static_cast<int64_t>(size)
               : std::min<int64_t>(static_cast<int64_t>(size), kHeaderBytes);
    storage =
        allocateStorage(r->memory, static_cast<int64_t>(size) - header, PIPE_MEM_COMM, header);
    if (!storage)
      fail(r, "%s: out of memory for a %zu-byte message", what, size);
    return storage->data;
  }, [r] { reapSends(r); });
  const double waited = nowMs(r) - waitStart;
  r->nodeWaitMs += waited;
  r->waitMs += waited;
  if (!arrived)
    fail(r, "no %s within %g s", describeIncoming(key).c_str(), r->settings.timeoutSeconds);
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
  if (actual != expected ||
      received != kHeaderBytes + static_cast<size_t>(numel) * dtypeSize(r, dtype)) {
    release(r->memory, storage);
    fail(r, "the %s is %s, expected %s", describeIncoming(key).c_str(), actual.c_str(),
         expected.c_str());
  }
  if (staged) {
    pipe_tensor *t = nullptr;
    try {
      t = newTensor(r, dtype, shape, PIPE_MEM_COMM, what);
      uploadTensor(r, t, static_cast<char *>(storage->data) + kHeaderBytes);
    } catch (...) {
      release(r->memory, storage);
      throw;
    }
    release(r->memory, storage);
    return t;
  }
  return tensorOver(r, storage, static_cast<char *>(storage->data) + kHeaderBytes, dtype, shape,
                    numel);
}

} // namespace
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
