#pragma once
/// @file
/// torch.distributed.monitored_barrier over a rendezvous store (gloo): the leader waits for each
/// member's arrival key and publishes a verdict naming the members that did not arrive.

#include <chrono>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::store {

/// One monitored barrier named `name` (unique per call, e.g. "<group>/<generation>") over `members`
/// (world ranks, ascending; members[0] leads). The leader waits up to `timeout` for the others'
/// "<name>/arrived/<rank>" keys, then sets "<name>/verdict"; the others set their key and wait for
/// the verdict (at most twice `timeout`).
/// @throws TimeoutError on the leader naming the missing ranks (the first one in rank order, or all of
///         them with `wait_all_ranks`), on the others with the same verdict, or naming the leader when
///         it never answered.
void store_monitored_barrier(Store& store, const std::string& name, const std::vector<int>& members, int rank,
                             std::chrono::milliseconds timeout, bool wait_all_ranks);

}  // namespace idist::store
