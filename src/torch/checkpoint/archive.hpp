#pragma once
// The payload of a checkpoint file: a LibTorch archive holding
//   idist_checkpoint  format version (1)
//   epoch, iteration, world_size
//   rng_states        every rank's default CPU generator state, in rank order
//   values_int, values_double, values_string, values_tensor   the user values by type
//   values_tensor_device   the device type each user tensor was saved from ("cpu", "cuda")
//   item_names        the items' names, in order; item i is stored as
//   item<i>           a nested archive (modules: "parameters" and "buffers" dictionaries by dotted
//                     name; LibTorch's optimizers: their own save(); loaders: epoch,
//                     consumed_samples, replicas, epoch_rng), or as
//   item<i>_bytes     the serialized archive of an item whose save() ran on every rank.
#include <filesystem>
#include <optional>
#include <vector>

#include <ATen/Tensor.h>
#include <c10/core/Device.h>
#include <torch/serialize/archive.h>

#include "idist/torch/checkpoint.hpp"
#include "torch/checkpoint/snapshot.hpp"

namespace idist::checkpoint {

/// Whether the item's save() runs on every rank (objects that save themselves, optimizers other than
/// LibTorch's own) rather than as a copy on the saving rank.
bool saves_on_every_rank(const CheckpointItem& item);

/// Runs such an item's save() into `archive`, for a checkpoint written by world rank `saving_rank`
/// (a ZeroRedundancyOptimizer consolidates its state there: sharded_optimizer.hpp).
void save_on_this_rank(const CheckpointItem& item, torch::serialize::OutputArchive& archive, int saving_rank);

/// Fills the saving rank's archive: copies of the modules', optimizers' and loaders' state (from
/// `pool`), `serialized[i]` for the items that saved on every rank, the state, the world size and
/// the generator states.
void build_archive(torch::serialize::OutputArchive& out, const std::vector<CheckpointItem>& items,
                   const std::vector<at::Tensor>& serialized, const CheckpointState& state, int world_size,
                   const std::vector<at::Tensor>& rng_states, SnapshotPool& pool);

/// Throws std::runtime_error unless `archive` is a checkpoint of this format.
void check_format(torch::serialize::InputArchive& archive);

/// Where a checkpoint's archive is loaded: the map_location, else the host (the file holds host
/// copies; each item then moves its tensors where it keeps them).
torch::Device load_device(const std::optional<torch::Device>& map_location);

/// Restores the items (checked first: every item present, modules' names and shapes equal), this
/// rank's generator state, and returns the rest; `path` names the file in messages; `archive` was
/// loaded on load_device(map_location) (the nested archives of items are loaded there too). Module
/// tensors are copied into the module's own; optimizer state is moved onto its parameters
/// (optimizer_state.hpp); user tensors stay on map_location, or without one go back to the host or
/// to this rank's device as they were saved.
/// @throws ValueError naming the file and what does not fit.
LoadedCheckpoint apply_archive(torch::serialize::InputArchive& archive, const std::vector<CheckpointItem>& items,
                               const std::filesystem::path& path, int rank,
                               const std::optional<torch::Device>& map_location);

/// The default CPU generator's state, and setting it (under its lock).
at::Tensor cpu_generator_state();
void set_cpu_generator_state(const at::Tensor& state);

}  // namespace idist::checkpoint
