#include "training/options.hpp"

#include <CLI/CLI.hpp>

#include "common/backends.hpp"
#include "training/models.hpp"
#include "training/strategies.hpp"

namespace idist_bench {

bool parse_training_options(int argc, char** argv, TrainingOptions& o, int& exit_code) {
  CLI::App app{
      "idist training benchmark: data-parallel step time of LibTorch models with auto_model, the per-parameter "
      "all-reduce status quo (idist and raw backend), a bucket-size sweep and no_sync.\n"
      "  serial: idist_bench_training --backend serial\n"
      "  mpi:    mpirun -np 2 idist_bench_training --backend mpi\n"
      "  gloo:   idist_bench_training --backend gloo --nproc 2"};
  if (print_backends_if_asked(argc, argv)) {
    exit_code = 0;
    return false;
  }
  std::vector<std::string> backends{"serial"};
  for (const auto& b : cpu_backends()) backends.push_back(b);
  app.add_flag("--list-backends")->description("Print the backends this build can measure and exit");
  app.add_option("--backend", o.backend, "serial (one process, no idist) or a backend")
      ->required()
      ->check(CLI::IsMember(backends));
  app.add_option("--nproc", o.nproc, "Spawn this many workers with idist::spawn (gloo)")->check(CLI::NonNegativeNumber);
  app.add_option("--port", o.port, "Rendezvous port when spawning")->check(CLI::Range(1, 65535));
  app.add_option("--models", o.models, "Models to train")->delimiter(',')->check(CLI::IsMember(model_names()));
  app.add_option("--configs", o.configs,
                 "Configurations (default: all but the Adam ones): local, status_quo_idist, status_quo_raw, no_sync, "
                 "auto_model[:MiB], auto_model_copy[:MiB]; with Adam: auto_model_adam[:MiB], zero[:MiB] "
                 "(ZeroRedundancyOptimizer), zero_staged[:MiB] (its parameters_as_bucket_view = false), zero2[:MiB] "
                 "(ZeRO stage 2: zero with its "
                 "reduce_scatter_hook), zero_overlap[:MiB] / zero2_overlap[:MiB] (the step in the backward, "
                 "hook_with_zero_step), zero_interleaved[:MiB] / zero2_interleaved[:MiB] (its interleaved form)")
      ->delimiter(',')
      ->check([](const std::string& s) {
        try {
          parse_config(s);
          return std::string();
        } catch (const std::exception& e) {
          return std::string(e.what());
        }
      });
  app.add_option("--buckets", o.buckets_mb, "auto_model bucket caps of the sweep, MiB")
      ->delimiter(',')
      ->check(CLI::PositiveNumber);
  app.add_option("--batch", o.batch, "Samples per rank per step (0: per-model default)")->check(CLI::NonNegativeNumber);
  app.add_option("--warmup", o.warmup, "Untimed steps per configuration before the rounds")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rounds", o.rounds, "The configurations take turns this many times")->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "Timed steps per configuration per round")->check(CLI::PositiveNumber);
  app.add_option("--threads", o.threads, "LibTorch intra-op threads per rank")->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "Seed of the weights and data");
  app.add_option("--out-dir", o.out_dir, "Directory of the CSV and Markdown result files");
  app.add_option("--label", o.label, "Name the result files training_<label>_<model> instead of the backend's name");
  app.add_option("--memory-csv", o.memory_csv,
                 "Append one row per configuration with the peak resident memory of each rank (run one "
                 "configuration per process for a clean number)");
  app.add_option("--timeout", o.timeout_s, "initialize() timeout in seconds")->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
    return false;
  }
  return true;
}

}  // namespace idist_bench
