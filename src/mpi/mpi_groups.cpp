// Group communicators: MPI_Comm_split of the world on a group's first use.
#include "mpi/mpi_groups.hpp"

#include <algorithm>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

std::shared_ptr<MpiGroup> split_group(std::vector<int> sorted, MPI_Comm world, int world_rank, int world_size,
                                      std::uint64_t owner) {
  const bool member = std::binary_search(sorted.begin(), sorted.end(), world_rank);
  MPI_Comm comm = MPI_COMM_NULL;
  {
    MpiCallGuard guard;  // taken under the front door's group lock, as in release()
    // Key = world rank keeps the communicator's rank order equal to the sorted rank list.
    check_mpi(MPI_Comm_split(world, member ? 0 : MPI_UNDEFINED, world_rank, &comm), "MPI_Comm_split", world_rank);
  }
  return std::make_shared<MpiGroup>(std::move(sorted), world_rank, world_size, owner, comm);
}

void release(std::vector<std::shared_ptr<MpiGroup>>& groups) noexcept {
  for (auto& g : groups) {
    MpiCallGuard guard;
    if (g->comm != MPI_COMM_NULL) MPI_Comm_free(&g->comm);
  }
  groups.clear();
}

}  // namespace idist::mpi_backend
