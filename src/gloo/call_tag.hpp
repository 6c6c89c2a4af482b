#pragma once
// The tag of a gloo collective: what the ranks agree on (element type, count, reduce op, root) folded
// into the 32 bits Gloo mixes into its message slots. Ranks that disagree then use different slots, so
// their messages never meet: the collective times out (an idist::Error) instead of Gloo's device
// thread aborting the process when a peer sends more bytes than were posted, or a same-size mismatch
// (float32[8] against float64[4], SUM against MAX, another root) silently mixing data. No message is
// added: it costs a few multiplications per collective.
#include <cstddef>
#include <cstdint>

#include "idist/types.hpp"

namespace idist::gloo_backend {

/// A multiplicative hash of (dtype, count, op, root); `op` and `root` are -1 where they do not apply.
/// Two multiplications: distinct calls collide with probability 2^-32.
inline std::uint32_t call_tag(DType dtype, std::size_t count, int op, int root) noexcept {
  const std::uint64_t small = (std::uint64_t(dtype) << 56) ^ (std::uint64_t(std::uint32_t(op + 1)) << 48) ^
                              std::uint64_t(std::uint32_t(root + 1));
  const std::uint64_t h = (std::uint64_t(count) * 0x9E3779B97F4A7C15ull ^ small) * 0xC2B2AE3D27D4EB4Full;
  return std::uint32_t(h >> 32);
}

}  // namespace idist::gloo_backend
