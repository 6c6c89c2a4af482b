// Polling non-blocking MPI requests to completion, with a deadline.
#include "mpi/mpi_work.hpp"

#include <algorithm>
#include <thread>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {
using Clock = std::chrono::steady_clock;
// Busy polling wins for collectives that complete in microseconds. Reading the clock costs as much
// as an idle MPI_Test (about 90 ns on a VM), so the first polls do not look at it at all: a fixed
// number of them spans a few tens of microseconds. Then give the CPU away (ranks are often
// oversubscribed on a node), and past a millisecond back off to sleeping.
constexpr unsigned kSpinPolls = 512;
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
  for (unsigned i = 0; i < kSpinPolls; ++i)
    if (poll()) return finish();
  const auto start = Clock::now();
  auto pause = kFirstSleep;
  for (;;) {
    if (poll()) return finish();
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (now - start < kYieldFor) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
      pause = std::min(pause * 2, kMaxSleep);
    }
  }
}

}  // namespace idist::mpi_backend
