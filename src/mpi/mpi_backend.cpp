// The registry's entry points for the mpi backend: create (initialize("mpi")) and adopt (sync()).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/backend_factories.hpp"
#include "idist/error.hpp"
#include "mpi/mpi_error.hpp"
#include "mpi/mpi_model.hpp"

namespace idist::mpi_backend {

std::size_t max_count_from_env() {
  const char* s = std::getenv("IDIST_MPI_MAX_COUNT");
  if (!s || !*s) return std::size_t(INT_MAX);
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (*end != '\0' || v < 1)
    throw ValueError("IDIST_MPI_MAX_COUNT should be a positive integer, but given '" + std::string(s) + "'");
  return std::size_t(std::min<long long>(v, INT_MAX));
}

bool blocking_from_env() {
  const char* s = std::getenv("IDIST_MPI_BLOCKING");
  if (!s || !*s) return false;
  const std::string v(s);
  if (v == "1") return true;
  if (v == "0") return false;
  throw ValueError("IDIST_MPI_BLOCKING should be 0 or 1, but given '" + v + "'");
}

std::unique_ptr<ComputationModel> create(const InitOptions& opts) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw BackendError(
        "initialize(\"mpi\"): MPI was already finalized in this process and cannot be initialized again (MPI allows "
        "one MPI_Init per process); initialize the mpi backend once per program");
  // Bad input fails before MPI starts.
  const std::size_t max_count = max_count_from_env();
  const bool blocking = opts.mpi_blocking_collectives || blocking_from_env();
  int provided = MPI_THREAD_SINGLE;
  bool owns = false;
  if (initialized) {
    // The program called MPI_Init itself: adopt its context (and leave MPI_Finalize to it).
    MPI_Query_thread(&provided);
  } else {
    // THREAD_MULTIPLE so that a user's threads (and a gradient-synchronisation thread) may issue
    // collectives; when MPI gives less, idist serialises its own calls.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", -1);
    owns = true;
  }
  return std::make_unique<NativeMPIModel>(opts.timeout, owns, provided, max_count, blocking);
}

std::unique_ptr<ComputationModel> adopt() {
  // Called on every query while idist is serial: two cheap flag reads when there is no MPI context.
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return nullptr;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return std::make_unique<NativeMPIModel>(InitOptions{}.timeout, /*owns_mpi=*/false, provided, max_count_from_env(),
                                          blocking_from_env());
}

}  // namespace idist::mpi_backend
