#include "options.hpp"

#include <string>

#include <CLI/CLI.hpp>

namespace fashion_mnist {
namespace {

// "must be > 0" with a readable message (CLI11's PositiveNumber prints the double range).
const CLI::Validator kPositive(
    [](std::string& value) -> std::string {
      try {
        if (std::stod(value) > 0) return {};
      } catch (const std::exception&) {
      }
      return "expected a number > 0, got '" + value + "'";
    },
    "> 0", "Positive");

}  // namespace

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  CLI::App app{"Trains a small CNN on Fashion-MNIST with idist (data-parallel over the ranks)."};
  // A repeated option takes its last value, so that wrapper scripts' defaults can be overridden.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--backend", o.backend, "serial, mpi (launch with mpirun), gloo or nccl (NVIDIA GPUs)")
      ->check(CLI::IsMember({"serial", "mpi", "gloo", "nccl"}))
      ->capture_default_str();
  app.add_option("--epochs", o.epochs, "training epochs")->check(kPositive)->capture_default_str();
  app.add_option("--batch-size", o.batch_size, "global batch size, divided among the ranks")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--lr", o.lr, "learning rate (--optimizer adam: 0.001 unless given)")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--momentum", o.momentum, "SGD momentum (--optimizer sgd)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  std::string schedule = o.lr_schedule == LrSchedule::Linear ? "linear" : "constant";
  app.add_option("--lr-schedule", schedule, "linear (decay to 0 over the run) or constant")
      ->check(CLI::IsMember({"linear", "constant"}))
      ->capture_default_str();
  app.add_option("--limit", o.limit, "train on the first N training images only (0: all)")->capture_default_str();
  app.add_option("--data-dir", o.data_dir, "folder holding the Fashion-MNIST IDX gzip files")->capture_default_str();
  app.add_option("--seed", o.seed, "random seed of the weights and the shuffling")->capture_default_str();
  app.add_option("--num-workers", o.num_workers, "data-loader worker threads (global)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--log-every", o.log_every, "seconds between progress lines")->check(kPositive)->capture_default_str();
  app.add_option("--timeout", o.timeout, "seconds a collective may wait before failing")
      ->check(kPositive)
      ->capture_default_str();
  app.add_flag("--sync-bn", o.sync_bn,
               "use the CNN's batch-norm variant, its statistics synchronised over the ranks "
               "(auto_model sync_bn: idist::nn::SyncBatchNorm); checkpoints of one variant do not load into the other");
  app.add_option("--nproc-per-node", o.nproc_per_node, "spawn this many worker processes per node (gloo, nccl)")
      ->check(kPositive);
  app.add_option("--nnodes", o.nnodes, "number of nodes; run the same command on each with its --node-rank")
      ->check(kPositive);
  app.add_option("--node-rank", o.node_rank, "index of this node in [0, nnodes)")->check(CLI::NonNegativeNumber);
  app.add_option("--master-addr", o.master_addr, "address of node 0, where rank 0 serves the rendezvous");
  app.add_option("--master-port", o.master_port, "port of the rendezvous on node 0")->check(CLI::Range(1, 65535));
  auto* checkpoint = app.add_option("--checkpoint-dir", o.checkpoint_dir,
                                    "write DIR/checkpoint_<iteration>.pt after each epoch (rank 0 only; the newest two "
                                    "are kept)");
  app.add_option("--checkpoint-every-steps", o.checkpoint_every_steps,
                 "also write a checkpoint every N global steps, mid-epoch too (0: at epoch ends only)")
      ->check(CLI::NonNegativeNumber)
      ->needs(checkpoint)
      ->capture_default_str();
  auto* auto_resume = app.add_flag("--auto-resume", o.auto_resume,
                                   "continue from the newest checkpoint in --checkpoint-dir when there is one, start "
                                   "fresh otherwise (what a restarted worker needs)")
                          ->needs(checkpoint);
  app.add_flag("--resume", o.resume, "continue from the newest checkpoint in --checkpoint-dir, which must exist")
      ->needs(checkpoint)
      ->excludes(auto_resume);
  app.add_option("--stop-after-epoch", o.stop_after_epoch,
                 "end the run after this epoch, as if interrupted (the learning-rate schedule still spans --epochs)")
      ->check(kPositive);
  app.add_option("--stop-after-steps", o.stop_after_steps,
                 "leave training after this global step as if the job were killed (no evaluation, no checkpoint "
                 "of that step)")
      ->check(kPositive);
  app.add_flag("--print-timing", o.print_timing,
               "every rank prints one line after its first training step: seconds since the process started, "
               "the part spent before loading the checkpoint and loading it (for measuring restarts)");
  app.add_option("--comm-hook", o.comm_hook,
                 "gradient communication hook (idist::comm_hooks): none (auto_model's all-reduce), allreduce, fp16, "
                 "bf16 or powersgd")
      ->check(CLI::IsMember({"none", "allreduce", "fp16", "bf16", "powersgd"}))
      ->capture_default_str();
  app.add_option("--powersgd-rank", o.powersgd_rank, "PowerSGD's rank of approximation")
      ->check(kPositive)
      ->capture_default_str();
  app.add_option("--powersgd-start", o.powersgd_start, "iterations of plain all-reduce before PowerSGD compresses")
      ->check(CLI::Range(2, 1 << 30))
      ->capture_default_str();
  app.add_option("--optimizer", o.optimizer, "sgd (with --momentum) or adam (--lr 0.001 unless given)")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  auto* zero =
      app.add_flag("--zero", o.zero, "shard the optimizer state over the ranks (idist::ZeroRedundancyOptimizer)");
  app.add_option("--zero-stage", o.zero_stage,
                 "1: the gradients are all-reduced; 2: reduce-scattered by owner "
                 "(ZeroRedundancyOptimizer::reduce_scatter_hook, which takes the place of --comm-hook)")
      ->check(CLI::IsMember({1, 2}))
      ->needs(zero)
      ->capture_default_str();
  try {
    app.parse(argc, argv);
    if (o.zero_stage == 2 && o.comm_hook != "none")
      throw CLI::ValidationError("--zero-stage",
                                 "stage 2 is a communication hook itself; expected --comm-hook none, "
                                 "given " +
                                     o.comm_hook);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (o.optimizer == "adam" && app.count("--lr") == 0) o.lr = 1e-3;
  o.lr_schedule = schedule == "linear" ? LrSchedule::Linear : LrSchedule::Constant;
  return std::nullopt;
}

bool launches_workers(const Options& o) {
  return o.nproc_per_node || o.nnodes || o.node_rank || o.master_addr || o.master_port;
}

}  // namespace fashion_mnist
