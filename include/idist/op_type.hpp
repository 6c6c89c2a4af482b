#pragma once
/// @file
/// The vocabulary of operations: OpType names every operation of a ComputationModel once (as c10d's
/// OpType does), and Completion says how the caller of one learns that it completed. Every message,
/// Work, flight recorder entry and desync fingerprint takes an operation's name from to_string(OpType).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace idist {

/// An operation on a process group. Its integer value travels in the desync fingerprints
/// (IDIST_DISTRIBUTED_DEBUG=DETAIL), so new values are added at the end.
enum class OpType : std::uint8_t {
  AllReduce,         ///< all_reduce (torch.distributed.all_reduce)
  AllGather,         ///< all_gather of the same count on every rank (all_gather_into_tensor)
  AllGatherV,        ///< all_gather of counts that differ by rank
  Broadcast,         ///< broadcast
  Barrier,           ///< barrier
  MonitoredBarrier,  ///< monitored_barrier
  Reduce,            ///< reduce to one rank
  Gather,            ///< gather to one rank
  Scatter,           ///< scatter from one rank
  ReduceScatter,     ///< reduce_scatter
  AllToAll,          ///< all_to_all of equal blocks
  AllToAllV,         ///< all_to_all of blocks whose sizes differ
  Send,              ///< point-to-point send
  Recv,              ///< point-to-point receive
  ReduceScatterV,    ///< reduce_scatter whose blocks differ in length by rank
};

/// Number of OpType values.
inline constexpr std::size_t kOpTypeCount = 15;

/// The name of `op` as idist's functions spell it: "all_reduce", "all_gather", "all_gather_v",
/// "broadcast", "barrier", "monitored_barrier", "reduce", "gather", "scatter", "reduce_scatter",
/// "all_to_all", "all_to_all_v", "send", "recv", "reduce_scatter_v"; "unknown operation" for a value outside the enum.
/// The view is of a string literal, so its data() is null-terminated.
constexpr std::string_view to_string(OpType op) noexcept {
  constexpr std::array<std::string_view, kOpTypeCount> names = {
      "all_reduce",        "all_gather",   "all_gather_v", "broadcast", "barrier",
      "monitored_barrier", "reduce",       "gather",       "scatter",   "reduce_scatter",
      "all_to_all",        "all_to_all_v", "send",         "recv",      "reduce_scatter_v"};
  const auto i = static_cast<std::size_t>(op);
  return i < names.size() ? names[i] : std::string_view("unknown operation");
}

/// How the caller of an operation learns that it completed.
enum class Completion {
  /// Through the Work the call returns (the non-blocking calls: all_reduce_async, ...).
  Async,
  /// The call returns once the operation completed (or throws); the Work it returns is already
  /// complete. Backends use their fastest blocking path (MPI_Allreduce, Gloo on the caller's thread,
  /// NCCL waiting inside the call) and allocate no Work.
  Blocking,
};

}  // namespace idist
