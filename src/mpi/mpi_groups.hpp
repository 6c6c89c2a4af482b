#pragma once
// Communicators of idist process groups, created on first use and cached by rank list.
#include <mpi.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace idist::mpi_backend {

/// One process group as seen by this rank.
struct GroupComm {
  MPI_Comm comm = MPI_COMM_NULL;  ///< MPI_COMM_NULL when this rank is not a member
  int rank = -1;                  ///< this rank's position in `ranks`, -1 when not a member
  std::vector<int> ranks;         ///< member world ranks, ascending (communicator rank order)
  std::string label;              ///< "[0, 2, 5]": how messages (the watchdog's) name the group
};

/// The communicators of the groups used so far.
///
/// A group's communicator is made by MPI_Comm_split of the world communicator, which is collective
/// over the whole world: members pass color 0 and non-members MPI_UNDEFINED (and remember that they
/// are outside). It is therefore created the first time every rank reaches the group, in the same
/// order on every rank, which idist's rule "collectives of one group are issued in the same order
/// everywhere" guarantees. Entries are found by the rank list as the user wrote it and by its
/// sorted form, so a repeated group costs one map lookup and no allocation.
class GroupCache {
 public:
  GroupCache() = default;
  GroupCache(const GroupCache&) = delete;
  GroupCache& operator=(const GroupCache&) = delete;

  /// The cached entry for `ranks` exactly as given, or null.
  const GroupComm* find(const std::vector<int>& ranks) const;

  /// The entry for `ranks` as given, whose validated ascending form is `sorted`; creates the
  /// communicator (collective over `world`) when no entry for `sorted` exists yet.
  /// @throws BackendError when MPI_Comm_split fails.
  const GroupComm& get_or_create(const std::vector<int>& ranks, const std::vector<int>& sorted, MPI_Comm world,
                                 int world_rank);

  /// Frees every communicator (MPI_Comm_free) and forgets the groups. Call before MPI_Finalize.
  void release() noexcept;

 private:
  mutable std::mutex mutex_;
  std::map<std::vector<int>, GroupComm> by_sorted_;
  std::map<std::vector<int>, const GroupComm*> by_given_;
};

}  // namespace idist::mpi_backend
