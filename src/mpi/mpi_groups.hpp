#pragma once
// The process groups of the mpi backend: a ProcessGroup holding its MPI communicator.
#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "idist/process_group.hpp"

namespace idist::mpi_backend {

/// One process group as seen by this rank.
class MpiGroup final : public ProcessGroup {
 public:
  /// `comm` is MPI_COMM_NULL when this rank is not a member; `label` names the group in the watchdog's
  /// message ("world (ranks 0-3)"), name() when empty.
  MpiGroup(std::vector<int> sorted_ranks, int world_rank, int world_size, std::uint64_t owner, MPI_Comm comm,
           std::string label = {})
      : ProcessGroup(std::move(sorted_ranks), world_rank, world_size, owner),
        comm(comm),
        label(label.empty() ? name() : std::move(label)) {}

  /// The group's communicator; MPI_COMM_NULL for a non-member, and once released.
  MPI_Comm comm;
  /// How the watchdog names the group (a C string that lives as long as the group).
  const std::string label;
  /// monitored_barrier calls on this group so far: each one's message tags.
  mutable std::atomic<std::uint64_t> monitored_barriers{0};
};

/// Makes the group `sorted` (validated, ascending) by MPI_Comm_split of `world`, which is collective
/// over the whole world: members pass color 0 and non-members MPI_UNDEFINED (and remember that they
/// are outside). Every rank therefore reaches a group's first use in the same order, as idist's rule
/// "collectives of one group are issued in the same order everywhere" guarantees.
/// @throws BackendError when MPI_Comm_split fails.
std::shared_ptr<MpiGroup> split_group(std::vector<int> sorted, MPI_Comm world, int world_rank, int world_size,
                                      std::uint64_t owner);

/// Frees the communicators of `groups` (MPI_Comm_free) and forgets them. Call before MPI_Finalize.
void release(std::vector<std::shared_ptr<MpiGroup>>& groups) noexcept;

}  // namespace idist::mpi_backend
