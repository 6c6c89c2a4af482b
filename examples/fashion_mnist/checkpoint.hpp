#pragma once
// Checkpoints of the example: DIR/checkpoint_<epoch>.pt written by rank 0 after each epoch, and the
// newest one read back by rank 0 and broadcast to every rank (other nodes need not see DIR).
#include <cstdint>
#include <filesystem>
#include <optional>

#include <torch/torch.h>

#include "options.hpp"

namespace fashion_mnist {

/// Where training stands and the options that shape the sampler and the learning-rate schedule.
struct CheckpointState {
  int epoch = 0;           ///< epochs completed: the next run starts with epoch + 1 (1-based)
  std::uint64_t seed = 0;  ///< the sampler shuffles epoch e with seed + e (and seeded the weights)
  double lr = 0;           ///< the schedule's base learning rate
  double momentum = 0;     ///< SGD momentum (its buffers are in the optimizer's state)
  LrSchedule lr_schedule = LrSchedule::Linear;
  int epochs = 0;               ///< the run the schedule decays over
  std::int64_t batch_size = 0;  ///< global batch size
  std::uint32_t limit = 0;      ///< training images used (0: all)
  int world_size = 0;           ///< ranks that wrote it (any world size may resume it)
};

/// The options' part of a checkpoint for a run that has completed `epoch` epochs on `world_size` ranks.
CheckpointState state_of(const Options& o, int epoch, int world_size);

/// Writes dir/checkpoint_<state.epoch>.pt (model, optimizer, state) through a temporary file renamed
/// into place, so that a crash never leaves a truncated newest checkpoint; creates dir. Call on one
/// rank only. Returns the path written. @throws std::runtime_error when it cannot be written.
std::filesystem::path save_checkpoint(const std::filesystem::path& dir, const CheckpointState& state,
                                      const torch::nn::Module& model, const torch::optim::Optimizer& optimizer);

/// A checkpoint as every rank received it.
struct LoadedCheckpoint {
  std::filesystem::path path;  ///< the file rank 0 read
  CheckpointState state;
  torch::serialize::InputArchive model;      ///< for torch::nn::Module::load
  torch::serialize::InputArchive optimizer;  ///< for torch::optim::Optimizer::load
};

/// Collective: rank 0 reads the newest checkpoint_<n>.pt of `dir` (largest n) and broadcasts its path
/// and bytes; every rank parses them.
/// @throws idist::ValueError on every rank when `dir` holds no checkpoint.
LoadedCheckpoint load_newest_checkpoint(const std::filesystem::path& dir);

}  // namespace fashion_mnist
