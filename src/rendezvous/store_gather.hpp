#pragma once
// The rendezvous' one exchange pattern over a store: every rank publishes a value, rank 0 reads
// them all, combines them into one record and publishes it, every rank reads that record. O(world
// size) store requests, not O(world size^2).
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "store/store.hpp"

namespace idist::rendezvous {

/// Publishes `mine` under `<prefix><rank>`; rank 0 waits for every rank's value, calls
/// `combine(values)` (indexed by rank) and publishes the result under `<prefix>result`, which every
/// rank returns. Rank 0 returns only after every rank has read the result (counted under
/// `<prefix>read`), or after `timeout` more. Collective over the world's ranks.
/// @throws TimeoutError on rank 0 naming the ranks that did not publish `what` within `timeout`
///         (at most 16), and on every rank when the result does not appear within `timeout`;
///         whatever `combine` throws (on rank 0).
std::string gather_and_publish(store::Store& store, const std::string& prefix, int rank, int world_size,
                               const std::string& mine, const std::string& what, std::chrono::milliseconds timeout,
                               const std::function<std::string(const std::vector<std::string>&)>& combine);

}  // namespace idist::rendezvous
