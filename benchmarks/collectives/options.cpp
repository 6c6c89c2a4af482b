#include "collectives/options.hpp"

#include <CLI/CLI.hpp>

#include "common/backends.hpp"

namespace idist_bench {

bool parse_collectives_options(int argc, char** argv, CollectivesOptions& o, int& exit_code) {
  CLI::App app{
      "idist collectives benchmark: all_reduce, all_gather, broadcast and barrier (and with --ops reduce_scatter "
      "and all_to_all) through idist, interleaved with the raw backend call on the same communicator and buffers.\n"
      "  mpi:  mpirun -np 2 idist_bench_collectives --backend mpi\n"
      "  gloo: idist_bench_collectives --backend gloo --nproc 2   (or under mpirun with --backend gloo)"};
  if (print_backends_if_asked(argc, argv)) {
    exit_code = 0;
    return false;
  }
  std::vector<std::string> backends = cpu_backends();
  bool large = false;
  app.add_flag("--list-backends")->description("Print the backends this build can measure and exit");
  app.add_option("--backend", o.backend, "Backend to measure")->required()->check(CLI::IsMember(backends));
  app.add_option("--nproc", o.nproc,
                 "Spawn this many workers with idist::spawn (gloo); 0: the ranks were started "
                 "by mpirun or another launcher")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--port", o.port, "Rendezvous port when spawning")->check(CLI::Range(1, 65535));
  app.add_option("--min-bytes", o.min_bytes, "Smallest message size in bytes (doubling up to --max-bytes)")
      ->check(CLI::Range(std::size_t{4}, std::size_t{1} << 32));
  app.add_option("--max-bytes", o.max_bytes, "Largest message size in bytes")
      ->check(CLI::Range(std::size_t{4}, std::size_t{1} << 32));
  app.add_flag("--large", large, "Go up to 256 MiB (same as --max-bytes 268435456)");
  app.add_option("--ops", o.ops, "Operations to measure")
      ->delimiter(',')
      ->check(CLI::IsMember({"all_reduce", "all_gather", "broadcast", "barrier", "reduce_scatter", "all_to_all"}));
  app.add_option("--iters-small", o.iters_small, "Timed iterations per variant up to --large-threshold")
      ->check(CLI::PositiveNumber);
  app.add_option("--iters-large", o.iters_large, "Timed iterations per variant above it")->check(CLI::PositiveNumber);
  app.add_option("--warmup-small", o.warmup_small, "Warm-up iterations per variant up to --large-threshold")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--warmup-large", o.warmup_large, "Warm-up iterations per variant above it")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--large-threshold", o.large_threshold, "Message size (bytes) above which the 'large' counts apply");
  app.add_option("--iters-scale", o.iters_scale, "Multiplies every iteration count (at least 1 timed iteration)")
      ->check(CLI::Range(1e-6, 1e6));
  app.add_option("--blocks", o.blocks, "idist and the raw call alternate in this many blocks of iterations")
      ->check(CLI::PositiveNumber);
  app.add_option("--skew-us", o.skew_us,
                 "Rank 0 arrives this many microseconds after the others at every timed call (each after a "
                 "barrier); times count from its arrival")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("!--no-nonblocking-baseline", o.nonblocking_baseline,
               "mpi: do not also time MPI_Iallreduce/... + MPI_Wait (the calls idist's mpi backend makes)");
  app.add_flag("--mpi-polled", o.mpi_polled,
               "mpi: initialize with InitOptions::mpi_blocking_collectives = false (non-blocking calls polled to "
               "the deadline instead of the default, MPI's blocking calls under a watchdog); results are labelled "
               "mpi_polled");
  app.add_option("--debug", o.debug,
                 "Debug level of the idist side (IDIST_DISTRIBUTED_DEBUG): OFF, INFO or DETAIL; result files are "
                 "labelled <backend>_debug_<level>. DETAIL adds one fingerprint all-gather per collective")
      ->check(CLI::IsMember({"OFF", "INFO", "DETAIL"}));
  app.add_option("--out-dir", o.out_dir, "Directory of the CSV and Markdown result files");
  app.add_option("--timeout", o.timeout_s, "initialize() timeout in seconds (rendezvous and every collective)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  if (large) o.max_bytes = std::size_t{256} << 20;
  if (o.min_bytes > o.max_bytes) {
    exit_code = app.exit(CLI::ValidationError("--min-bytes", "should not exceed --max-bytes"));
    return false;
  }
  return true;
}

}  // namespace idist_bench
