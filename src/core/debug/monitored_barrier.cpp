// The public face of the diagnostics: debug_level() and monitored_barrier().
#include <fmt/format.h>

#include "core/debug/debug_model.hpp"
#include "idist/context.hpp"
#include "idist/debug.hpp"
#include "idist/error.hpp"

namespace idist {

DebugLevel debug_level() { return core::debug::level_of(current_model()); }

void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  if (timeout.count() <= 0)
    throw ValueError(fmt::format("monitored_barrier: timeout should be positive, but given {} ms", timeout.count()));
  ComputationModel& m = current_model();
  if (!m.group_rank(group)) return;  // ranks outside the group take no part
  m.monitored_barrier(group, timeout, wait_all_ranks);
}

void monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  monitored_barrier(Group{}, timeout, wait_all_ranks);
}

}  // namespace idist
