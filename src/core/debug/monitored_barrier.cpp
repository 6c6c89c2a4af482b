// The public face of the diagnostics: debug_level() and monitored_barrier().
#include "core/debug/debug_backend.hpp"
#include "idist/context.hpp"
#include "idist/debug.hpp"

namespace idist {

DebugLevel debug_level() { return core::debug::level_of(current_model()); }

void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks) {
  current_model().monitored_barrier(group, timeout, wait_all_ranks);
}

void monitored_barrier(std::chrono::milliseconds timeout, bool wait_all_ranks) {
  monitored_barrier(Group{}, timeout, wait_all_ranks);
}

}  // namespace idist
