// The non-blocking all-reduce algorithm idist asks of Open MPI when it starts MPI: the ring for
// worlds of 2 and 3 ranks (libnbc's binomial tree moves the buffer twice, one direction at a time),
// Open MPI's own choice for larger worlds, and never over the user's OMPI_MCA_ setting. Read back
// through MPI_T, i.e. what libnbc itself will use. Own main: MPI can be initialized once per process.
//
//   idist_mpi_nbc_algorithm_test <expected value of coll_libnbc_iallreduce_algorithm>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "idist/context.hpp"

namespace {

// The integer control variable `name` as Open MPI holds it, or -1 when it has none by that name.
int read_int_cvar(const char* name) {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
  int value = -1, index = -1;
  if (MPI_T_cvar_get_index(name, &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle;
    int count = 0;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS && count == 1) {
      MPI_T_cvar_read(handle, &value);
      MPI_T_cvar_handle_free(&handle);
    }
  }
  MPI_T_finalize();
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <expected coll_libnbc_iallreduce_algorithm>\n", argv[0]);
    return 2;
  }
  const int expected = std::atoi(argv[1]);
  idist::initialize("mpi");
  const int rank = idist::get_rank(), world = idist::get_world_size();
  const int value = read_int_cvar("coll_libnbc_iallreduce_algorithm");
  idist::finalize();
  std::printf("rank %d of %d: coll_libnbc_iallreduce_algorithm = %d, expected %d\n", rank, world, value, expected);
  return value == expected ? 0 : 1;
}
