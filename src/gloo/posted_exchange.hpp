#pragma once
// A posted exchange: the unbound-buffer receives and sends of one operation of a group, posted on the
// caller's thread when the operation is issued (receives first) and waited for later. What the
// posted collectives of gloo_posted.cpp and send / recv share.
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

namespace idist::gloo_backend {

/// What one posted operation keeps alive until its waits are over.
struct PostedExchange {
  std::vector<std::byte> scratch;                              // received blocks, where not in the output
  std::unique_ptr<gloo::transport::UnboundBuffer> recv, send;  // null when there is nothing to move
  int receives = 0, sends = 0;                                 // posted on `recv` and `send`

  /// Waits for every receive, then every send, until `deadline`; Gloo's errors propagate.
  void wait(std::chrono::steady_clock::time_point deadline) const;
};

}  // namespace idist::gloo_backend
