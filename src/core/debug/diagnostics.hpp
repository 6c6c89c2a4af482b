#pragma once
// State shared by the debug wrapper and the Works it hands out: settings, per-group sequence numbers,
// the flight recorder and (gloo, nccl) the board through which ranks publish their progress.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/debug/debug_settings.hpp"
#include "core/debug/fingerprint.hpp"
#include "core/debug/flight_recorder.hpp"
#include "core/debug/progress_board.hpp"

namespace idist::core::debug {

/// Sequence numbers, recorder and progress board of one initialized configuration. Thread-safe.
class Diagnostics {
 public:
  /// `board` may be null (serial, mpi): timeouts then name only this rank's position.
  Diagnostics(Settings settings, int rank, int world_size, std::string backend, std::shared_ptr<ProgressBoard> board);

  const Settings& settings() const noexcept { return settings_; }
  FlightRecorder& recorder() noexcept { return recorder_; }

  /// Gives `call` the next sequence number of its group (by group_hash) and, at Info and above with a
  /// board, publishes it as this rank's last started collective of that group.
  void assign_seq(Fingerprint& call);

  /// Text appended to a timeout's message: which members of `members` (world ranks) have not started
  /// sequence number `call.seq` of its group, read from the board; or, without one, this rank's
  /// position and where to look. Never throws.
  std::string laggards(const Fingerprint& call, const std::vector<int>& members, const std::string& group) noexcept;

  /// Records `reason` in the flight recorder's dump (file or stderr). Never throws.
  void dump(const std::string& reason) const noexcept { recorder_.dump(reason, settings_.trace_dir); }

  /// Forgets the board (the backend is being finalized).
  void detach_board();

 private:
  Settings settings_;
  int rank_;
  FlightRecorder recorder_;
  std::mutex mutex_;
  std::unordered_map<std::int64_t, std::int64_t> seq_;  // group hash -> last assigned sequence number
  std::shared_ptr<ProgressBoard> board_;
};

}  // namespace idist::core::debug
