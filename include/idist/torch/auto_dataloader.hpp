#pragma once
/// @file
/// auto_dataloader: ignite.distributed.auto_dataloader for LibTorch datasets.

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <torch/data/dataloader/stateless.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/samplers.hpp"

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
  /// Shuffle every epoch (used when no sampler is given).
  bool shuffle = true;
  /// Drop the last incomplete batch.
  bool drop_last = false;
  /// Pinned host memory for batches; defaults to true when idist::device() is a CUDA device.
  /// LibTorch's data loader has no pinned-memory option, so the resolved value is reported by
  /// DataLoader::options() for the caller to act on (e.g. tensor.pin_memory()).
  std::optional<bool> pin_memory = std::nullopt;
  /// A sampler of dataset indices. With world size > 1 it is wrapped in DistributedProxySampler
  /// unless it is already distributed (DistributedSampler, DistributedProxySampler or LibTorch's
  /// DistributedRandom/SequentialSampler), which is used as is.
  std::shared_ptr<torch::data::samplers::Sampler<>> sampler = nullptr;
};

namespace detail {

/// ignite's scaling rules, as a pure function of the configuration: returns `opts` with the batch
/// size and the worker count scaled for `world_size` ranks with `nproc_per_node` per node, and
/// pin_memory resolved for `device`. The sampler is left as given (see auto_dataloader).
/// @throws ValueError for batch_size 0, world_size < 1 or nproc_per_node < 1.
inline DataLoaderOptions adapt_loader_options(DataLoaderOptions opts, int world_size, int nproc_per_node,
                                              const Device& device) {
  if (opts.batch_size == 0) throw ValueError("auto_dataloader: batch_size should be a positive integer, but given 0");
  if (world_size < 1 || nproc_per_node < 1)
    throw ValueError("auto_dataloader: world_size and nproc_per_node should be positive, but given " +
                     std::to_string(world_size) + " and " + std::to_string(nproc_per_node));
  if (world_size > 1) {
    const auto ws = std::size_t(world_size);
    const auto nproc = std::size_t(nproc_per_node);
    if (opts.batch_size >= ws) opts.batch_size /= ws;
    if (opts.num_workers >= nproc) opts.num_workers = (opts.num_workers + nproc - 1) / nproc;
  }
  if (!opts.pin_memory) opts.pin_memory = device.type == DeviceType::CUDA;
  return opts;
}

/// Presents any LibTorch sampler as an EpochSampler: set_epoch reaches samplers that have one
/// (LibTorch's distributed samplers) and is ignored by the others.
class EpochAdapter final : public EpochSampler {
 public:
  EpochAdapter(std::shared_ptr<torch::data::samplers::Sampler<>> inner, std::optional<std::size_t> size)
      : inner_(std::move(inner)), size_(size) {}
  void set_epoch(std::uint64_t epoch) override {
    epoch_ = epoch;
    if (auto* d = dynamic_cast<torch::data::samplers::DistributedSampler<>*>(inner_.get())) d->set_epoch(epoch);
  }
  std::uint64_t epoch() const override { return epoch_; }
  std::optional<std::size_t> size() const override { return size_; }
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override { inner_->reset(new_size); }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return inner_->next(batch_size); }
  void save(torch::serialize::OutputArchive& archive) const override { inner_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { inner_->load(archive); }
  /// The adapted sampler.
  const std::shared_ptr<torch::data::samplers::Sampler<>>& inner() const noexcept { return inner_; }

 private:
  std::shared_ptr<torch::data::samplers::Sampler<>> inner_;
  std::optional<std::size_t> size_;
  std::uint64_t epoch_ = 0;
};

/// What the LibTorch loader stores (it keeps its sampler by value and private): a handle to the
/// EpochSampler the user reaches through DataLoader::sampler().
class SharedSampler final : public torch::data::samplers::Sampler<> {
 public:
  explicit SharedSampler(std::shared_ptr<EpochSampler> s) : s_(std::move(s)) {}
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override { s_->reset(new_size); }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return s_->next(batch_size); }
  void save(torch::serialize::OutputArchive& archive) const override { s_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { s_->load(archive); }

 private:
  std::shared_ptr<EpochSampler> s_;
};

/// True for samplers that already shard across ranks (used as given by auto_dataloader).
inline bool is_distributed_sampler(const torch::data::samplers::Sampler<>* s) {
  return dynamic_cast<const DistributedSampler*>(s) || dynamic_cast<const DistributedProxySampler*>(s) ||
         dynamic_cast<const torch::data::samplers::DistributedSampler<>*>(s);
}

/// The sampler auto_dataloader uses for a dataset of `dataset_size` examples (ignite's choice).
inline std::shared_ptr<EpochSampler> choose_sampler(const DataLoaderOptions& opts, std::size_t dataset_size,
                                                    int world_size, int rank) {
  using torch::data::samplers::Sampler;
  const std::shared_ptr<Sampler<>>& user = opts.sampler;
  if (world_size > 1) {
    if (!user) return std::make_shared<DistributedSampler>(dataset_size, world_size, rank, opts.shuffle);
    if (!is_distributed_sampler(user.get())) return std::make_shared<DistributedProxySampler>(user, world_size, rank);
    if (auto* d = dynamic_cast<const DistributedSampler*>(user.get());
        d && (d->rank() != rank || d->num_replicas() != world_size))
      std::cerr << "idist::auto_dataloader: warning: found a DistributedSampler with rank=" << d->rank()
                << " and num_replicas=" << d->num_replicas() << ", but the process rank is " << rank
                << " and the world size " << world_size << "\n";
  }
  if (!user) {
    std::shared_ptr<Sampler<>> s;
    if (opts.shuffle)
      s = std::make_shared<torch::data::samplers::RandomSampler>(std::int64_t(dataset_size));
    else
      s = std::make_shared<torch::data::samplers::SequentialSampler>(dataset_size);
    return std::make_shared<EpochAdapter>(std::move(s), dataset_size);
  }
  if (auto e = std::dynamic_pointer_cast<EpochSampler>(user)) return e;
  std::optional<std::size_t> size;
  if (auto* w = dynamic_cast<const WeightedRandomSampler*>(user.get())) size = w->size();
  return std::make_shared<EpochAdapter>(user, size);
}

}  // namespace detail

