// The broken state of the mpi backend (see health.hpp).
#include "mpi/health.hpp"

#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

void CommHealth::mark(std::string_view what) noexcept {
  try {
    std::lock_guard lock(mutex_);
    if (broken_.load(std::memory_order_relaxed)) return;
    first_ = std::string(what);
    broken_.store(true, std::memory_order_release);
  } catch (...) {
    broken_.store(true, std::memory_order_release);  // out of memory: broken without a text
  }
}

std::string CommHealth::first_failure() const {
  std::lock_guard lock(mutex_);
  return first_;
}

void CommHealth::throw_broken(std::string_view op, int rank) const {
  throw BackendError(
      fmt::format("{} on rank {}: the mpi backend is unusable since an earlier failure: {}. MPI cannot "
                  "cancel the collective left pending, so no later collective can match its peers; end "
                  "the job (idist::finalize() then aborts it with this message)",
                  op, rank, first_failure()));
}

void CommHealth::fail(int rc, const char* fn, int rank) {
  try {
    throw_mpi_error(rc, fn, rank);
  } catch (const BackendError& e) {
    mark(e.what());
    throw;
  }
}

}  // namespace idist::mpi_backend
