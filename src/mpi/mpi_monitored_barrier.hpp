#pragma once
// torch.distributed.monitored_barrier on MPI point-to-point messages: the group's rank 0 receives an
// arrival message from every other member, then sends each member the verdict.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace idist::mpi_backend {

/// One monitored barrier on `comm` (this rank is `comm_rank`; `members[i]` is the world rank of
/// communicator rank i). `generation` counts this group's monitored barriers, so that a late arrival
/// from an earlier one is never taken for this one. Every wait polls to a deadline: the leader waits
/// `timeout` for the arrivals, the others twice that for the verdict.
/// @throws TimeoutError naming the missing world ranks (the first in rank order, or all of them with
///         `wait_all_ranks`) on the leader and on the members that arrived, or naming the leader when it
///         never answered; BackendError when an MPI call fails.
void mpi_monitored_barrier(MPI_Comm comm, int comm_rank, const std::vector<int>& members, std::uint64_t generation,
                           std::chrono::milliseconds timeout, bool wait_all_ranks);

}  // namespace idist::mpi_backend
