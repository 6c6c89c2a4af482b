#pragma once
/// @file
/// idist::Group, a subset of the world's ranks that a collective runs over (a process group).

#include <initializer_list>
#include <string>
#include <vector>

namespace idist {

/// A process group: a list of distinct world ranks, or the whole world when empty.
///
/// Mirrors the `group` argument of ignite.distributed's collectives, which takes either a process
/// group made by new_group() or a plain list of ranks. A Group is a cheap value; the backend
/// creates (and caches) its communicator the first time a collective uses it, which is itself a
/// collective step, so every rank must use groups in the same order.
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

  /// True for the whole world.
  bool is_world() const noexcept { return ranks_.empty(); }
  /// The member world ranks as given; empty for the whole world.
  const std::vector<int>& ranks() const noexcept { return ranks_; }
  /// "world" or "[1, 2, 3]", for messages.
  std::string str() const;

  /// Same member ranks in the same order (two world groups are equal).
  friend bool operator==(const Group&, const Group&) = default;

 private:
  std::vector<int> ranks_;
};

}  // namespace idist
