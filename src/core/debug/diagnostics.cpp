#include "core/debug/diagnostics.hpp"

#include <fmt/format.h>

namespace idist::core::debug {

Diagnostics::Diagnostics(Settings settings, int rank, int world_size, std::string backend,
                         std::shared_ptr<ProgressBoard> board)
    : settings_(std::move(settings)),
      rank_(rank),
      recorder_(settings_.trace_buffer, rank, world_size, std::move(backend)),
      board_(settings_.level == DebugLevel::Off ? nullptr : std::move(board)) {}

void Diagnostics::assign_seq(Fingerprint& call) {
  std::lock_guard lock(mutex_);
  call.seq = ++seq_[call.group_hash];
  // One store write per collective: the price of naming the missing ranks after a timeout.
  if (board_) board_->publish(call.group_hash, rank_, call.seq);
}

std::string Diagnostics::laggards(const Fingerprint& call, const std::vector<int>& members,
                                  const std::string& group) noexcept {
  const std::string where =
      fmt::format("rank {} was at seq {} of group {} ({})", rank_, call.seq, group, call.describe());
  try {
    std::lock_guard lock(mutex_);
    if (!board_)
      return fmt::format(
          "; {} (this backend has no store through which to ask the other ranks: compare the ranks' "
          "flight recorder dumps with idist_trace)",
          where);
    std::string behind;
    for (int r : members) {
      if (r == rank_) continue;
      const std::optional<std::int64_t> seq = board_->read(call.group_hash, r);
      if (!seq)
        behind += fmt::format("{}rank {} (no collective started on this group)", behind.empty() ? "" : ", ", r);
      else if (*seq < call.seq)
        behind += fmt::format("{}rank {} (last started seq {})", behind.empty() ? "" : ", ", r, *seq);
    }
    if (behind.empty()) return fmt::format("; {}; every other rank of the group started it", where);
    return fmt::format("; {}; ranks that have not reached it: {}", where, behind);
  } catch (const std::exception& e) {
    return fmt::format("; {} (the other ranks' progress could not be read: {})", where, e.what());
  }
}

void Diagnostics::detach_board() {
  std::lock_guard lock(mutex_);
  board_.reset();
}

}  // namespace idist::core::debug
