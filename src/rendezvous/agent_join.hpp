#pragma once
// Joining the world on torchrun's agent store. idist's own TCPStore counts its clients and refuses a rank
// claimed twice in its handshake; the agent's c10d store knows nothing of ranks, so the ranks do it
// themselves with counters under the store's prefix (keys of an earlier attempt or initialization live
// under another prefix and are never seen):
//   join/rank_<r>  each process adds 1 for its rank: a second claim (value 2) is refused at once, and the
//                  refusal is published as the verdict so that the others fail too;
//   join/count     each process adds 1: the one that brings it to world_size checks that every rank's key
//                  exists (one CHECK) and publishes the verdict;
//   join/verdict   "ok", or the error every rank raises.
// Every rank waits for the verdict (at most the timeout); a TimeoutError says "k of n workers joined" and
// names the ranks that never did.
#include <chrono>
#include <string>

#include "store/store.hpp"

namespace idist::rendezvous {

/// Joins rank `rank` of `world_size` through `store` (collective: every rank calls it once per store).
/// @throws ValueError when a rank was claimed by two processes (on the second claimer at once, on the
///         others through the verdict); TimeoutError naming the count and the missing ranks when the
///         world is not complete within `timeout`; what the store throws.
void join_agent_store(store::Store& store, int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace idist::rendezvous
