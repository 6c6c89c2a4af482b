#include "mpi/exit_timer.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>

#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

namespace {
// Polls a barrier over MPI_COMM_WORLD until it completes (true) or `limit` passes (false; the
// request is left pending, the caller leaves the process). Short pauses between tests: the wait
// should cost a finalize() next to nothing when the peers are there, and no core when they are not.
bool every_rank_arrived(int rank, std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + limit;
  MPI_Request request = MPI_REQUEST_NULL;
  {
    MpiCallGuard guard;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier", rank);
  }
  std::chrono::microseconds pause{10};
  for (;;) {
    int done = 0;
    {
      MpiCallGuard guard;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "MPI_Test", rank);
    }
    if (done) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(1));
  }
}
}  // namespace

ExitTimer::ExitTimer(std::chrono::milliseconds limit, int code, std::string message) {
  thread_ = std::thread([this, limit, code, message = std::move(message)] {
    std::unique_lock lock(mutex_);
    if (cv_.wait_for(lock, limit, [this] { return done_; })) return;
    std::fprintf(stderr, "%s\n", message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  });
}

ExitTimer::~ExitTimer() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void finalize_owned_mpi(int rank, std::chrono::milliseconds limit) {
  if (!every_rank_arrived(rank, limit)) {
    std::fprintf(stderr,
                 "idist: finalize() on rank %d: not every rank reached finalize() within %lld ms (a peer failed or "
                 "was killed, hangs in a collective, or is still working); this rank leaves with exit code 1 and "
                 "the launcher ends the others, rather than wait inside MPI_Finalize\n",
                 rank, static_cast<long long>(limit.count()));
    abort_job(1);
  }
  // Every rank is here, so none can still abort: MPI_Finalize's own wait is short. It is bounded all
  // the same, since it also waits on the launcher.
  const ExitTimer timer(limit, 1,
                        fmt::format("idist: finalize() on rank {}: MPI_Finalize has not returned after {} ms (the "
                                    "launcher stopped answering); leaving with exit code 1",
                                    rank, limit.count()));
  check_mpi(MPI_Finalize(), "MPI_Finalize", rank);
}

void abort_job(int code) {
  // The process leaves with `code` and the launcher ends the job: mpirun (like srun with
  // --kill-on-bad-exit) kills the other ranks when one exits before MPI_Finalize. MPI_Abort would
  // go through mpirun's help-message channel, which Open MPI 4.1 corrupts when two ranks abort at
  // about the same time ("Data unpack would read past end of buffer in file show_help.c"; mpirun
  // then crashed or hung, seen in CI and reproduced in tests/debug/mismatch_matrix.sh).
  std::fflush(nullptr);
  std::_Exit(code);
}

}  // namespace idist::mpi_backend
