//===- Transport.cpp - message keys and their descriptions -----------------===//
//
// The words every transfer error uses, so that a timeout names the peer, the
// tag, the kind and the micro-batch the same way on every transport.
//
//===----------------------------------------------------------------------===//
#include "Transport.h"

#include <tuple>

namespace piperun {

bool MessageKey::operator<(const MessageKey &o) const {
  return std::tie(from, to, tag, kind, microbatch) <
         std::tie(o.from, o.to, o.tag, o.kind, o.microbatch);
}

bool MessageKey::operator==(const MessageKey &o) const {
  return std::tie(from, to, tag, kind, microbatch) ==
         std::tie(o.from, o.to, o.tag, o.kind, o.microbatch);
}

const char *transferKindName(int32_t kind) {
  switch (kind) {
  case PIPE_TRANSFER_ACTIVATION:
    return "activation";
  case PIPE_TRANSFER_GRADIENT:
    return "gradient";
  case PIPE_TRANSFER_PARAM_GRAD:
    return "parameter gradient";
  case PIPE_TRANSFER_PARAM:
    return "parameter";
  default:
    return "message";
  }
}

static std::string detail(const MessageKey &key) {
  std::string text = "(tag " + std::to_string(key.tag);
  if (key.microbatch >= 0)
    text += ", micro-batch " + std::to_string(key.microbatch);
  return text + ")";
}

std::string describeIncoming(const MessageKey &key) {
  return std::string(transferKindName(key.kind)) + " from rank " + std::to_string(key.from) + " " +
         detail(key);
}

std::string describeOutgoing(const MessageKey &key) {
  return std::string(transferKindName(key.kind)) + " to rank " + std::to_string(key.to) + " " +
         detail(key);
}

} // namespace piperun
