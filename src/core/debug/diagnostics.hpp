#pragma once
// State shared by the debug wrapper and the Works it hands out: settings, per-group sequence numbers,
// the flight recorder and (gloo) the store through which ranks publish their progress.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/debug/debug_settings.hpp"
#include "core/debug/fingerprint.hpp"
#include "core/debug/flight_recorder.hpp"
#include "idist/computation_model.hpp"

namespace idist::core::debug {

/// Sequence numbers, recorder and progress board of one initialized configuration. Thread-safe.
class Diagnostics {
 public:
  /// `store` may be null (mpi, nccl): no progress board, timeouts name only this rank's position.
  Diagnostics(Settings settings, int rank, int world_size, std::string backend, store::Store* store);

  const Settings& settings() const noexcept { return settings_; }
  FlightRecorder& recorder() noexcept { return recorder_; }

  /// Gives `call` the next sequence number of its group (by group_hash) and, at Info and above with a
  /// store, publishes it as this rank's last started collective of that group.
  void assign_seq(Fingerprint& call);

  /// Text appended to a timeout's message: which members of `members` (world ranks) have not started
  /// sequence number `call.seq` of its group, read from the store; or, without a store, this rank's
  /// position and where to look. Never throws.
  std::string laggards(const Fingerprint& call, const std::vector<int>& members, const std::string& group) noexcept;

  /// Records `reason` in the flight recorder's dump (file or stderr). Never throws.
  void dump(const std::string& reason) const noexcept { recorder_.dump(reason, settings_.trace_dir); }

  /// Forgets the store (the backend was finalized).
  void detach_store();

 private:
  static std::string progress_key(std::int64_t group_hash, int rank);

  Settings settings_;
  int rank_;
  FlightRecorder recorder_;
  std::mutex mutex_;
  std::unordered_map<std::int64_t, std::int64_t> seq_;  // group hash -> last assigned sequence number
  store::Store* store_;
};

}  // namespace idist::core::debug
