#include "core/debug/fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace idist::core::debug {

const char* to_string(Collective c) noexcept {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::AllGather: return "all_gather";
    case Collective::AllGatherV: return "all_gather_v";
    case Collective::Broadcast: return "broadcast";
    case Collective::Barrier: return "barrier";
  }
  return "unknown collective";
}

bool Fingerprint::same_call(const Fingerprint& o) const noexcept {
  return seq == o.seq && collective == o.collective && op == o.op && dtype == o.dtype && count == o.count &&
         root == o.root && group_hash == o.group_hash;
}

std::string Fingerprint::describe() const {
  const auto c = Collective(collective);
  // Words received from a peer may hold anything: print out-of-range values as numbers.
  const bool known = collective >= 0 && collective <= std::int64_t(Collective::Barrier);
  std::string s = known ? to_string(c) : fmt::format("collective#{}", collective);
  if (known && c != Collective::Barrier) {
    const bool dtype_known = dtype >= 0 && dtype <= std::int64_t(DType::Float64);
    s += fmt::format(" {}[{}]", dtype_known ? to_string(DType(dtype)) : std::string_view("dtype?"), count);
  }
  if (op >= 0 && op <= std::int64_t(ReduceOp::Or)) s += fmt::format(" {}", to_string(ReduceOp(op)));
  if (root >= 0) s += fmt::format(" src {}", root);
  s += fmt::format(" seq {}", seq);
  return s;
}

std::int64_t group_hash(const Group& group) {
  if (group.is_world()) return 0;
  std::vector<int> ranks = group.ranks();
  std::sort(ranks.begin(), ranks.end());
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the ranks
  for (int r : ranks) h = (h ^ std::uint64_t(std::uint32_t(r))) * 1099511628211ull;
  return std::int64_t(h >> 1);
}

std::string compare(std::span<const Fingerprint> all, const std::string& group_name) {
  bool same = true;
  for (const Fingerprint& f : all) same = same && f.same_call(all[0]);
  if (same) return {};
  // Ranks grouped by identical calls, in order of first appearance.
  std::vector<bool> done(all.size(), false);
  std::string parts;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (done[i]) continue;
    std::string ranks;
    std::size_t n = 0;
    for (std::size_t j = i; j < all.size(); ++j) {
      if (done[j] || !all[j].same_call(all[i])) continue;
      done[j] = true;
      ranks += fmt::format("{}{}", n++ ? ", " : "", all[j].rank);
    }
    parts += fmt::format("{}{} {}: {}", parts.empty() ? "" : "; ", n > 1 ? "ranks" : "rank", ranks, all[i].describe());
  }
  return fmt::format("collectives differ on group {}: {}", group_name, parts);
}

}  // namespace idist::core::debug
