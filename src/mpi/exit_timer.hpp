#pragma once
// Ending an mpi job from any state, and a bound on MPI_Finalize, which waits on the launcher. Open
// MPI 4.1's mpirun was seen (CI, and here in a 3-rank job where two ranks called MPI_Abort at about
// the same time) to crash, or to stop answering while it tore the job down: every rank then waited
// in MPI_Abort or MPI_Finalize forever.
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

/// Ends the job from any state: this process exits with `code` at once (stdio flushed, no
/// MPI_Finalize), and the launcher ends the other ranks. The caller prints its message first.
[[noreturn]] void abort_job(int code);

}  // namespace idist::mpi_backend
