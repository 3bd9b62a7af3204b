// The problem JSON format (documented in docs/partitioner.md): layers, tensors,
// platform and training settings.
#ifndef PARTITIONER_PROBLEMJSON_H
#define PARTITIONER_PROBLEMJSON_H

#include "partitioner/Problem.h"

#include <istream>
#include <ostream>
#include <string>

namespace partitioner {

/// Parses a problem JSON document; throws Error naming the offending field.
Problem readProblemJson(std::istream &in, const std::string &name);
/// Writes `problem` in the same format (round-trips through readProblemJson).
void writeProblemJson(const Problem &problem, std::ostream &out);

} // namespace partitioner

#endif