/// The loader auto_dataloader returns: LibTorch's StatelessDataLoader over `Dataset`, plus the
/// handle to its sampler that LibTorch keeps private. Iterate it with range-for, and call
/// set_epoch(e) (or sampler().set_epoch(e)) before each epoch so that shuffling differs per epoch:
///
///     auto loader = idist::auto_dataloader(dataset, {.batch_size = 64, .shuffle = true});
///     for (std::uint64_t epoch = 0; epoch < epochs; ++epoch) {
///       loader.set_epoch(epoch);
///       for (auto& batch : loader) { ... }
///     }
///
/// Move-only; one iteration at a time (LibTorch's rule).
template <class Dataset>
class DataLoader {
 public:
  /// LibTorch's loader type inside.
  using Inner = torch::data::StatelessDataLoader<Dataset, detail::SharedSampler>;
  /// One batch (Dataset::BatchType).
  using BatchType = typename Dataset::BatchType;

  DataLoader(Dataset dataset, std::shared_ptr<EpochSampler> sampler, DataLoaderOptions resolved)
      : sampler_(std::move(sampler)), options_(std::move(resolved)) {
    torch::data::DataLoaderOptions o(options_.batch_size);
    o.workers(options_.num_workers).drop_last(options_.drop_last);
    inner_ = std::make_unique<Inner>(std::move(dataset), detail::SharedSampler(sampler_), std::move(o));
  }

  /// Starts an epoch (resets the sampler) and returns the first batch's iterator.
  auto begin() { return inner_->begin(); }
  /// The end sentinel.
  auto end() { return inner_->end(); }

  /// The sampler: DistributedSampler or DistributedProxySampler with world size > 1.
  EpochSampler& sampler() noexcept { return *sampler_; }
  /// The sampler, shared.
  const std::shared_ptr<EpochSampler>& sampler_ptr() const noexcept { return sampler_; }
  /// Shorthand for sampler().set_epoch(epoch).
  void set_epoch(std::uint64_t epoch) { sampler_->set_epoch(epoch); }

  /// The options after ignite's adaptation (per-rank batch size and workers, resolved pin_memory).
  const DataLoaderOptions& options() const noexcept { return options_; }
  /// Batches per epoch on this rank, when the sampler's size is known.
  std::optional<std::size_t> size() const {
    const auto n = sampler_->size();
    if (!n) return std::nullopt;
    return options_.drop_last ? *n / options_.batch_size : (*n + options_.batch_size - 1) / options_.batch_size;
  }
  /// LibTorch's loader.
  Inner& inner() noexcept { return *inner_; }

 private:
  std::shared_ptr<EpochSampler> sampler_;
  DataLoaderOptions options_;
  std::unique_ptr<Inner> inner_;
};

/// Builds a data loader adapted to the current distributed configuration. Mirrors
/// ignite.distributed.auto_dataloader; with world size > 1:
/// - batch_size becomes batch_size / world size when batch_size >= world size;
/// - num_workers becomes ceil(num_workers / nproc per node) when num_workers >= nproc per node;
/// - without a sampler, a DistributedSampler (rank and world size of idist, `shuffle` as given)
///   shards the dataset; a user sampler is wrapped in DistributedProxySampler (unless it is
///   already distributed).
/// Serial: the options as given, with a RandomSampler (shuffle) or SequentialSampler.
/// pin_memory defaults to true on CUDA devices. `dataset` is a LibTorch batch dataset with a size,
/// typically `MyDataset().map(torch::data::transforms::Stack<>())`.
/// @throws ValueError for batch_size 0 or a dataset without a size.
template <class Dataset>
DataLoader<Dataset> auto_dataloader(Dataset dataset, const DataLoaderOptions& opts = {}) {
  const auto size = dataset.size();
  if (!size) throw ValueError("auto_dataloader: the dataset has no size; expected a dataset whose size() is known");
  const int ws = get_world_size();
  DataLoaderOptions resolved = detail::adapt_loader_options(opts, ws, get_nproc_per_node(), device());
  std::shared_ptr<EpochSampler> sampler = detail::choose_sampler(resolved, *size, ws, get_rank());
  resolved.sampler = sampler;
  return DataLoader<Dataset>(std::move(dataset), std::move(sampler), std::move(resolved));
}

}  // namespace idist
