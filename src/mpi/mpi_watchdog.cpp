// The watchdog of blocking MPI collectives (see mpi_watchdog.hpp).
#include "mpi/mpi_watchdog.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace idist::mpi_backend {

namespace {
std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Watchdog::Watchdog(std::chrono::milliseconds timeout, int rank)
    : timeout_(timeout),
      period_(std::clamp(timeout / 20, std::chrono::milliseconds(1), std::chrono::milliseconds(250))),
      rank_(rank),
      thread_([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

int Watchdog::arm(const char* op) noexcept {
  const std::int64_t deadline = now_ns() + std::chrono::nanoseconds(timeout_).count();
  for (int i = 0; i < int(slots_.size()); ++i) {
    std::int64_t free = 0;
    if (slots_[std::size_t(i)].deadline_ns.compare_exchange_strong(free, deadline, std::memory_order_acq_rel)) {
      slots_[std::size_t(i)].op.store(op, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void Watchdog::disarm(int slot) noexcept {
  slots_[std::size_t(slot)].deadline_ns.store(0, std::memory_order_release);
}

void Watchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period_);
    if (stop_) break;
    const std::int64_t now = now_ns();
    for (const Slot& s : slots_) {
      const std::int64_t deadline = s.deadline_ns.load(std::memory_order_acquire);
      if (deadline != 0 && deadline < now) abort_job(s.op.load(std::memory_order_acquire));
    }
  }
}

void Watchdog::abort_job(const char* op) const {
  std::fprintf(stderr,
               "idist: rank %d: %s did not complete within the timeout of %lld ms (mpi backend with blocking "
               "collectives, which cannot be interrupted); aborting the job. A rank that never joined the "
               "collective, or ranks issuing collectives in different orders, cause this.\n",
               rank_, op ? op : "a collective", static_cast<long long>(timeout_.count()));
  std::fflush(stderr);
  // The thread calling the collective is inside MPI; MPI_Abort is the one call meant to end a job
  // from any state. Should it return, leave anyway.
  MPI_Abort(MPI_COMM_WORLD, 124);
  std::_Exit(124);
}

}  // namespace idist::mpi_backend
