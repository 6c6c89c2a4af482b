// A blocking collective that a peer never joins ends the job through the watchdog: rank 0 calls
// all_reduce with blocking collectives and a 1 s timeout while rank 1 sleeps. The test passes when
// the watchdog's message appears (ctest matches it) before ctest's own time limit; without the
// watchdog rank 0 would wait forever in MPI_Allreduce.
#include <chrono>
#include <cstdio>
#include <thread>

#include "idist/collectives.hpp"
#include "idist/context.hpp"

int main() {
  idist::InitOptions opts;
  opts.timeout = std::chrono::seconds(1);
  opts.mpi_blocking_collectives = true;
  idist::initialize("mpi", opts);
  if (idist::get_rank() == 0) {
    idist::all_reduce(1);
    std::fprintf(stderr, "FAILED: all_reduce returned although rank 1 never joined\n");
  } else {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    std::fprintf(stderr, "FAILED: the job was not aborted\n");
  }
  return 1;
}
