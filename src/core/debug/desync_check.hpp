#pragma once
// IDIST_DISTRIBUTED_DEBUG=DETAIL's check before a collective: the group all-gathers every member's
// fingerprint through the backend itself and compares them.
#include <string>

#include "core/debug/fingerprint.hpp"
#include "idist/computation_model.hpp"

namespace idist::core::debug {

/// Exchanges `call` over `group` on `model` (one all_gather of Fingerprint::kWords int64 per rank) and
/// returns nothing when every member issued the same call.
/// @throws DesyncError on every member when they differ, naming each rank and its call.
void check_same_call(ComputationModel& model, const Fingerprint& call, const Group& group, const std::string& name);

}  // namespace idist::core::debug
