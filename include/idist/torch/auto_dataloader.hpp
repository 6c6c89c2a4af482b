#pragma once
/// @file
/// auto_dataloader: ignite.distributed.auto_dataloader for LibTorch datasets.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <torch/data/dataloader/stateless.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/samplers/random.h>
#include <torch/data/samplers/sequential.h>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "idist/torch/loader_options.hpp"
#include "idist/torch/samplers.hpp"
#include "idist/torch/stream_dataloader.hpp"

namespace idist {

namespace detail {

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

/// The name of the sampler a loader really draws from (through EpochAdapter), for the log line.
inline std::string sampler_name(const EpochSampler& s) {
  const auto* adapter = dynamic_cast<const EpochAdapter*>(&s);
  const torch::data::samplers::Sampler<>* inner = adapter ? adapter->inner().get() : &s;
  return c10::demangle(typeid(*inner).name());
}

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

/// ignite's warnings for a given distributed sampler whose rank or num_replicas differ from the
/// context's (idist's DistributedSampler and DistributedProxySampler, LibTorch's distributed samplers
/// do not expose theirs).
inline void warn_about_sampler_placement(const torch::data::samplers::Sampler<>& s, int world_size, int rank) {
  std::optional<std::pair<int, int>> placed;  // rank, num_replicas
  if (auto* d = dynamic_cast<const DistributedSampler*>(&s)) placed = {d->rank(), d->num_replicas()};
  if (auto* p = dynamic_cast<const DistributedProxySampler*>(&s)) placed = {p->rank(), p->num_replicas()};
  if (!placed) return;
  if (placed->first != rank)
    log_warning(kAutoDataloaderLogger,
                format_message("Found distributed sampler with rank={}, but process rank is {}", placed->first, rank));
  if (placed->second != world_size)
    log_warning(kAutoDataloaderLogger,
                format_message("Found distributed sampler with num_replicas={}, but world size is {}", placed->second,
                               world_size));
}

/// The sampler auto_dataloader uses for a dataset of `dataset_size` examples (ignite's choice).
inline std::shared_ptr<EpochSampler> choose_sampler(const DataLoaderOptions& opts, std::size_t dataset_size,
                                                    int world_size, int rank) {
  using torch::data::samplers::Sampler;
  const std::shared_ptr<Sampler<>>& user = opts.sampler;
  if (world_size > 1) {
    if (!user) return std::make_shared<DistributedSampler>(dataset_size, world_size, rank, opts.shuffle.value_or(true));
    if (!is_distributed_sampler(user.get())) return std::make_shared<DistributedProxySampler>(user, world_size, rank);
    warn_about_sampler_placement(*user, world_size, rank);
  }
  if (!user) {
    std::shared_ptr<Sampler<>> s;
    if (opts.shuffle.value_or(false))
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

  /// Built by auto_dataloader(): `sampler` is this rank's share (or nullptr), `resolved` the final
  /// options (batch size per rank, workers).
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
/// - without a sampler, a DistributedSampler (rank and world size of idist, `shuffle` as given, else true)
///   shards the dataset; a user sampler (an EpochSampler of the user's included) is wrapped in
///   DistributedProxySampler, unless it is already distributed: then it is used as is, with
///   ignite's warnings ("Found distributed sampler with rank=R, but process rank is P", "... with
///   num_replicas=N, but world size is W") when it was built for another place in the world.
/// Serial: the options as given, with a RandomSampler (shuffle) or SequentialSampler (the default,
/// as ignite passes the options unchanged to the DataLoader, whose shuffle defaults to false).
/// pin_memory defaults to true on CUDA devices. Logs the final options on rank 0, as ignite does
/// (see detail::describe_loader). `dataset` is a LibTorch map-style batch dataset with a size,
/// typically `MyDataset().map(torch::data::transforms::Stack<>())`; stream datasets take the
/// overload in stream_dataloader.hpp.
/// @throws ValueError for batch_size 0 or a dataset without a size.
template <class Dataset>
requires(!detail::StreamDataset<Dataset>) DataLoader<Dataset> auto_dataloader(Dataset dataset,
                                                                              const DataLoaderOptions& opts = {}) {
  const auto size = dataset.size();
  if (!size)
    throw ValueError(
        "auto_dataloader: the map-style dataset has no size; expected a dataset whose size() is known "
        "(a dataset without a size should be a stream dataset, whose batches are requested by count)");
  const int ws = get_world_size();
  DataLoaderOptions resolved = detail::adapt_loader_options(opts, ws, get_nproc_per_node(), device());
  std::shared_ptr<EpochSampler> sampler = detail::choose_sampler(resolved, *size, ws, get_rank());
  resolved.sampler = sampler;
  log_info(detail::kAutoDataloaderLogger,
           detail::describe_loader(detail::short_type_name(typeid(Dataset)), resolved, detail::sampler_name(*sampler)));
  return DataLoader<Dataset>(std::move(dataset), std::move(sampler), std::move(resolved));
}

}  // namespace idist
