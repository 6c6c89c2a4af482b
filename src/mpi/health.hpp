#pragma once
// Whether idist's MPI communicators can still be used. After a timeout or an MPI error the
// requests involved are abandoned inside Open MPI (MPI can neither cancel nor free a pending
// collective request), and the peers' positions in the collective sequence are unknown: every
// later collective would match the wrong partner, and MPI_Finalize walks into the abandoned
// requests (a segfault in libnbc). So the first failure marks the backend broken: later
// collectives raise at once naming it, and finalize() aborts the job instead of calling
// MPI_Finalize.
#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

namespace idist::mpi_backend {

class CommHealth {
 public:
  /// True after the first failure. One relaxed atomic load: cheap enough for every collective.
  bool broken() const noexcept { return broken_.load(std::memory_order_acquire); }

  /// Records `what` as the failure that broke the backend, unless one was recorded already.
  void mark(std::string_view what) noexcept;

  /// The first failure's description ("" while healthy).
  std::string first_failure() const;

  /// Throws BackendError "<op> on rank <rank>: the mpi backend is unusable since an earlier
  /// failure: <first failure>; ...". Call when broken().
  [[noreturn]] void throw_broken(std::string_view op, int rank) const;

  /// Throws (see throw_broken()) when broken; otherwise nothing.
  void check(std::string_view op, int rank) const {
    if (broken()) [[unlikely]]
      throw_broken(op, rank);
  }

  /// Marks the backend broken by MPI error `rc` of `fn` on `rank`, then throws the BackendError
  /// naming them (see throw_mpi_error()).
  [[noreturn]] void fail(int rc, const char* fn, int rank);

  /// check_mpi() that also marks the backend broken on failure.
  void check_rc(int rc, const char* fn, int rank) {
    if (rc != 0) [[unlikely]]
      fail(rc, fn, rank);
  }

 private:
  std::atomic<bool> broken_{false};
  mutable std::mutex mutex_;
  std::string first_;
};

}  // namespace idist::mpi_backend
