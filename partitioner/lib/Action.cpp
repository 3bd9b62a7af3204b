// Actions as plan.json and the tools write them: F3@s1, SEND_F3@s1->s2. Shared by
// the schedule generators and the simulator (Schedule.h).
#include "partitioner/Schedule.h"

#include <string>

namespace partitioner {

std::string toString(const Action &action) {
  const char *kind = "F";
  switch (action.kind) {
  case ActionKind::Forward:
    kind = "F";
    break;
  case ActionKind::Backward:
    kind = "B";
    break;
  case ActionKind::BackwardInput:
    kind = "Bi";
    break;
  case ActionKind::BackwardWeight:
    kind = "W";
    break;
  }
  return std::string(kind) + std::to_string(action.microbatch) + "@s" +
         std::to_string(action.stage);
}

std::string transferAction(bool send, bool gradient, int microbatch, int from, int to) {
  return std::string(send ? "SEND_" : "RECV_") + (gradient ? "B" : "F") +
         std::to_string(microbatch) + "@s" + std::to_string(from) + "->s" + std::to_string(to);
}

} // namespace partitioner
