// Polling non-blocking MPI requests to completion, with a deadline.
#include "mpi/mpi_work.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {
using Clock = std::chrono::steady_clock;
// Busy polling wins for collectives that complete in microseconds. Reading the clock costs as much
// as an idle MPI_Test, so the first polls do not look at it at all. After that the loop yields the
// CPU between polls (ranks are often oversubscribed on a node) but never sleeps: Open MPI progresses
// a non-blocking collective only inside MPI_Test, one fragment per call for large messages, so a
// sleeping waiter multiplies a large all-reduce's time (docs/performance.md, "Figures behind the
// defaults").
constexpr unsigned kSpinPolls = 512;
constexpr unsigned kPollsPerClockRead = 64;
}  // namespace

bool MpiWork::poll() noexcept {
  if (done_) return true;
  int flag = 0;
  int rc;
  {
    MpiCallGuard guard;
    rc = many_.empty() ? MPI_Test(&single_, &flag, MPI_STATUS_IGNORE)
                       : MPI_Testall(int(many_.size()), many_.data(), &flag, MPI_STATUSES_IGNORE);
  }
  if (rc != MPI_SUCCESS) {
    error_ = rc;
    done_ = true;
  } else if (flag) {
    done_ = true;
  }
  return done_;
}

bool MpiWork::finish() {
  if (error_ != MPI_SUCCESS) health_->fail(error_, fn_, rank_);
  return true;
}

bool MpiWork::test() { return poll(); }

bool MpiWork::wait_until(Clock::time_point deadline) {
  for (unsigned i = 0; i < kSpinPolls; ++i)
    if (poll()) return finish();
  for (;;) {
    for (unsigned i = 0; i < kPollsPerClockRead; ++i) {
      if (poll()) return finish();
      std::this_thread::yield();
    }
    if (Clock::now() >= deadline) {
      health_->mark(
          fmt::format("{} on rank {} timed out (a peer never joined it, or the ranks issued different "
                      "collectives)",
                      fn_, rank_));
      return false;
    }
  }
}

}  // namespace idist::mpi_backend
