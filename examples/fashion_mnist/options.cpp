#include "options.hpp"

#include <map>
#include <string>

#include <CLI/CLI.hpp>

namespace fashion_mnist {

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"Trains a small CNN on Fashion-MNIST with idist (data-parallel over the ranks)."};
  // A repeated option takes its last value, so that wrapper scripts' defaults can be overridden.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--backend", o.backend, "serial, mpi (launch with mpirun) or gloo")
      ->check(CLI::IsMember({"serial", "mpi", "gloo"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "training epochs")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "global batch size, divided among the ranks")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--lr", o.lr, "SGD learning rate")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  const std::map<std::string, LrSchedule> schedules{{"linear", LrSchedule::Linear}, {"constant", LrSchedule::Constant}};
  app.add_option("--lr-schedule", o.lr_schedule, "linear (decay to 0 over the run) or constant")
      ->transform(CLI::CheckedTransformer(schedules, CLI::ignore_case))
      ->default_str("linear");
  app.add_option("--limit", o.limit, "train on the first N training images only (0: all)")->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "folder holding the Fashion-MNIST IDX gzip files")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed of the weights and the shuffling")->capture_default_str();
  app.add_option("--num-workers", o.num_workers, "data-loader worker threads (global)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-every", o.log_every, "seconds between progress lines")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--timeout", o.timeout, "seconds a collective may wait before failing")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--nproc-per-node", o.nproc_per_node, "spawn this many worker processes (gloo only)")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

}  // namespace fashion_mnist
