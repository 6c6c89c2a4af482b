// Polling non-blocking MPI requests to completion, with a deadline.
#include "mpi/mpi_work.hpp"

#include <algorithm>
#include <thread>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {
using Clock = std::chrono::steady_clock;
// Busy polling wins for collectives that complete in microseconds; past this, give the CPU away
// (ranks are often oversubscribed on a node) and then back off to sleeping.
constexpr auto kSpinFor = std::chrono::microseconds(50);
constexpr auto kYieldFor = std::chrono::microseconds(1000);
constexpr auto kFirstSleep = std::chrono::microseconds(5);
constexpr auto kMaxSleep = std::chrono::microseconds(1000);
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
  if (error_ != MPI_SUCCESS) throw_mpi_error(error_, fn_, rank_);
  return true;
}

bool MpiWork::test() { return poll(); }

bool MpiWork::wait_until(Clock::time_point deadline) {
  if (poll()) return finish();
  const auto start = Clock::now();
  auto pause = kFirstSleep;
  bool spinning = true;
  for (unsigned i = 1;; ++i) {
    if (poll()) return finish();
    // While spinning, read the clock (about as costly as an idle MPI_Test) every 8th poll only.
    if (spinning && (i % 8) != 0) continue;
    const auto now = Clock::now();
    if (now >= deadline) return false;
    const auto waited = now - start;
    if (waited < kSpinFor) continue;
    spinning = false;
    if (waited < kYieldFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, kMaxSleep);
    }
  }
}

}  // namespace idist::mpi_backend
