#pragma once
/// @file
/// auto_dataloader: ignite.distributed.auto_dataloader for LibTorch datasets.

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/Tensor.h>

#include <torch/data/dataloader/stateless.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/iterator.h>

#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "idist/torch/batch_fetch.hpp"
#include "idist/torch/loader_options.hpp"
#include "idist/torch/samplers.hpp"
#include "idist/torch/stream_dataloader.hpp"

namespace idist {

namespace detail {

/// Where a DataLoader stands in its epoch; shared by the loader, its iterators, the sampler handle
/// LibTorch's loader holds, and a Checkpoint that saves the loader.
struct LoaderProgress {
  /// A position to resume at, applied by the next iteration of `epoch`.
  struct Resume {
    std::uint64_t epoch = 0;  ///< the sampler's epoch it applies to
    std::uint64_t skip = 0;   ///< this rank's indices to skip
    at::Tensor rng;           ///< the default CPU generator's state when the epoch was drawn (may be undefined)
  };
  std::uint64_t epoch = 0;                ///< epoch of the current (or last) iteration
  std::uint64_t consumed = 0;             ///< this rank's indices handed out in it, skipped ones included
  at::Tensor epoch_rng;                   ///< default CPU generator's state when its indices were drawn
  std::optional<Resume> pending;          ///< applied by the next reset() of the sampler
  std::size_t batch_size = 1;             ///< per rank
  int replicas = 1;                       ///< ranks sharing the epoch (the world size at construction)
  std::optional<std::size_t> epoch_size;  ///< this rank's indices per epoch, when known
};

/// Starts an epoch of `sampler` for the loader whose progress is `progress`: records the generator's
/// state, draws the epoch (reset), then applies a pending resume of this epoch (the generator state
/// of the saved epoch for the draw, then the skip).
void start_epoch(LoaderProgress& progress, EpochSampler& sampler, torch::optional<std::size_t> new_size);

/// What the LibTorch loader stores (it keeps its sampler by value and private): a handle to the
/// EpochSampler the user reaches through DataLoader::sampler(), whose reset() goes through
/// start_epoch().
class SharedSampler final : public torch::data::samplers::Sampler<> {
 public:
  SharedSampler(std::shared_ptr<EpochSampler> s, std::shared_ptr<LoaderProgress> p)
      : s_(std::move(s)), p_(std::move(p)) {}
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override { start_epoch(*p_, *s_, new_size); }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return s_->next(batch_size); }
  void save(torch::serialize::OutputArchive& archive) const override { s_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { s_->load(archive); }

 private:
  std::shared_ptr<EpochSampler> s_;
  std::shared_ptr<LoaderProgress> p_;
};

/// The name of the sampler a loader really draws from (through an adapter), for the log line.
std::string sampler_name(const EpochSampler& s);

/// The sampler auto_dataloader uses for a dataset of `dataset_size` examples (ignite's choice; logs
/// ignite's warnings for a distributed sampler built for another rank or world size).
std::shared_ptr<EpochSampler> choose_sampler(const DataLoaderOptions& opts, std::size_t dataset_size, int world_size,
                                             int rank);

/// A loader's iterator: LibTorch's, counting the batches handed out (the first time each is read)
/// into the loader's progress, so that a checkpoint knows how far the epoch went, and pinning them
/// then when the loader pins (DataLoaderOptions::pin_memory).
template <class Batch>
class CountingIterator {
 public:
  using difference_type = std::ptrdiff_t;             ///< iterator trait
  using value_type = Batch;                           ///< iterator trait
  using pointer = Batch*;                             ///< iterator trait
  using reference = Batch&;                           ///< iterator trait
  using iterator_category = std::input_iterator_tag;  ///< iterator trait

  /// Wraps `it`; counts into `progress` (nullptr: the end sentinel); pins each batch with `pin`.
  CountingIterator(torch::data::Iterator<Batch> it, LoaderProgress* progress, bool pin = false)
      : it_(std::move(it)), progress_(progress), pin_(pin) {}
  /// The current batch (fetched on first access).
  Batch& operator*() { return *count(); }
  /// The current batch's members.
  Batch* operator->() { return count(); }
  /// Moves to the next batch.
  CountingIterator& operator++() {
    ++it_;
    counted_ = false;
    return *this;
  }
  /// Whether both are at the end (LibTorch's rule: only comparisons with the sentinel are defined).
  bool operator==(const CountingIterator& other) const { return it_ == other.it_; }
  /// Negation of ==.
  bool operator!=(const CountingIterator& other) const { return !(*this == other); }

 private:
  Batch* count() {
    Batch* batch = &*it_;
    if (counted_) return batch;
    if (progress_) progress_->consumed += progress_->batch_size;
    if (pin_) pin_batch(*batch);
    counted_ = true;
    return batch;
  }

