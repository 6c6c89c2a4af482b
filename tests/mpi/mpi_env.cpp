// Report printing for the mpi tests that have their own main().
#include "mpi_env.hpp"

#include <cstdlib>

#include "support/rank_report.hpp"

namespace idist::test {

void quiet_non_root_ranks() {
  // Before MPI starts, the rank is only known from the launcher's environment.
  const char* v = std::getenv("OMPI_COMM_WORLD_RANK");
  report_only_failures_on_nonzero_rank(v ? std::atoi(v) : 0);
}

}  // namespace idist::test
