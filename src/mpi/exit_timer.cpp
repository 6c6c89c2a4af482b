#include "mpi/exit_timer.hpp"

#include <cstdio>
#include <cstdlib>
#include <utility>

namespace idist::mpi_backend {

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
