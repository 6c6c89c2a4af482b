#include "backend_kit/monitored_barrier_text.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/op_type.hpp"

namespace idist::backend_kit {

std::string missing_ranks_verdict(const std::vector<int>& missing, std::chrono::milliseconds timeout) {
  return fmt::format("{} {} did not reach {} within {} ms", missing.size() > 1 ? "ranks" : "rank",
                     fmt::join(missing, ", "), to_string(OpType::MonitoredBarrier), timeout.count());
}

std::string monitored_barrier_failure(int rank, const std::string& verdict) {
  return fmt::format("{} on rank {}: {}", to_string(OpType::MonitoredBarrier), rank, verdict);
}

std::string leader_silent(int rank, int leader, std::chrono::milliseconds waited) {
  return monitored_barrier_failure(
      rank, fmt::format("rank {} (the leader) did not answer within {} ms", leader, waited.count()));
}

}  // namespace idist::backend_kit
