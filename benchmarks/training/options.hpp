#pragma once
// Command line of the training benchmark.
#include <cstdint>
#include <string>
#include <vector>

namespace idist_bench {

/// What to measure and how (see parse_training_options for the flags and defaults).
struct TrainingOptions {
  std::string backend;  ///< "serial", "mpi" or "gloo"
  int nproc = 0;        ///< > 0: spawn this many gloo workers with idist::spawn
  int port = 29521;     ///< rendezvous port when spawning
  std::vector<std::string> models{"cnn", "mlp32x512", "mlp200x64"};
  std::vector<std::string> configs;  ///< empty: every configuration (see default_configs)
  std::vector<double> buckets_mb{1, 5, 10, 25, 50, 100};
  std::int64_t batch = 0;  ///< per rank; 0: the model's default
  int warmup = 2;          ///< untimed steps per configuration before the rounds
  int rounds = 5;          ///< the configurations take turns this many times
  int steps = 6;           ///< timed steps per configuration per round (after 1 untimed)
  int threads = 1;         ///< LibTorch intra-op threads per rank
  std::uint64_t seed = 1;
  std::string out_dir = "bench-results";
  std::string label;       ///< names the result files instead of the backend (e.g. mpi-nothread); no "_"
  std::string memory_csv;  ///< non-empty: append one row per configuration (peak RSS)
  int timeout_s = 600;
};

/// Parses argv with CLI11. Returns false when the program should exit with `exit_code`.
bool parse_training_options(int argc, char** argv, TrainingOptions& opts, int& exit_code);

}  // namespace idist_bench
