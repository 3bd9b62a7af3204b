// The one exception type of the partitioner: every bad input (malformed file, cycle,
// unknown option) is reported as an Error whose message names the node/stage/bytes.
#ifndef PARTITIONER_ERROR_H
#define PARTITIONER_ERROR_H

#include <stdexcept>
#include <string>

namespace partitioner {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace partitioner

#endif
