#pragma once
/// @file
/// idist's own settings (IDIST_*), each parsed here and nowhere else, into the type its reader uses.
/// Every function reads its variable when called (launch/environment.hpp says why); the caller keeps
/// the defaults that depend on the world (nodes, ranks) and decides when to read. An unset or empty
/// variable gives nullopt unless said otherwise.
/// @throws ValueError from every function but the flags, naming the variable, its value and what it
///         accepts (the table of launch/variables.hpp names the same forms).
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>

#include "idist/debug.hpp"
#include "idist/logging.hpp"

namespace idist::launch {

/// IDIST_LOG_LEVEL: DEBUG, INFO, WARNING or OFF, in any case.
std::optional<LogLevel> log_level();
/// IDIST_DISTRIBUTED_DEBUG: OFF, INFO or DETAIL.
std::optional<DebugLevel> distributed_debug();
/// IDIST_TRACE_DIR: where the flight recorder writes its dumps.
std::optional<std::string> trace_dir();
/// IDIST_TRACE_BUFFER: how many collectives the flight recorder keeps, 1 to 10,000,000.
std::optional<std::size_t> trace_buffer();

/// The gloo backend's all-reduce algorithm (IDIST_GLOO_ALLREDUCE).
enum class GlooAllReduce {
  Auto,   ///< "auto" or unset: Posted on a group whose ranks span several hosts, else Ring
  Ring,   ///< "ring": gloo::allreduce's ring
  Bcube,  ///< "bcube": gloo::allreduce's bcube
  Posted  ///< "posted": the exchange posted at issue (gloo_posted.cpp), on every group
};
/// IDIST_GLOO_ALLREDUCE: auto (or unset), ring, bcube or posted.
GlooAllReduce gloo_allreduce();
/// IDIST_GLOO_LOOP_NICE: 1 to 19 gives that nice value; "off" or "0" gives 0 (the creating thread's
/// priority); unset gives nullopt (the caller's default, which depends on the number of nodes).
std::optional<int> gloo_loop_nice();
/// IDIST_GLOO_LOOP_BATCH: 0 or 1 (whether Gloo's transport thread runs under SCHED_BATCH).
std::optional<bool> gloo_loop_batch();

/// IDIST_GLOO_PEER_WATCH's "DELAY_MS,PROBE_MS,ROUNDS" (probe time and rounds positive).
struct PeerWatchTimes {
  std::chrono::milliseconds delay;          ///< an operation's wait before its hosts are probed
  std::chrono::milliseconds probe_timeout;  ///< one probe round
  int rounds;                               ///< unanswered rounds that make a host lost
};
/// IDIST_GLOO_PEER_WATCH as read.
struct PeerWatchSetting {
  bool on = true;                       ///< false for "off" or "0"
  std::optional<PeerWatchTimes> times;  ///< nullopt for "on", "1" or unset: the watch's defaults
};
/// IDIST_GLOO_PEER_WATCH: "on" / "1" / unset, "off" / "0", or "DELAY_MS,PROBE_MS,ROUNDS".
PeerWatchSetting gloo_peer_watch();

/// IDIST_MPI_BLOCKING: 0 or 1.
std::optional<bool> mpi_blocking();
/// IDIST_MPI_PROGRESS_THREAD: 0 or 1; "auto" gives nullopt as unset does.
std::optional<bool> mpi_progress_thread();
/// IDIST_MPI_PROGRESS_CHUNK_BYTES: an integer >= 0.
std::optional<std::size_t> mpi_progress_chunk_bytes();
/// IDIST_MPI_BLOCKING_CHUNK_BYTES: an integer >= 0.
std::optional<std::size_t> mpi_blocking_chunk_bytes();
/// IDIST_MPI_PROGRESS_INTERVAL_US: an integer >= 1.
std::optional<std::chrono::microseconds> mpi_progress_interval();
/// IDIST_MPI_MAX_COUNT: an integer >= 1, at most INT_MAX (larger values give INT_MAX).
std::optional<std::size_t> mpi_max_count();

/// IDIST_NCCL_BLOCKING_WAIT == "1". Never throws.
bool nccl_blocking_wait();
/// IDIST_NCCL_NO_SPLIT == "1". Never throws.
bool nccl_no_split();

/// IDIST_C10D_STORE_PROTOCOL's text ("" when unset); the c10d client parses it with the versions it knows
/// (store/c10d/protocol.hpp's parse_version_override). Never throws.
std::string c10d_store_protocol();
/// IDIST_STORE_TOKEN, possibly empty: the TCP store takes a set value as the job's token; spawn passes a
/// non-empty one on instead of making its own. Never throws.
std::optional<std::string> store_token();
/// IDIST_SPAWN_BIND: 0 or 1.
std::optional<bool> spawn_bind();

/// IDIST_BUCKET_AUTOTUNE == "0": auto_model keeps its bucket cap. Never throws.
bool bucket_autotune_disabled();

}  // namespace idist::launch
