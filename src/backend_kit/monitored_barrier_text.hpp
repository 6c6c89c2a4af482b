#pragma once
// The messages of monitored_barrier, the same on every backend that implements it (mpi over
// point-to-point messages, gloo and nccl over the store).
#include <chrono>
#include <string>
#include <vector>

namespace idist::backend_kit {

/// The leader's verdict: "rank 3 did not reach monitored_barrier within 500 ms" (or "ranks 2, 3 ...").
std::string missing_ranks_verdict(const std::vector<int>& missing, std::chrono::milliseconds timeout);

/// The TimeoutError message of `rank` for `verdict`: "monitored_barrier on rank 1: <verdict>".
std::string monitored_barrier_failure(int rank, const std::string& verdict);

/// The TimeoutError message of a member whose leader never answered within `waited`.
std::string leader_silent(int rank, int leader, std::chrono::milliseconds waited);

}  // namespace idist::backend_kit
