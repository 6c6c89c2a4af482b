#pragma once
/// @file
/// Diagnostics of a desynchronised job, modelled on torch.distributed's TORCH_DISTRIBUTED_DEBUG,
/// flight recorder and monitored_barrier: the debug level, and monitored_barrier.

#include <chrono>
#include <string_view>

#include "idist/group.hpp"

namespace idist {

/// How much the collectives check and record (IDIST_DISTRIBUTED_DEBUG, or InitOptions::debug).
/// Mirrors TORCH_DISTRIBUTED_DEBUG=OFF|INFO|DETAIL.
/// - Off: nothing is added to a collective (the backend's model is used unwrapped).
/// - Info: per-group sequence numbers and the flight recorder; gloo ranks publish their last
///   started sequence number in the rendezvous store, so that a timeout names the ranks that never
///   reached the collective.
/// - Detail: Info, plus before every collective the group exchanges fingerprints (sequence number,
///   collective, reduce op, dtype, count, root, group) and raises DesyncError on every rank when they
///   differ, before any data moves.
enum class DebugLevel { Off, Info, Detail };

/// Parses "OFF", "INFO" or "DETAIL" (upper case, as torch).
/// @throws ValueError naming `text` and the accepted values.
DebugLevel parse_debug_level(std::string_view text);

/// "OFF", "INFO" or "DETAIL".
std::string_view to_string(DebugLevel level) noexcept;

/// The debug level of the current configuration (Off when serial and not initialized with one).
DebugLevel debug_level();

/// Barrier that names the ranks that did not arrive. Mirrors torch.distributed.monitored_barrier:
/// rank 0 of the world waits up to `timeout` for every other rank's arrival (through the rendezvous
/// store on gloo and nccl, point-to-point messages on mpi) and then releases them.
/// @param timeout how long rank 0 waits for the others (milliseconds); the others wait for rank 0's
///        answer at most twice as long.
/// @param wait_all_ranks false: raise at the first rank missing at the deadline; true: name every
///        rank that is missing.
/// @throws TimeoutError on rank 0 naming the missing rank(s) ("rank 2 did not reach
///         monitored_barrier within 500 ms"), and on the ranks that arrived, with the same names;
///         ValueError for a non-positive timeout; BackendError on a backend without support.
void monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks = false);

/// monitored_barrier over `group`: its lowest rank plays rank 0's part.
void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks = false);

}  // namespace idist
