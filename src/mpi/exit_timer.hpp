#pragma once
// Ending an mpi job from any state, and ending MPI without putting the launcher at risk. Open MPI
// 4.1's mpirun crashes (a segfault in PMIx_server_finalize) or hangs (a deadlock there, its ranks
// left unreaped) when it ends a job while a rank is inside MPI_Finalize, i.e. in the PMIx fence
// MPI_Finalize runs: a healthy rank that reached finalize() while a peer aborts (idist's broken-backend
// exit, the watchdog, a crash), whichever way the peer leaves (_Exit or MPI_Abort); never when no
// rank is in MPI_Finalize (docs/testing.md, "Launcher faults"). So a
// rank enters MPI_Finalize only once every rank has reached it (finalize_owned_mpi()), when no peer
// can abort any more; until then it waits in a polled barrier, which mpirun ends safely.
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

/// Ends MPI in a process whose MPI idist initialized: first waits, at most `limit`, until every rank
/// of MPI_COMM_WORLD has called it (a polled MPI_Ibarrier, outside the launcher), then calls
/// MPI_Finalize under an ExitTimer of `limit`. A rank whose peers do not all arrive in time (one
/// aborted or crashed, hangs in a collective, or is still working) prints why and leaves with exit
/// code 1 (abort_job()): the launcher ends the others. Call it on every rank, with no MPI request
/// of the program's still pending on MPI_COMM_WORLD.
/// @throws BackendError when MPI_Ibarrier, MPI_Test or MPI_Finalize fails.
void finalize_owned_mpi(int rank, std::chrono::milliseconds limit);

/// Ends the job from any state: this process exits with `code` at once (stdio flushed, no
/// MPI_Finalize), and the launcher ends the other ranks. The caller prints its message first.
[[noreturn]] void abort_job(int code);

}  // namespace idist::mpi_backend
