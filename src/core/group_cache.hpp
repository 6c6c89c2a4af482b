#pragma once
// The communicators of idist process groups, one cache shared by every backend: an entry per
// group, made on the group's first use and found again by its rank list.
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace idist::core {

/// Entries (a backend's communicator of one group) keyed by the group's validated, ascending rank
/// list, and also by the list exactly as the user wrote it, so that a repeated group costs one map
/// lookup and no allocation (core::validated_ranks() makes a sorted copy). Entries never move once made.
/// Thread safe; `make` runs under the cache's lock, so two threads never create one group twice.
template <class Entry>
class GroupCache {
 public:
  GroupCache() = default;
  GroupCache(const GroupCache&) = delete;
  GroupCache& operator=(const GroupCache&) = delete;

  /// The entry of the group written as `given`, or null before its first get_or_create().
  const Entry* find(const std::vector<int>& given) const {
    std::lock_guard lock(mutex_);
    const auto it = by_given_.find(given);
    return it == by_given_.end() ? nullptr : it->second;
  }

  /// The entry of the group written as `given`, whose ascending form is `sorted`; `make(sorted)`
  /// creates it when no entry for `sorted` exists yet (for mpi and nccl a collective call, which
  /// every rank reaches in the same order). Exceptions from `make` leave the cache unchanged.
  template <class Make>
  Entry& get_or_create(const std::vector<int>& given, const std::vector<int>& sorted, Make make) {
    std::lock_guard lock(mutex_);
    auto it = by_sorted_.find(sorted);
    if (it == by_sorted_.end()) it = by_sorted_.emplace(sorted, make(sorted)).first;
    by_given_.emplace(given, &it->second);
    return it->second;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::vector<int>, Entry> by_sorted_;
  std::map<std::vector<int>, Entry*> by_given_;
};

}  // namespace idist::core
