#pragma once
// Command line of the collectives benchmark.
#include <cstddef>
#include <string>
#include <vector>

namespace idist_bench {

/// What to measure and how (see parse_collectives_options for the flags and defaults).
struct CollectivesOptions {
  std::string backend;               ///< "mpi" or "gloo"
  int nproc = 0;                     ///< > 0: spawn this many gloo workers with idist::spawn
  int port = 29511;                  ///< rendezvous port when spawning
  std::size_t min_bytes = 8;         ///< smallest message
  std::size_t max_bytes = 64 << 20;  ///< largest message (256 MiB with --large)
  /// Default: the four of ignite.distributed; "reduce_scatter" and "all_to_all" on request.
  std::vector<std::string> ops{"all_reduce", "all_gather", "broadcast", "barrier"};
  int iters_small = 1000;              ///< OSU's COLL_LOOP_SMALL
  int iters_large = 100;               ///< OSU's COLL_LOOP_LARGE
  int warmup_small = 100;              ///< OSU's COLL_SKIP_SMALL
  int warmup_large = 10;               ///< OSU's COLL_SKIP_LARGE
  std::size_t large_threshold = 8192;  ///< OSU's LARGE_MESSAGE_SIZE, bytes
  double iters_scale = 1.0;            ///< multiplies every iteration count (smoke tests: 0.01)
  int blocks = 48;                     ///< alternating blocks per variant (capped at the iterations)
  int skew_us = 0;                     ///< > 0: rank 0 calls each timed iteration this late (Schedule)
  bool nonblocking_baseline = true;    ///< mpi: also time MPI_I<op> + MPI_Wait
  bool mpi_polled = false;  ///< mpi: InitOptions::mpi_blocking_collectives = false (files labelled mpi_polled)
  std::string
      debug;  ///< IDIST_DISTRIBUTED_DEBUG for the run ("" keeps the environment's; files labelled _debug_<level>)
  std::string out_dir = "bench-results";
  int timeout_s = 300;
};

/// Parses argv with CLI11. Returns false when the program should exit with `exit_code` (help,
/// version or a bad flag, already reported).
bool parse_collectives_options(int argc, char** argv, CollectivesOptions& opts, int& exit_code);

}  // namespace idist_bench
