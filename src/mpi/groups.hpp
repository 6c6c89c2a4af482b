#pragma once
// The communicator of one idist process group on the mpi backend (cached in core::GroupCache).
#include <mpi.h>

#include <string>
#include <vector>

#include "core/group_cache.hpp"

namespace idist::mpi_backend {

/// One process group as seen by this rank.
struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;  ///< MPI_COMM_NULL when this rank is not a member
  int rank = -1;                  ///< this rank's position in `ranks`, -1 when not a member
  std::string label;              ///< "[0, 2, 5]": how messages (the watchdog's) name the group
};

/// The groups used so far.
using GroupCache = core::GroupCache<GroupComm>;

/// Makes the communicator of the group `sorted` (validated, ascending) by MPI_Comm_split of `world`,
/// which is collective over the whole world: members pass color 0 and non-members MPI_UNDEFINED
/// (and remember that they are outside). Every rank therefore reaches a group's first use in the
/// same order, as idist's rule "collectives of one group are issued in the same order everywhere"
/// guarantees. @throws BackendError when MPI_Comm_split fails.
GroupComm split_group(const std::vector<int>& sorted, MPI_Comm world, int world_rank);

/// Frees every communicator in `groups` (MPI_Comm_free) and forgets the groups. Call before
/// MPI_Finalize.
void release(GroupCache& groups) noexcept;

}  // namespace idist::mpi_backend
