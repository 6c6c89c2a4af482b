#pragma once
// A bound on the MPI calls that cannot be interrupted and that wait on the launcher: MPI_Abort and
// MPI_Finalize. Open MPI 4.1's mpirun was seen (CI, a 3-rank job ending by MPI_Abort) to stop
// answering while it tore a job down: every rank then waited in MPI_Abort or MPI_Finalize forever.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace idist::mpi_backend {

/// Ends the process with `code` after printing `message` on stderr, unless destroyed within
/// `limit`. Arm it around a call that may never return; the destructor disarms it.
class ExitTimer {
 public:
  ExitTimer(std::chrono::milliseconds limit, int code, std::string message);
  ~ExitTimer();
  ExitTimer(const ExitTimer&) = delete;
  ExitTimer& operator=(const ExitTimer&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

/// MPI_Abort(MPI_COMM_WORLD, code), bounded: when the launcher has not ended this process within
/// 5 s, it leaves by itself with `code` (naming `rank` on stderr).
[[noreturn]] void abort_job(int rank, int code);

}  // namespace idist::mpi_backend
