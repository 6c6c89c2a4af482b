#pragma once
// Rate-limited log of the connections the TCPStore server refuses: the first refusal of each reason is
// printed with its peer, later ones are counted and summed up at most once per interval, so a flood of
// bad connections cannot flood stderr. Used on the server thread only (no lock). Internal.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace idist::store::detail {

/// Counts refusals per reason and prints them to stderr, rate-limited.
class RejectLog {
 public:
  using Clock = std::chrono::steady_clock;

  /// @param interval shortest time between two lines of one reason after its first.
  explicit RejectLog(std::chrono::milliseconds interval = std::chrono::seconds(10)) : interval_(interval) {}
  /// Records one refusal of `peer` ("ip:port") for `reason` (a fixed text: the rate limit is per reason);
  /// `detail` (e.g. the announced length) is printed with the first refusal of a reason only.
  void note(const std::string& reason, const std::string& peer, const std::string& detail = {});
  /// Refusals recorded so far, every reason together.
  std::uint64_t total() const { return total_; }

 private:
  struct Entry {
    std::uint64_t unreported = 0;
    Clock::time_point last_print{};
    bool printed = false;
  };
  std::chrono::milliseconds interval_;
  std::map<std::string, Entry> entries_;
  std::uint64_t total_ = 0;
};

}  // namespace idist::store::detail
