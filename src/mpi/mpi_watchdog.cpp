// The watchdog of blocking MPI collectives (see mpi_watchdog.hpp).
#include "mpi/mpi_watchdog.hpp"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "mpi/exit_timer.hpp"

namespace idist::mpi_backend {

Watchdog::Watchdog(std::chrono::milliseconds timeout, int rank)
    : timeout_(timeout),
      rank_(rank),
      thread_(backend_kit::Watchdog::period_for(timeout),
              [this](backend_kit::Watchdog::Clock::time_point now) { scan(now); }) {}

int Watchdog::arm(const char* op, const char* group) noexcept {
  for (int i = 0; i < int(slots_.size()); ++i) {
    Slot& s = slots_[std::size_t(i)];
    std::uint64_t w = s.word.load(std::memory_order_relaxed);
    if (w & 1) continue;
    // Even -> odd, one generation on: a call the thread has never seen.
    if (s.word.compare_exchange_strong(w, w + 3, std::memory_order_acq_rel)) {
      s.op.store(op, std::memory_order_relaxed);
      s.group.store(group, std::memory_order_relaxed);
      return i;
    }
  }
  return -1;
}

void Watchdog::disarm(int slot) noexcept { slots_[std::size_t(slot)].word.fetch_add(1, std::memory_order_release); }

void Watchdog::scan(backend_kit::Watchdog::Clock::time_point now) {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    const std::uint64_t w = slots_[i].word.load(std::memory_order_acquire);
    if (!(w & 1)) continue;
    if (w != seen_[i]) {  // a call armed since the last visit: time it from now
      seen_[i] = w;
      since_[i] = now;
      continue;
    }
    // The same call as at the first sighting: it has run at least since then (at most one period
    // more), so it is aborted between timeout and timeout + 2 periods after it started.
    const auto ran = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_[i]);
    if (ran >= timeout_) abort_job(slots_[i], ran);
  }
}

void Watchdog::abort_job(const Slot& slot, std::chrono::milliseconds ran_for) const {
  const char* op = slot.op.load(std::memory_order_relaxed);
  const char* group = slot.group.load(std::memory_order_relaxed);
  std::fprintf(stderr,
               "idist: rank %d: %s on group %s has run for at least %lld ms, past the timeout of %lld ms (mpi backend, "
               "blocking MPI collective, which cannot be interrupted); aborting the job. A rank that never joined the "
               "collective, or ranks issuing collectives in different orders, cause this. IDIST_MPI_BLOCKING=0 (or "
               "InitOptions::mpi_blocking_collectives = false) raises a catchable idist::TimeoutError instead, at "
               "some cost per call.\n",
               rank_, op ? op : "a collective", group ? group : "world", static_cast<long long>(ran_for.count()),
               static_cast<long long>(timeout_.count()));
  std::fflush(stderr);
  // The thread calling the collective is inside MPI, which cannot be interrupted: the process leaves
  // and the launcher ends the job (abort_job).
  mpi_backend::abort_job(124);
}

}  // namespace idist::mpi_backend
