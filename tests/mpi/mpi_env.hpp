#pragma once
// Small helpers shared by the mpi backend tests.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace idist::test {

/// Integer value of environment variable `name` (set by Open MPI's mpirun, e.g.
/// OMPI_COMM_WORLD_RANK); fails the current test and returns -1 when it is missing.
inline int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v) {
    ADD_FAILURE() << name << " is not set: run this test under Open MPI's mpirun";
    return -1;
  }
  return std::atoi(v);
}

}  // namespace idist::test

namespace idist::test {

/// Leaves the full gtest report to world rank 0 (from OMPI_COMM_WORLD_RANK, readable before
/// MPI_Init and after MPI_Finalize); other ranks print only failed assertions, tagged with their rank.
void quiet_non_root_ranks();

}  // namespace idist::test
