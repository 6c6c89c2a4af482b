#pragma once
/// @file
/// idist::ProcessGroup, a group of ranks as the backend resolved it (c10d's ProcessGroup, Horovod's
/// ProcessSet, KaMPIng's Communicator): its members, this rank's place among them and, in the backend's
/// subclass, the communicator the collectives run on.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace idist {

/// A resolved process group, always held by a shared_ptr. Made once per group by the backend
/// (ComputationModel::process_group(), which validates the ranks and creates the communicator, collectively where the
/// backend needs it) and shared by every later use: idist::new_group() returns a Group holding it, and the collectives
/// receive it instead of looking the rank list up again. Immutable but for the backend's own state.
///
/// A handle outlives nothing: after finalize() the backend has released its communicator, and a Group
/// that still holds the handle is resolved again by its ranks under the next backend.
class ProcessGroup : public std::enable_shared_from_this<ProcessGroup> {
 public:
  /// A group of `sorted_ranks` (ascending, distinct world ranks) seen from world rank `world_rank` of a
  /// world of `world_size`, made by the model whose id() is `owner`.
  ProcessGroup(std::vector<int> sorted_ranks, int world_rank, int world_size, std::uint64_t owner);
  /// The backend releases its communicator at finalize(); the destructor releases nothing.
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// The member world ranks, ascending.
  const std::vector<int>& ranks() const noexcept { return ranks_; }
  /// Number of members.
  int size() const noexcept { return int(ranks_.size()); }
  /// This rank's position in ranks() (its rank inside the group), or -1 when it is not a member.
  int rank() const noexcept { return rank_; }
  /// Whether this rank is a member.
  bool is_member() const noexcept { return rank_ >= 0; }
  /// Whether the group holds every rank of the world.
  bool is_world() const noexcept { return world_; }
  /// The position of world rank `world_rank` in ranks(), or -1 when it is not a member.
  int position_of(int world_rank) const noexcept;
  /// "world" or the member list "[0, 2, 5]", for messages.
  const std::string& name() const noexcept { return name_; }
  /// A hash of the member list, 0 for the world: the group's key in the debug layer's records and
  /// fingerprints, equal on every rank.
  std::int64_t hash() const noexcept { return hash_; }
  /// The id of the model that resolved it (ComputationModel::id()).
  std::uint64_t owner() const noexcept { return owner_; }

 private:
  std::vector<int> ranks_;
  int rank_;
  bool world_;
  std::string name_;
  std::int64_t hash_;
  std::uint64_t owner_;
};

}  // namespace idist
