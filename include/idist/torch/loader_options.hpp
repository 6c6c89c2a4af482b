#pragma once
/// @file
/// The options of auto_dataloader and ignite's rules adapting them to the distributed configuration
/// (shared by the loaders of map-style and of stream datasets).

#include <c10/util/Type.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <ATen/Tensor.h>
#include <torch/data/example.h>
#include <torch/data/samplers/base.h>

#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/types.hpp"

namespace idist {

/// Options of auto_dataloader: the keyword arguments of torch.utils.data.DataLoader that ignite
/// adapts. Sizes are global (before scaling by the world size).
struct DataLoaderOptions {
  /// Batch size; with world size > 1 and batch_size >= world size it becomes batch_size / world
  /// size per rank (integer division). Must be positive.
  std::size_t batch_size = 1;
  /// Loader worker threads; with world size > 1 and num_workers >= processes per node it becomes
  /// ceil(num_workers / processes per node).
  std::size_t num_workers = 0;
  /// Shuffle every epoch (used when no sampler is given). Unset: ignite's defaults, which differ:
  /// with world size > 1 its DistributedSampler shuffles (true), serially the options reach the
  /// DataLoader unchanged, which does not shuffle (false). Resolved by adapt_loader_options.
  std::optional<bool> shuffle = std::nullopt;
  /// Drop the last incomplete batch.
  bool drop_last = false;
  /// Pinned (page-locked) host memory for batches, PyTorch's DataLoader pin_memory: with it, the
  /// loader hands out every batch with its CPU tensors pinned (the tensors of a Tensor batch, of an
  /// Example's data and target, of a vector of those), so that a copy to the GPU with
  /// `.to(device, /*non_blocking=*/true)` overlaps the computation. Pinning happens as the loop
  /// reads the batch; tensors already pinned or on a device, and other batch types, are left as
  /// they are. It needs CUDA: where torch::cuda::is_available() is false it is a no-op (the batches
  /// stay in pageable memory, as PyTorch does with a warning). Unset: true when idist::device() is
  /// a CUDA device (ignite's rule); DataLoader::options() reports the resolved value.
  std::optional<bool> pin_memory = std::nullopt;
  /// A sampler of dataset indices. With world size > 1 it is wrapped in DistributedProxySampler
  /// unless it is already distributed (DistributedSampler, DistributedProxySampler or LibTorch's
  /// DistributedRandom/SequentialSampler), which is used as is.
  std::shared_ptr<torch::data::samplers::Sampler<>> sampler = nullptr;
};

namespace detail {

/// ignite's scaling rules, as a pure function of the configuration: returns `opts` with the batch
/// size and the worker count scaled for `world_size` ranks with `nproc_per_node` per node, and
/// shuffle and pin_memory resolved. The sampler is left as given (see auto_dataloader).
/// @throws ValueError for batch_size 0, world_size < 1 or nproc_per_node < 1.
inline DataLoaderOptions adapt_loader_options(DataLoaderOptions opts, int world_size, int nproc_per_node,
                                              const Device& device) {
  if (opts.batch_size == 0) throw ValueError("auto_dataloader: batch_size should be a positive integer, but given 0");
  if (world_size < 1 || nproc_per_node < 1)
    throw ValueError(
        format_message("auto_dataloader: world_size and nproc_per_node should be positive, but given {} and {}",
                       world_size, nproc_per_node));
  if (world_size > 1) {
    const auto ws = std::size_t(world_size);
    const auto nproc = std::size_t(nproc_per_node);
    if (opts.batch_size >= ws) opts.batch_size /= ws;
    if (opts.num_workers >= nproc) opts.num_workers = (opts.num_workers + nproc - 1) / nproc;
  }
  if (!opts.shuffle) opts.shuffle = world_size > 1;
  if (!opts.pin_memory) opts.pin_memory = device.type == DeviceType::CUDA;
  return opts;
}

/// The name of auto_dataloader's logger (ignite's ignite.distributed.auto.auto_dataloader).
inline constexpr std::string_view kAutoDataloaderLogger = "distributed.auto.auto_dataloader";

/// The readable name of `type`, shortened to `max_chars` (ignite logs the first 20 characters of the
/// dataset's repr).
inline std::string short_type_name(const std::type_info& type, std::size_t max_chars = 40) {
  std::string name = c10::demangle(type.name());
  if (name.size() > max_chars) name = name.substr(0, max_chars) + "...";
  return name;
}

/// ignite's log line of the loader's final arguments: "Use data loader options for dataset '<name>':
/// batch_size=.., num_workers=.., shuffle=.., drop_last=.., pin_memory=.., sampler=<type or none>".
inline std::string describe_loader(std::string_view dataset_name, const DataLoaderOptions& o,
                                   std::string_view sampler_name) {
  return format_message(
      "Use data loader options for dataset '{}': batch_size={}, num_workers={}, shuffle={}, drop_last={}, "
      "pin_memory={}, sampler={}",
      dataset_name, o.batch_size, o.num_workers, o.shuffle.value_or(false), o.drop_last, o.pin_memory.value_or(false),
      sampler_name);
}

/// Whether a loader with the resolved options `opts` pins its batches: pin_memory is set and CUDA is
/// available (torch::cuda::is_available()).
bool pins_batches(const DataLoaderOptions& opts);

/// Pins a CPU tensor's memory (a tensor already pinned, undefined or on a device stays as it is).
inline void pin_batch(at::Tensor& t) {
  if (t.defined() && t.device().is_cpu() && !t.is_pinned()) t = t.pin_memory();
}
/// Any other batch type: left as it is.
template <class T>
void pin_batch(T&) {}
template <class Data, class Target>
void pin_batch(torch::data::Example<Data, Target>& example);
template <class Data>
void pin_batch(torch::data::Example<Data, torch::data::example::NoTarget>& example);
template <class T>
void pin_batch(std::vector<T>& batch);

/// Pins an Example's data and target.
template <class Data, class Target>
void pin_batch(torch::data::Example<Data, Target>& example) {
  pin_batch(example.data);
  pin_batch(example.target);
}
/// Pins the data of an Example without a target (TensorExample).
template <class Data>
void pin_batch(torch::data::Example<Data, torch::data::example::NoTarget>& example) {
  pin_batch(example.data);
}
/// Pins every element of a vector batch (LibTorch's batch of examples without a collation).
template <class T>
void pin_batch(std::vector<T>& batch) {
  for (T& element : batch) pin_batch(element);
}

}  // namespace detail

}  // namespace idist
