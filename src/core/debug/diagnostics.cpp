#include "core/debug/diagnostics.hpp"

#include <fmt/format.h>

#include "idist/config.hpp"
#if IDIST_HAVE_GLOO || IDIST_HAVE_NCCL  // the store is built with either
#include "store/store.hpp"
#endif

namespace idist::core::debug {

Diagnostics::Diagnostics(Settings settings, int rank, int world_size, std::string backend, store::Store* store)
    : settings_(std::move(settings)),
      rank_(rank),
      recorder_(settings_.trace_buffer, rank, world_size, std::move(backend)),
      store_(settings_.level == DebugLevel::Off ? nullptr : store) {}

std::string Diagnostics::progress_key(std::int64_t group_hash, int rank) {
  return fmt::format("idist/debug/seq/{}/{}", group_hash, rank);
}

void Diagnostics::assign_seq(Fingerprint& call) {
  std::lock_guard lock(mutex_);
  call.seq = ++seq_[call.group_hash];
#if IDIST_HAVE_GLOO || IDIST_HAVE_NCCL  // the store is built with either
  // One store write per collective: the price of naming the missing ranks after a timeout.
  if (store_) store_->set_string(progress_key(call.group_hash, rank_), std::to_string(call.seq));
#endif
}

std::string Diagnostics::laggards(const Fingerprint& call, const std::vector<int>& members,
                                  const std::string& group) noexcept {
  const std::string where =
      fmt::format("rank {} was at seq {} of group {} ({})", rank_, call.seq, group, call.describe());
  try {
#if IDIST_HAVE_GLOO || IDIST_HAVE_NCCL  // the store is built with either
    std::lock_guard lock(mutex_);
    if (store_) {
      std::string behind;
      for (int r : members) {
        if (r == rank_) continue;
        const std::string key = progress_key(call.group_hash, r);
        if (!store_->check({key})) {
          behind += fmt::format("{}rank {} (no collective started on this group)", behind.empty() ? "" : ", ", r);
          continue;
        }
        const long long seq = std::stoll(store_->get_string(key));
        if (seq < call.seq)
          behind += fmt::format("{}rank {} (last started seq {})", behind.empty() ? "" : ", ", r, seq);
      }
      if (behind.empty()) return fmt::format("; {}; every other rank of the group started it", where);
      return fmt::format("; {}; ranks that have not reached it: {}", where, behind);
    }
#endif
    (void)members;
    return fmt::format(
        "; {} (this backend has no store through which to ask the other ranks: compare the ranks' "
        "flight recorder dumps with idist_trace)",
        where);
  } catch (const std::exception& e) {
    return fmt::format("; {} (the other ranks' progress could not be read: {})", where, e.what());
  }
}

void Diagnostics::detach_store() {
  std::lock_guard lock(mutex_);
  store_ = nullptr;
}

}  // namespace idist::core::debug
