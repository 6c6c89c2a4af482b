#pragma once
/// @file
/// idist::Group, a subset of the world's ranks that a collective runs over (a process group).

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "idist/process_group.hpp"

namespace idist {

/// A process group: a list of distinct world ranks, or the whole world when empty.
///
/// Mirrors the `group` argument of ignite.distributed's collectives, which takes either a process
/// group made by new_group() or a plain list of ranks. A Group is a cheap value (copies share the
/// backend's resolution). The one new_group() returns holds the group as the backend resolved it
/// (communicator, this rank's position), so collectives on it find it without a lookup. A Group made
/// from a plain list is resolved on its first use, which is a collective step for some backends (so
/// every rank must use groups in the same order), and found again by its list on later uses.
class Group {
 public:
  /// The whole world.
  Group() = default;
  /// The ranks given (a plain list is accepted wherever a Group is, as in ignite).
  /// Validated (non-empty, distinct, each in [0, world size)) when first used; the rank of a member
  /// inside the group is its position in ascending order, as in torch.distributed.new_group.
  Group(std::vector<int> ranks);  // NOLINT(google-explicit-constructor): ignite accepts lists
  /// The ranks given.
  Group(std::initializer_list<int> ranks) : Group(std::vector<int>(ranks)) {}
  /// The ranks given with their resolution by the current backend (what new_group() returns).
  Group(std::vector<int> ranks, std::shared_ptr<const ProcessGroup> resolved);

  /// True for the whole world.
  bool is_world() const noexcept { return ranks_.empty(); }
  /// The member world ranks as given; empty for the whole world.
  const std::vector<int>& ranks() const noexcept { return ranks_; }
  /// "world" or "[1, 2, 3]", for messages.
  std::string str() const;
  /// Whether world rank `world_rank` is a member: always for the world, else whether the list holds
  /// it. Nothing is validated or communicated (the group's first collective does both).
  bool contains(int world_rank) const noexcept;
  /// The backend's resolution this Group carries (made by new_group()), or null.
  const std::shared_ptr<const ProcessGroup>& resolved() const noexcept { return resolved_; }

  /// Same member ranks in the same order (two world groups are equal); the resolution is not compared.
  friend bool operator==(const Group& a, const Group& b) noexcept { return a.ranks_ == b.ranks_; }

 private:
  std::vector<int> ranks_;
  std::shared_ptr<const ProcessGroup> resolved_;
};

}  // namespace idist
