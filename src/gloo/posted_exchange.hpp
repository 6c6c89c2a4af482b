#pragma once
// A posted exchange: the unbound-buffer receives and sends of one operation of a group, posted on the
// caller's thread when the operation is issued (receives first) and waited for later. What the
// posted collectives of gloo_posted.cpp and send / recv share.
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <memory>

namespace idist::gloo_backend {

/// Bytes that are written before they are read: allocated without the zero fill of std::vector, which
/// would touch a whole bucket once more per operation.
class ScratchBytes {
 public:
  void resize(std::size_t n) {
    bytes_ = std::make_unique_for_overwrite<std::byte[]>(n);
    size_ = n;
  }
  std::byte* data() const { return bytes_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte[]> bytes_;
  std::size_t size_ = 0;
};

/// What one posted operation keeps alive until its waits are over.
struct PostedExchange {
  ScratchBytes scratch;                                        // received blocks, where not in the output
  std::unique_ptr<gloo::transport::UnboundBuffer> recv, send;  // null when there is nothing to move
  int receives = 0, sends = 0;                                 // posted on `recv` and `send`

  /// Waits for every receive, then every send, until `deadline`; Gloo's errors propagate.
  void wait(std::chrono::steady_clock::time_point deadline) const;
};

}  // namespace idist::gloo_backend
