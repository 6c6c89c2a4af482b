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

/// FNV-1a over (dtype, count, op, root); `op` and `root` are -1 where they do not apply.
inline std::uint32_t call_tag(DType dtype, std::size_t count, int op, int root) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (std::uint64_t word : {std::uint64_t(dtype), std::uint64_t(count), std::uint64_t(std::int64_t(op)),
                             std::uint64_t(std::int64_t(root))})
    h = (h ^ word) * 1099511628211ull;
  return std::uint32_t(h ^ (h >> 32));
}

}  // namespace idist::gloo_backend
