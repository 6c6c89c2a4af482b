#include "core/debug/desync_check.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::core::debug {

void check_same_call(std::span<const Fingerprint> all, const Fingerprint& call, const std::string& group_name) {
  const std::string diff = compare(all, group_name);
  if (!diff.empty())
    throw DesyncError(fmt::format("{} on rank {}: {}; nothing was executed (IDIST_DISTRIBUTED_DEBUG=DETAIL)",
                                  call.name(), call.rank, diff));
}

}  // namespace idist::core::debug
