#pragma once
// The flight recorder: each rank's last N collectives (IDIST_TRACE_BUFFER, default 2000) in a ring,
// written out on a timeout or an error: as JSON to IDIST_TRACE_DIR/idist_trace_rank<R>.json, read by
// tools/trace (idist_trace), or as a short summary on stderr when no directory is set.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/debug/fingerprint.hpp"

namespace idist::core::debug {

/// Where a recorded collective got to.
enum class TraceState { Started, Completed, Failed, TimedOut, Desync };

/// "started", "completed", "failed", "timed_out", "desync".
const char* to_string(TraceState s) noexcept;

/// One recorded collective. Times: microseconds since the Unix epoch (comparable across hosts with
/// synchronised clocks); end_us 0 while it runs.
struct TraceEntry {
  Fingerprint call;
  std::string group;
  std::int64_t start_us = 0;
  std::int64_t end_us = 0;
  TraceState state = TraceState::Started;
};

/// Ring buffer of the last `capacity` collectives of this rank. Thread-safe.
class FlightRecorder {
 public:
  /// `capacity` >= 1 entries; `rank`, `world_size` and `backend` head the dump.
  FlightRecorder(std::size_t capacity, int rank, int world_size, std::string backend);

  /// Records the start of `call` on `group`; returns its id for finish().
  std::uint64_t start(const Fingerprint& call, const std::string& group);
  /// Sets the state and end time of entry `id` (ignored once overwritten).
  void finish(std::uint64_t id, TraceState state);
  /// The entries, oldest first.
  std::vector<TraceEntry> entries() const;

  /// Writes the entries with `reason`: to `dir`/idist_trace_rank<R>.json when `dir` is not empty,
  /// else a summary of the last entries on stderr. Never throws (a failure is reported on stderr).
  void dump(const std::string& reason, const std::string& dir) const noexcept;

  /// The JSON text of dump(): one object; "entries" holds one entry per line.
  std::string to_json(const std::string& reason) const;

 private:
  mutable std::mutex mutex_;
  std::vector<TraceEntry> ring_;
  std::uint64_t next_ = 0;  // id of the next entry; entry id lives at ring_[id % capacity]
  int rank_;
  int world_size_;
  std::string backend_;
};

/// Microseconds since the Unix epoch.
std::int64_t now_us() noexcept;

}  // namespace idist::core::debug
