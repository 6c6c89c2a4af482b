#pragma once
// What a rank is about to do in one collective, as a fixed-size record that the group exchanges
// (IDIST_DISTRIBUTED_DEBUG=DETAIL) and the flight recorder keeps.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "idist/op_type.hpp"
#include "idist/operation.hpp"
#include "idist/types.hpp"

namespace idist::core::debug {

/// One collective as issued by one rank. Plain int64 words, so that it travels as an Int64 buffer.
/// `collective`: the OpType; `count`: elements (all_gather: this rank's input; all_gather_v: the sum
/// over the group); `op` / `root`: -1 where they do not apply (root: a world rank); `group_hash`:
/// ProcessGroup::hash().
struct Fingerprint {
  std::int64_t seq = 0;
  std::int64_t collective = 0;
  std::int64_t op = -1;
  std::int64_t dtype = -1;
  std::int64_t count = 0;
  std::int64_t root = -1;
  std::int64_t group_hash = 0;
  std::int64_t rank = 0;  ///< the world rank that issued it (not compared)

  /// Number of int64 words.
  static constexpr std::size_t kWords = 8;
  /// Equal in everything but `rank`.
  bool same_call(const Fingerprint& o) const noexcept;
  /// "all_reduce float32[4] SUM seq 12", "broadcast float32[4] src 0 seq 12", "barrier seq 3".
  std::string describe() const;
  /// The operation's name (to_string(OpType)), or "collective#N" for a value outside OpType.
  std::string name() const;
};
static_assert(sizeof(Fingerprint) == Fingerprint::kWords * sizeof(std::int64_t));

/// The fingerprint of an operation (seq and rank left at 0).
Fingerprint fingerprint_of(const Reduction& r);
/// The fingerprint of a gathering.
Fingerprint fingerprint_of(const Gathering& g);
/// The fingerprint of a distribution.
Fingerprint fingerprint_of(const Distribution& d);
/// The fingerprint of a point-to-point message issued by world rank `rank`: root is the sender, the
/// group hash names the pair.
Fingerprint fingerprint_of(const PointToPoint& p, int rank);
/// The fingerprint of a barrier of `group`.
Fingerprint barrier_fingerprint(const ProcessGroup& group);

/// nullopt-like: empty when every fingerprint is the same call; otherwise the DesyncError text naming
/// each rank and what it issued, ranks grouped by identical calls, e.g.
/// "collectives differ on group world: rank 0: all_reduce float32[4] SUM seq 12; rank 1: broadcast
/// float32[4] src 0 seq 12".
std::string compare(std::span<const Fingerprint> all, const std::string& group_name);

}  // namespace idist::core::debug
