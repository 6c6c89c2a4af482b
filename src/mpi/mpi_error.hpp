#pragma once
// Turning MPI return codes into idist::BackendError, and the process-wide lock that serialises MPI
// calls when the MPI library was initialized below MPI_THREAD_MULTIPLE.
#include <mpi.h>

#include <mutex>

namespace idist::mpi_backend {

/// Throws BackendError "<fn> failed on rank <rank>: <MPI_Error_string(rc)>".
[[noreturn]] void throw_mpi_error(int rc, const char* fn, int rank);

/// Throws BackendError naming `fn`, `rank` and MPI's description of `rc` unless rc is MPI_SUCCESS.
inline void check_mpi(int rc, const char* fn, int rank) {
  if (rc != MPI_SUCCESS) [[unlikely]]
    throw_mpi_error(rc, fn, rank);
}

/// True when the thread level MPI provided is below MPI_THREAD_MULTIPLE, so that idist must not let
/// two threads inside MPI at once. MPI's thread level is a property of the process, hence a global;
/// set by the model before any collective is issued.
inline bool serialize_mpi_calls = false;

/// The lock taken around every MPI call when serialize_mpi_calls is set.
inline std::mutex mpi_call_mutex;

/// RAII guard around one MPI call: locks mpi_call_mutex only when calls must be serialised, so the
/// MPI_THREAD_MULTIPLE path costs one predictable branch.
class MpiCallGuard {
 public:
  MpiCallGuard() : locked_(serialize_mpi_calls) {
    if (locked_) mpi_call_mutex.lock();
  }
  ~MpiCallGuard() {
    if (locked_) mpi_call_mutex.unlock();
  }
  MpiCallGuard(const MpiCallGuard&) = delete;
  MpiCallGuard& operator=(const MpiCallGuard&) = delete;

 private:
  bool locked_;
};

}  // namespace idist::mpi_backend
