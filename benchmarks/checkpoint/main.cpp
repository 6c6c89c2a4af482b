// idist checkpoint benchmark: how long Checkpoint::save blocks training, against the time to write
// the checkpoint's bytes to the page cache (one write() call, no fsync). Launch serially, or under
// mpirun with --backend mpi|gloo (rank 0 saves; the others take part in the save's collective).
//
//   idist_bench_checkpoint --sizes 16,64,256 --reps 10 --dir /path/on/the/disk/to/measure
//
// Prints one row per model size and optimizer; writes checkpoint_<label>.csv / .md to --out-dir.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <CLI/CLI.hpp>

#include "checkpoint/measure.hpp"
#include "common/stats.hpp"
#include "common/table.hpp"
#include "common/timing.hpp"
#include "idist/idist.hpp"

namespace idist_bench {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// The target: save blocks training at most 1.5x the time to write its bytes to the page cache.
constexpr double kTargetRatio = 1.5;

struct Options {
  std::string backend = "serial";
  std::vector<double> sizes_mib{16, 64, 256};
  std::vector<std::string> optimizers{"sgd", "adam"};
  double tensor_mib = 4;
  int reps = 10;
  bool foreground = false;
  std::string dir = "bench-checkpoints";
  std::string out_dir = "bench-results";
  std::string label;
};

std::vector<Column> columns() {
  return {{"model_MiB", 9},
          {"optimizer", 9},
          {"write", 10},
          {"ranks", 5},
          {"file_MiB", 9},
          {"save_p50_ms", 11},
          {"page_cache_p50_ms", 17},
          {"ratio", 6},
          {"target", 6},
          {"finish_p50_ms", 13},
          {"fsync_p50_ms", 12},
          {"save_p90_ms", 11, false},
          {"page_cache_p90_ms", 17, false},
          {"reps", 4, false}};
}

int run(const Options& o) {
  const bool root = idist::get_rank() == 0;
  const std::filesystem::path dir = std::filesystem::absolute(o.dir);
  Table table(columns());  // only rank 0 adds rows
  if (root) {
    fmt::print("# checkpoint save blocking vs a plain write of its bytes; dir {}; load {}\n", dir.string(),
               load_average());
    table.print_header();
  }
  for (const double mib : o.sizes_mib) {
    for (const auto& opt : o.optimizers) {
      const CheckpointCase c{
          .model_mib = mib, .tensor_mib = o.tensor_mib, .optimizer = opt, .background_write = !o.foreground};
      const CheckpointSamples s = measure_checkpoint(c, dir, o.reps);
      if (!root) continue;
      const Summary save = summarize(s.save_us), plain = summarize(s.page_cache_us);
      const Summary finish = summarize(s.finish_us), fsync = summarize(s.fsync_us);
      const double ratio = plain.p50 > 0 ? save.p50 / plain.p50 : 0;
      table.add_row({fixed(mib, 0), opt, o.foreground ? "foreground" : "background",
                     std::to_string(idist::get_world_size()), fixed(double(s.file_bytes) / kMiB, 1),
                     fixed(save.p50 / 1e3, 3), fixed(plain.p50 / 1e3, 3), fixed(ratio, 2),
                     ratio <= kTargetRatio ? "ok" : "MISS", fixed(finish.p50 / 1e3, 3), fixed(fsync.p50 / 1e3, 3),
                     fixed(save.p90 / 1e3, 3), fixed(plain.p90 / 1e3, 3), std::to_string(o.reps)});
    }
  }
  if (root) {
    std::filesystem::create_directories(o.out_dir);
    const std::string label = o.label.empty() ? o.backend : o.label;
    table.write_csv(fmt::format("{}/checkpoint_{}.csv", o.out_dir, label));
    table.write_markdown(fmt::format("{}/checkpoint_{}.md", o.out_dir, label));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  return 0;
}

}  // namespace
}  // namespace idist_bench

int main(int argc, char** argv) {
  idist_bench::Options o;
  CLI::App app{"How long idist::Checkpoint::save blocks training, against a plain write of its bytes."};
  app.add_option("--backend", o.backend, "serial, or mpi / gloo under mpirun")
      ->check(CLI::IsMember({"serial", "mpi", "gloo"}))
      ->capture_default_str();
  app.add_option("--sizes", o.sizes_mib, "model sizes in MiB (the optimizer state comes on top)")->delimiter(',');
  app.add_option("--optimizers", o.optimizers, "sgd (momentum: +1x) and/or adam (+2x)")
      ->delimiter(',')
      ->check(CLI::IsMember({"sgd", "adam"}));
  app.add_option("--tensor-mib", o.tensor_mib, "size of each parameter tensor")->capture_default_str();
  app.add_option("--reps", o.reps, "timed saves per size")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_flag("--foreground", o.foreground, "save with background_write = false (save returns once on disk)");
  app.add_option("--dir", o.dir, "checkpoint directory, on the file system to measure (removed at the end)")
      ->capture_default_str();
  app.add_option("--out-dir", o.out_dir, "where the CSV and Markdown tables go")->capture_default_str();
  app.add_option("--label", o.label, "names the result files (default: the backend)");
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  try {
    if (o.backend != "serial") idist::initialize(o.backend);
    const int rc = idist_bench::run(o);
    if (o.backend != "serial") idist::finalize();
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "idist_bench_checkpoint: error: %s\n", e.what());
    return 1;
  }
}
