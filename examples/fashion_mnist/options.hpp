#pragma once
// Command-line options of the fashion_mnist example (parsed with CLI11).
#include <cstdint>
#include <optional>
#include <string>

namespace fashion_mnist {

/// Where the Debian package dataset-fashion-mnist installs the data.
inline constexpr const char* kDefaultDataDir = "/usr/share/datasets/fashion-mnist";

/// How the learning rate changes over the run.
enum class LrSchedule {
  Constant,  ///< --lr throughout
  Linear,    ///< from --lr down to 0, linearly in the step count over all epochs
};

/// Everything the command line sets.
struct Options {
  std::string backend = "serial";               ///< "serial", "mpi", "gloo" or "nccl"
  int epochs = 1;                               ///< training epochs, >= 1
  std::int64_t batch_size = 64;                 ///< global batch size (all ranks together), >= 1
  double lr = 0.05;                             ///< learning rate (0.001 with --optimizer adam unless given)
  double momentum = 0.9;                        ///< SGD momentum
  LrSchedule lr_schedule = LrSchedule::Linear;  ///< learning-rate schedule
  std::uint32_t limit = 0;                      ///< train on the first `limit` images only; 0 = all 60 000
  std::string data_dir = kDefaultDataDir;       ///< folder of the four IDX gzip files
  std::uint64_t seed = 0;                       ///< seeds the weights and the shuffling
  int num_workers = 0;                ///< data-loader worker threads (global, scaled per rank by ignite's rule)
  double log_every = 5.0;             ///< seconds between progress lines
  double timeout = 600.0;             ///< seconds any collective may wait before failing
  bool sync_bn = false;               ///< the CNN with batch norm, synchronised over the ranks (auto_model sync_bn)
  std::optional<int> nproc_per_node;  ///< spawn this many workers (gloo launcher); unset = launched externally
  // Several nodes (ignite's multi-node Parallel): every node runs the same command with its --node-rank.
  std::optional<int> nnodes;               ///< number of nodes; the world is nnodes * nproc_per_node ranks
  std::optional<int> node_rank;            ///< this node's index in [0, nnodes)
  std::optional<std::string> master_addr;  ///< address of node 0 (its rank 0 serves the rendezvous)
  std::optional<int> master_port;          ///< port of the rendezvous on node 0
  // Checkpoints (idist::Checkpoint): DIR/checkpoint_<iteration>.pt, written by rank 0.
  std::string checkpoint_dir;               ///< checkpoint after each epoch (and every N steps) here; empty = none
  std::int64_t checkpoint_every_steps = 0;  ///< also checkpoint every N global steps (mid-epoch); 0 = epoch ends only
  bool auto_resume = false;        ///< continue from the newest checkpoint in checkpoint_dir if any, else start
  bool resume = false;             ///< as auto_resume, but a checkpoint must exist
  std::string comm_hook = "none";  ///< auto_model's communication hook: none, allreduce, fp16, bf16, powersgd
  int powersgd_rank = 4;           ///< PowerSGD's matrix_approximation_rank
  int powersgd_start = 10;         ///< PowerSGD's start_powersgd_iter (iterations of plain all-reduce first)
  int stop_after_epoch = 0;        ///< end the run after this epoch (1-based; the schedule still spans epochs); 0 = no
  std::int64_t stop_after_steps = 0;  ///< leave training after this global step, as if killed; 0 = no
  std::string optimizer = "sgd";      ///< "sgd" (with --momentum) or "adam"
  bool zero = false;                  ///< shard the optimizer state over the ranks (idist::ZeroRedundancyOptimizer)
  int zero_stage = 1;                 ///< with zero: 1 (gradients all-reduced) or 2 (reduce-scattered by owner)
  bool print_timing = false;          ///< every rank prints when its first step ended (measuring restarts)
};

/// True when the options ask idist::Parallel to start the workers (--nproc-per-node or a multi-node flag).
bool launches_workers(const Options& o);

/// Parses argv into `out`. Returns std::nullopt when the program should go on, or the exit code
/// to return (0 after --help, non-zero after a bad argument, which is reported on stderr).
std::optional<int> parse_options(int argc, char** argv, Options& out);

}  // namespace fashion_mnist
