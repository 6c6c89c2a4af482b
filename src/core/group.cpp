// Group and ProcessGroup.
#include "idist/group.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace idist {

namespace {

// FNV-1a over the ranks, 0 for the world: what the debug layer keys groups by on every rank.
std::int64_t hash_of(const std::vector<int>& sorted, bool world) {
  if (world) return 0;
  std::uint64_t h = 1469598103934665603ull;
  for (int r : sorted) h = (h ^ std::uint64_t(std::uint32_t(r))) * 1099511628211ull;
  return std::int64_t(h >> 1);
}

}  // namespace

Group::Group(std::vector<int> ranks) : ranks_(std::move(ranks)) {}

Group::Group(std::vector<int> ranks, std::shared_ptr<const ProcessGroup> resolved)
    : ranks_(std::move(ranks)), resolved_(std::move(resolved)) {}

bool Group::contains(int world_rank) const noexcept {
  return is_world() || std::find(ranks_.begin(), ranks_.end(), world_rank) != ranks_.end();
}

std::string Group::str() const {
  if (is_world()) return "world";
  return fmt::format("[{}]", fmt::join(ranks_, ", "));
}

ProcessGroup::ProcessGroup(std::vector<int> sorted_ranks, int world_rank, int world_size, std::uint64_t owner)
    : ranks_(std::move(sorted_ranks)),
      rank_(-1),
      world_(int(ranks_.size()) == world_size),
      name_(world_ ? std::string("world") : fmt::format("[{}]", fmt::join(ranks_, ", "))),
      hash_(hash_of(ranks_, world_)),
      owner_(owner) {
  rank_ = position_of(world_rank);
}

int ProcessGroup::position_of(int world_rank) const noexcept {
  const auto it = std::lower_bound(ranks_.begin(), ranks_.end(), world_rank);
  return it != ranks_.end() && *it == world_rank ? int(it - ranks_.begin()) : -1;
}

}  // namespace idist
