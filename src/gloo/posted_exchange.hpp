#pragma once
// A posted exchange: the unbound-buffer receives and sends of one operation of a group, posted on the
// caller's thread when the operation is issued (receives first) and waited for later. What the
// posted collectives of gloo_posted.cpp share.
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "idist/types.hpp"

namespace idist::gloo_backend {

/// The slot of one posted operation: a prefix of its own (Gloo's collectives use 0x01-0x08, idist's
/// send / recv 0x50), 32 bits hashed from what the ranks must agree on (the operation, `call`'s tag
/// and every block's length: ranks that disagree never match and time out, instead of Gloo aborting
/// on a longer message than was posted) and the low 24 bits of `seq`, the group's count of posted
/// operations, which keep the operations in flight apart.
std::uint64_t posted_slot(OpType op, std::uint32_t call, std::span<const std::size_t> blocks, std::uint32_t seq);

/// What one posted operation keeps alive until its waits are over.
struct PostedExchange {
  std::vector<std::byte> scratch;                              // received blocks, where not in the output
  std::unique_ptr<gloo::transport::UnboundBuffer> recv, send;  // null when there is nothing to move
  int receives = 0, sends = 0;                                 // posted on `recv` and `send`

  /// Waits for every receive, then every send, until `deadline`; Gloo's errors propagate.
  void wait(std::chrono::steady_clock::time_point deadline) const;
};

}  // namespace idist::gloo_backend
