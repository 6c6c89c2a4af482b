// The registry's entry points for the mpi backend: create (initialize("mpi")) and adopt (sync()).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "core/backend_factories.hpp"
#include "idist/error.hpp"
#include "launch/launcher_env.hpp"
#include "launch/settings.hpp"
#include "mpi/mpi_backend.hpp"
#include "mpi/mpi_error.hpp"

namespace idist::mpi_backend {

std::size_t max_count_from_env() { return launch::mpi_max_count().value_or(std::size_t(INT_MAX)); }

std::optional<bool> blocking_from_env() { return launch::mpi_blocking(); }

std::optional<bool> progress_thread_from_env() { return launch::mpi_progress_thread(); }

std::size_t progress_chunk_from_env() {
  return launch::mpi_progress_chunk_bytes().value_or(MpiSettings{}.progress_chunk_bytes);
}

std::optional<std::size_t> blocking_chunk_from_env() { return launch::mpi_blocking_chunk_bytes(); }

std::chrono::microseconds progress_interval_from_env() {
  return launch::mpi_progress_interval().value_or(MpiSettings{}.progress_interval);
}

namespace {

// Open MPI's non-blocking all-reduce (libnbc) takes its binomial tree for every in-place call and
// for fewer than 4 ranks: a reduce, then a broadcast, so the whole buffer crosses the link twice,
// one direction at a time. For 2 and 3 ranks its ring takes as many steps, each moving a half or a
// third of the buffer, in both directions at once, which roughly halves a large gradient bucket's
// all-reduce across hosts (docs/performance.md, "Figures behind the defaults"). Set before
// MPI_Init, when idist starts MPI, never over the user's own choice (0 restores Open MPI's).
void prefer_ring_iallreduce() {
  const int world = launch::launcher_world_size();
  if (world == 2 || world == 3) ::setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
}

// Options first, then the environment, then the defaults (blocking calls; the progress thread
// across nodes). Bad variables fail before MPI starts.
MpiSettings settings_from(const InitOptions& opts) {
  MpiSettings s;
  s.max_count = max_count_from_env();
  const std::optional<bool> env_blocking = blocking_from_env();
  const std::optional<bool> env_progress = progress_thread_from_env();
  s.blocking_collectives = opts.mpi_blocking_collectives.value_or(env_blocking.value_or(true));
  s.progress_thread = opts.mpi_progress_thread ? opts.mpi_progress_thread : env_progress;
  s.progress_chunk_bytes = progress_chunk_from_env();
  s.progress_interval = progress_interval_from_env();
  s.blocking_chunk_bytes = blocking_chunk_from_env();
  return s;
}
}  // namespace

std::unique_ptr<core::Backend> create(const InitOptions& opts) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized)
    throw BackendError(
        "initialize(\"mpi\"): MPI was already finalized in this process and cannot be initialized again (MPI allows "
        "one MPI_Init per process); initialize the mpi backend once per program");
  const MpiSettings settings = settings_from(opts);
  int provided = MPI_THREAD_SINGLE;
  bool owns = false;
  if (initialized) {
    // The program called MPI_Init itself: adopt its context (and leave MPI_Finalize to it).
    MPI_Query_thread(&provided);
  } else {
    prefer_ring_iallreduce();
    // THREAD_MULTIPLE so that a user's threads (and a gradient-synchronisation thread) may issue
    // collectives; when MPI gives less, idist serialises its own calls.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread", -1);
    owns = true;
  }
  return std::make_unique<MPIBackend>(opts.timeout, owns, provided, settings);
}

bool has_context() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return false;
  int finalized = 0;
  MPI_Finalized(&finalized);
  return !finalized;
}

std::unique_ptr<core::Backend> adopt() {
  // Called on every query while idist is serial: two cheap flag reads when there is no MPI context.
  if (!has_context()) return nullptr;
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return std::make_unique<MPIBackend>(InitOptions{}.timeout, /*owns_mpi=*/false, provided,
                                      settings_from(InitOptions{}));
}

}  // namespace idist::mpi_backend
