// The partitioner's strict JSON field reader: support/'s JsonFields throwing
// partitioner::Error.
#ifndef PARTITIONER_LIB_JSONFIELDS_H
#define PARTITIONER_LIB_JSONFIELDS_H

#include "partitioner/Error.h"

#include "pipe-support/JsonFields.h"

namespace partitioner {

using pipe_support::jsonExcerpt;
using JsonFields = pipe_support::JsonFields<Error>;

} // namespace partitioner

#endif // PARTITIONER_LIB_JSONFIELDS_H
