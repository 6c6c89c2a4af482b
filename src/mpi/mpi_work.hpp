#pragma once
// The WorkImpl of the mpi backend: one or more MPI requests polled with MPI_Test.
#include <mpi.h>

#include <chrono>
#include <memory>
#include <vector>

#include "core/work_impl.hpp"
#include "mpi/health.hpp"

namespace idist::mpi_backend {

/// An in-flight non-blocking MPI collective (or several, when a large buffer was split into chunks
/// that each fit MPI's int counts). Completion is driven by MPI_Test / MPI_Testall; Open MPI only
/// progresses non-blocking collectives inside MPI calls, so polling is also what moves it forward.
///
/// Not internally locked: idist::Work serialises test() and wait_until() on one handle.
class MpiWork final : public core::WorkImpl {
 public:
  /// Wraps one request. `fn` (a string literal, e.g. "MPI_Iallreduce") and `rank` name failures;
  /// a failure or a missed deadline marks `health` broken (see health.hpp).
  MpiWork(MPI_Request request, const char* fn, int rank, std::shared_ptr<CommHealth> health) noexcept
      : single_(request), fn_(fn), rank_(rank), health_(std::move(health)) {}

  /// Wraps several requests that complete together; `ints` are counts / displacements that MPI
  /// reads until completion (MPI_Iallgatherv), kept alive here.
  MpiWork(std::vector<MPI_Request> requests, std::vector<int> ints, const char* fn, int rank,
          std::shared_ptr<CommHealth> health) noexcept
      : many_(std::move(requests)), ints_(std::move(ints)), fn_(fn), rank_(rank), health_(std::move(health)) {}

  /// One MPI_Test (or MPI_Testall); true once complete or failed.
  bool test() override;

  /// Polls until completion or `deadline`: spins for some tens of microseconds (small collectives
  /// finish that fast), then keeps polling with a yield of the CPU between polls, never sleeping
  /// (Open MPI progresses a non-blocking collective only inside MPI_Test). The clock is read every
  /// 64 polls, so the deadline is honoured to within the spin phase plus 64 polls.
  /// @return false when `deadline` passed first (the backend is then marked broken: the request
  ///         stays pending inside MPI).
  /// @throws BackendError naming the MPI function, rank and MPI's error text when MPI failed.
  bool wait_until(std::chrono::steady_clock::time_point deadline) override;

 private:
  bool poll() noexcept;  // one test; records a failure instead of throwing
  bool finish();         // throws the recorded failure, else returns true

  MPI_Request single_ = MPI_REQUEST_NULL;
  std::vector<MPI_Request> many_;
  std::vector<int> ints_;
  const char* fn_;
  int rank_;
  std::shared_ptr<CommHealth> health_;
  int error_ = MPI_SUCCESS;
  bool done_ = false;
};

}  // namespace idist::mpi_backend
