#include "core/debug/fingerprint.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace idist::core::debug {

bool Fingerprint::same_call(const Fingerprint& o) const noexcept {
  return seq == o.seq && collective == o.collective && op == o.op && dtype == o.dtype && count == o.count &&
         root == o.root && group_hash == o.group_hash;
}

std::string Fingerprint::name() const {
  // Words received from a peer may hold anything: out-of-range values print as numbers.
  if (collective >= 0 && collective < std::int64_t(kOpTypeCount)) return std::string(to_string(OpType(collective)));
  return fmt::format("collective#{}", collective);
}

std::string Fingerprint::describe() const {
  const bool known = collective >= 0 && collective < std::int64_t(kOpTypeCount);
  std::string s = name();
  if (known && OpType(collective) != OpType::Barrier) {
    const bool dtype_known = dtype >= 0 && dtype < std::int64_t(kDTypeCount);
    s += fmt::format(" {}[{}]", dtype_known ? to_string(DType(dtype)) : std::string_view("dtype?"), count);
  }
  if (op >= 0 && op <= std::int64_t(ReduceOp::Or)) s += fmt::format(" {}", to_string(ReduceOp(op)));
  if (root >= 0) s += fmt::format(" src {}", root);
  s += fmt::format(" seq {}", seq);
  return s;
}

namespace {
Fingerprint make(OpType op, DType dtype, std::size_t count, std::int64_t reduce_op, int root,
                 const ProcessGroup& group) {
  Fingerprint f;
  f.collective = std::int64_t(op);
  f.dtype = std::int64_t(dtype);
  f.count = std::int64_t(count);
  f.op = reduce_op;
  f.root = root >= 0 ? group.ranks()[std::size_t(root)] : -1;  // the world rank, as the user named it
  f.group_hash = group.hash();
  return f;
}
}  // namespace

Fingerprint fingerprint_of(const Reduction& r) {
  return make(r.op, r.in.dtype, r.in.count, std::int64_t(r.reduce_op), r.root, r.group);
}

Fingerprint fingerprint_of(const Gathering& g) {
  // Lengths differ by rank on purpose in all_gather_v: the group compares their sum (out.count, checked
  // by the front door), which every member knows.
  return make(g.op, g.in.dtype, g.counts.empty() ? g.in.count : g.out.count, -1, g.root, g.group);
}

Fingerprint fingerprint_of(const Distribution& d) {
  // all_to_all_v: each rank receives its own total; only the element type is common to the group.
  return make(d.op, d.out.dtype, d.op == OpType::AllToAllV ? 0 : d.out.count, -1, d.root, d.group);
}

Fingerprint fingerprint_of(const PointToPoint& p, int rank) {
  Fingerprint f = make(p.op, p.data.dtype, p.data.count, -1, -1, p.group);
  const int sender = p.op == OpType::Send ? rank : p.peer;
  const int receiver = p.op == OpType::Send ? p.peer : rank;
  f.root = sender;
  // Its own sequence numbers per pair (not the world's, which the other ranks do not advance); the
  // high bit keeps it apart from a group's hash.
  const std::uint64_t lo = std::uint64_t(std::min(sender, receiver));
  const std::uint64_t hi = std::uint64_t(std::max(sender, receiver));
  f.group_hash = std::int64_t(((lo << 32 | hi) * 0x9E3779B97F4A7C15ull) | (std::uint64_t(1) << 63));
  return f;
}

Fingerprint barrier_fingerprint(const ProcessGroup& group) {
  Fingerprint f = make(OpType::Barrier, DType::UInt8, 0, -1, -1, group);
  f.dtype = -1;
  return f;
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
