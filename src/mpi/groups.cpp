// Group communicators: MPI_Comm_split of the world on a group's first use.
#include "mpi/groups.hpp"

#include <algorithm>

#include "idist/group.hpp"
#include "mpi/error.hpp"

namespace idist::mpi_backend {

GroupComm split_group(const std::vector<int>& sorted, MPI_Comm world, int world_rank) {
  GroupComm g;
  g.label = Group(sorted).str();
  const auto pos = std::lower_bound(sorted.begin(), sorted.end(), world_rank);
  const bool member = pos != sorted.end() && *pos == world_rank;
  {
    MpiCallGuard guard;  // taken after the cache's lock, as in release()
    // Key = world rank keeps the communicator's rank order equal to the sorted rank list.
    check_mpi(MPI_Comm_split(world, member ? 0 : MPI_UNDEFINED, world_rank, &g.comm), "MPI_Comm_split", world_rank);
  }
  if (member) g.rank = int(pos - sorted.begin());
  return g;
}

void release(GroupCache& groups) noexcept {
  groups.for_each([](GroupComm& g) {
    MpiCallGuard guard;
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
  });
  groups.clear();
}

}  // namespace idist::mpi_backend
