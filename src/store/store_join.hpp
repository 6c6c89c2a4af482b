#pragma once
/// @file
/// Joining a world of processes over any Store, with store operations only: idist's TCPStore and
/// torchrun's agent store (a c10d TCPStore that knows nothing of ranks) rendezvous the same way. Keys
/// under kJoinPrefix:
///   idist/join/rank_<r>   each process adds 1 for its rank: a second claim (value 2) is refused at once,
///                         and the refusal is published as the verdict so that the others fail too;
///   idist/join/anonymous  processes without a rank count themselves here (no claim can be checked);
///   idist/join/count      each process adds 1: the one that brings it to world_size checks that every
///                         rank's key exists (one CHECK) and publishes the verdict;
///   idist/join/verdict    "ok", or the error every rank raises.
/// Every rank waits for the verdict (at most the timeout); a TimeoutError says "k of n workers joined"
/// and names the ranks that never did.

#include <chrono>

#include "store/store.hpp"

namespace idist::store {

/// Prefix of the join's keys.
inline constexpr const char* kJoinPrefix = "idist/join/";
/// The join counter (decimal text): how many processes joined, the "k" of "k of n workers joined".
inline constexpr const char* kJoinCountKey = "idist/join/count";

/// Counts this process into the world of `world_size` (<= 0: unknown, only counted) and claims `rank`
/// (< 0: unknown, no claim); the process completing the count publishes the verdict.
/// @throws ValueError at once when `rank` was claimed by another process; what the store throws.
void announce_join(Store& store, int rank, int world_size);

/// Waits (at most `timeout`) for the verdict of the join of `world_size` > 0 processes.
/// @throws ValueError when a rank was claimed twice (the first claimer's words); TimeoutError naming the
///         count and the ranks that never joined; what the store throws.
void await_join(Store& store, int world_size, std::chrono::milliseconds timeout);

/// announce_join() then await_join() within `timeout` (collective: every rank calls it once per store).
void join_world(Store& store, int rank, int world_size, std::chrono::milliseconds timeout);

}  // namespace idist::store
