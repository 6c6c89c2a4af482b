#pragma once
// Compares the ranks' flight recorder dumps and names where they first disagree.
#include <string>
#include <vector>

#include "trace_reader.hpp"

namespace idist_trace {

/// Per group, the first sequence number where the ranks' calls differ or where some ranks never
/// arrived (their last recorded seq is lower), plus the ranks of the world that left no dump.
/// Empty when every dump agrees (then look at the entries' states).
std::vector<std::string> findings(const std::vector<RankTrace>& traces);

}  // namespace idist_trace
