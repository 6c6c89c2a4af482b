// Group communicators: MPI_Comm_split of the world on first use, then a cache lookup.
#include "mpi/mpi_groups.hpp"

#include <algorithm>
#include <string>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

const GroupComm* GroupCache::find(const std::vector<int>& ranks) const {
  std::lock_guard lock(mutex_);
  const auto it = by_given_.find(ranks);
  return it == by_given_.end() ? nullptr : it->second;
}

const GroupComm& GroupCache::get_or_create(const std::vector<int>& ranks, const std::vector<int>& sorted,
                                           MPI_Comm world, int world_rank) {
  std::lock_guard lock(mutex_);
  auto it = by_sorted_.find(sorted);
  if (it == by_sorted_.end()) {
    GroupComm g;
    g.ranks = sorted;
    g.label = "[";
    for (std::size_t i = 0; i < sorted.size(); ++i) g.label += (i ? ", " : "") + std::to_string(sorted[i]);
    g.label += "]";
    const auto pos = std::lower_bound(sorted.begin(), sorted.end(), world_rank);
    const bool member = pos != sorted.end() && *pos == world_rank;
    {
      MpiCallGuard guard;
      // Key = world rank keeps the communicator's rank order equal to the sorted rank list.
      check_mpi(MPI_Comm_split(world, member ? 0 : MPI_UNDEFINED, world_rank, &g.comm), "MPI_Comm_split",
                world_rank);
    }
    if (member) g.rank = int(pos - sorted.begin());
    it = by_sorted_.emplace(sorted, std::move(g)).first;
  }
  by_given_.emplace(ranks, &it->second);
  return it->second;
}

void GroupCache::release() noexcept {
  std::lock_guard lock(mutex_);
  MpiCallGuard guard;  // taken after mutex_, as in get_or_create
  for (auto& [ranks, g] : by_sorted_)
    if (g.comm != MPI_COMM_NULL) MPI_Comm_free(&g.comm);
  by_given_.clear();
  by_sorted_.clear();
}

}  // namespace idist::mpi_backend
