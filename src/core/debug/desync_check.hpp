#pragma once
// IDIST_DISTRIBUTED_DEBUG=DETAIL's check before a collective: the group has all-gathered every
// member's fingerprint (through the backend itself, DebugBackend) and compares them.
#include <span>
#include <string>

#include "core/debug/fingerprint.hpp"

namespace idist::core::debug {

/// Returns when every fingerprint of `all` (one per member of group `group_name`, exchanged by the
/// caller) is the same call as `call`, this rank's.
/// @throws DesyncError on every member when they differ, naming each rank and its call.
void check_same_call(std::span<const Fingerprint> all, const Fingerprint& call, const std::string& group_name);

}  // namespace idist::core::debug