  torch::data::Iterator<Batch> it_;
  LoaderProgress* progress_;
  bool pin_;
  bool counted_ = false;
};

}  // namespace detail

/// Where a DataLoader stands: its epoch, and the samples handed out in it by all ranks together.
struct LoaderPosition {
  std::uint64_t epoch = 0;             ///< the sampler's epoch (as given to set_epoch)
  std::uint64_t consumed_samples = 0;  ///< batches read this epoch x per-rank batch size x ranks
};

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
/// The loader counts the batches its iterators hand out (position()), so that an idist::Checkpoint
/// can save where an epoch stands and resume it mid-way (set_epoch(epoch, start_sample)).
/// Move-only; one iteration at a time (LibTorch's rule).
template <class Dataset>
class DataLoader {
 public:
  /// LibTorch's loader type inside (over the dataset, fetching whole batches where it can: batch_fetch.hpp).
  using Inner = torch::data::StatelessDataLoader<detail::BatchFetch<Dataset>, detail::SharedSampler>;
  /// One batch (Dataset::BatchType).
  using BatchType = typename Dataset::BatchType;
  /// The iterator of begin() / end().
  using iterator = detail::CountingIterator<BatchType>;

  /// Built by auto_dataloader(): `sampler` is this rank's share (or nullptr), `resolved` the final
  /// options (batch size per rank, workers), `replicas` the ranks sharing an epoch.
  DataLoader(Dataset dataset, std::shared_ptr<EpochSampler> sampler, DataLoaderOptions resolved, int replicas = 1)
      : sampler_(std::move(sampler)),
        options_(std::move(resolved)),
        progress_(std::make_shared<detail::LoaderProgress>()) {
    progress_->batch_size = options_.batch_size;
    progress_->replicas = replicas;
    progress_->epoch_size = sampler_->size();
    torch::data::DataLoaderOptions o(options_.batch_size);
    o.workers(options_.num_workers).drop_last(options_.drop_last);
    inner_ = std::make_unique<Inner>(detail::BatchFetch<Dataset>(std::move(dataset)),
                                     detail::SharedSampler(sampler_, progress_), std::move(o));
  }

  /// Starts an epoch (resets the sampler; applies a position to resume at) and returns the first batch's iterator.
  iterator begin() { return iterator(inner_->begin(), progress_.get(), detail::pins_batches(options_)); }
  /// The end sentinel.
  iterator end() { return iterator(inner_->end(), nullptr); }

  /// The sampler: DistributedSampler or DistributedProxySampler with world size > 1.
  EpochSampler& sampler() noexcept { return *sampler_; }
  /// The sampler, shared.
  const std::shared_ptr<EpochSampler>& sampler_ptr() const noexcept { return sampler_; }
  /// Shorthand for sampler().set_epoch(epoch). A position to resume this same epoch at (restored by
  /// Checkpoint::load_latest or set by set_epoch(epoch, start_sample)) is kept; one of another
  /// epoch is dropped.
  void set_epoch(std::uint64_t epoch) {
    if (progress_->pending && progress_->pending->epoch != epoch) progress_->pending.reset();
    sampler_->set_epoch(epoch);
  }
  /// Selects `epoch` and makes its next iteration skip the first `start_sample` samples of all ranks
  /// together: each of the R ranks skips floor(start_sample / R) of its own indices (ranks take
  /// interleaved indices, so that is where the epoch stood when it was saved at R ranks, and at most
  /// R - 1 samples early when saved at another world size).
  void set_epoch(std::uint64_t epoch, std::uint64_t start_sample) {
    sampler_->set_epoch(epoch);
    progress_->pending = detail::LoaderProgress::Resume{epoch, start_sample / std::uint64_t(progress_->replicas), {}};
  }
  /// The epoch of the current (or last) iteration and the samples its batches handed out so far, all
  /// ranks together (a batch counts once read, as a full per-rank batch).
  LoaderPosition position() const {
    std::uint64_t local = progress_->consumed;
    if (progress_->epoch_size) local = std::min<std::uint64_t>(local, *progress_->epoch_size);
    return {progress_->epoch, local * std::uint64_t(progress_->replicas)};
  }
  /// The shared position state (what a Checkpoint saves).
  const std::shared_ptr<detail::LoaderProgress>& progress() const noexcept { return progress_; }

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
  std::shared_ptr<detail::LoaderProgress> progress_;
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
/// pin_memory defaults to true on CUDA devices (see DataLoaderOptions::pin_memory). Logs the final
/// options on rank 0, as ignite does (see detail::describe_loader). `dataset` is a LibTorch
/// map-style batch dataset with a size, typically `MyDataset().map(torch::data::transforms::Stack<>())`;
/// stream datasets take the overload in stream_dataloader.hpp. Such a stacked map over a
/// StackedBatchDataset (a dataset with `get_stacked(indices)`) or over LibTorch's TensorDataset is
/// fetched one batch per call, without per-example get() and Stack (the same batches, bitwise).
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
  return DataLoader<Dataset>(std::move(dataset), std::move(sampler), std::move(resolved), ws);
}

}  // namespace idist
