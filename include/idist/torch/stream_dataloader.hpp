#pragma once
/// @file
/// auto_dataloader for stream datasets, the LibTorch counterpart of ignite's IterableDataset case:
/// datasets whose batches are requested by a count (BatchRequestType size_t), i.e. LibTorch's
/// StreamDataset (stateless, its size optional) and StatefulDataset (ends an epoch itself by
/// returning no batch). No sampler can shard a stream, so the loader has none and each rank's
/// dataset must produce that rank's share itself (e.g. read every world-size-th record from
/// get_rank()); the batch size and workers are still scaled by ignite's rules.

#include <cstddef>
#include <iterator>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include <torch/data/dataloader/stateful.h>
#include <torch/data/dataloader/stateless.h>
#include <torch/data/dataloader_options.h>
#include <torch/data/samplers/stream.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "idist/torch/loader_options.hpp"

namespace idist {

namespace detail {

/// A LibTorch stream dataset: its batches are requested by a count, not by indices.
template <class D>
concept StreamDataset = std::is_same_v<typename D::BatchRequestType, std::size_t>;

/// A stream loader's iterator: LibTorch's, pinning each batch the first time it is read when the
/// loader pins (DataLoaderOptions::pin_memory).
template <class It>
class PinningIterator {
 public:
  using difference_type = std::ptrdiff_t;                                      ///< iterator trait
  using value_type = std::remove_reference_t<decltype(*std::declval<It&>())>;  ///< iterator trait
  using pointer = value_type*;                                                 ///< iterator trait
  using reference = value_type&;                                               ///< iterator trait
  using iterator_category = std::input_iterator_tag;                           ///< iterator trait

  /// Wraps `it`; pins each batch with `pin`.
  PinningIterator(It it, bool pin) : it_(std::move(it)), pin_(pin) {}
  /// The current batch (fetched on first access).
  reference operator*() { return *pinned(); }
  /// The current batch's members.
  pointer operator->() { return pinned(); }
  /// Moves to the next batch.
  PinningIterator& operator++() {
    ++it_;
    done_ = false;
    return *this;
  }
  /// Whether both are at the end (LibTorch's rule: only comparisons with the sentinel are defined).
  bool operator==(const PinningIterator& other) const { return it_ == other.it_; }
  /// Negation of ==.
  bool operator!=(const PinningIterator& other) const { return !(*this == other); }

 private:
  pointer pinned() {
    pointer batch = &*it_;
    if (pin_ && !done_) pin_batch(*batch);
    done_ = true;
    return batch;
  }

  It it_;
  bool pin_;
  bool done_ = false;
};

}  // namespace detail

/// The loader auto_dataloader returns for a stream dataset: LibTorch's StatefulDataLoader for a
/// StatefulDataset (the epoch ends when the dataset returns no batch; each new iteration calls the
/// dataset's reset()), else its StatelessDataLoader over a StreamSampler, which requests
/// dataset.size() examples per epoch when the size is known and never stops otherwise (an endless
/// stream: leave the loop after the steps you want, as with ignite's epoch_length). Iterate with
/// range-for. Move-only; one iteration at a time (LibTorch's rule).
template <class Dataset>
requires detail::StreamDataset<Dataset>
class StreamDataLoader {
 public:
  /// LibTorch's loader type inside.
  using Inner = std::conditional_t<Dataset::is_stateful, torch::data::StatefulDataLoader<Dataset>,
                                   torch::data::StatelessDataLoader<Dataset, torch::data::samplers::StreamSampler>>;

  /// `resolved`: the options after ignite's rules (see auto_dataloader).
  StreamDataLoader(Dataset dataset, DataLoaderOptions resolved) : options_(std::move(resolved)) {
    torch::data::DataLoaderOptions o(options_.batch_size);
    o.workers(options_.num_workers).drop_last(options_.drop_last);
    if constexpr (Dataset::is_stateful) {
      inner_ = std::make_unique<Inner>(std::move(dataset), std::move(o));
    } else {
      const std::size_t epoch = dataset.size().value_or(std::numeric_limits<std::size_t>::max());
      inner_ = std::make_unique<Inner>(std::move(dataset), torch::data::samplers::StreamSampler(epoch), std::move(o));
    }
  }

  /// LibTorch's iterator, wrapped to pin the batches (DataLoaderOptions::pin_memory).
  using iterator = detail::PinningIterator<decltype(std::declval<Inner&>().begin())>;

  /// Starts an epoch and returns the first batch's iterator.
  iterator begin() { return iterator(inner_->begin(), detail::pins_batches(options_)); }
  /// The end sentinel.
  iterator end() { return iterator(inner_->end(), false); }
  /// The options after ignite's adaptation (per-rank batch size and workers, resolved pin_memory;
  /// no sampler).
  const DataLoaderOptions& options() const noexcept { return options_; }
  /// LibTorch's loader.
  Inner& inner() noexcept { return *inner_; }

 private:
  DataLoaderOptions options_;
  std::unique_ptr<Inner> inner_;
};

/// auto_dataloader for a stream dataset (ignite's IterableDataset case): no distributed sampler,
/// batch_size and num_workers scaled as for map-style datasets, pin_memory resolved; with world
/// size > 1 rank 0 logs that the dataset must shard itself ("Found stream dataset, dataloader will
/// be created without any distributed sampling. ..."), then, as always, the final options.
/// `shuffle` does not apply to a stream and is ignored.
/// @throws ValueError for batch_size 0, or a sampler in `opts` (a stream takes none).
template <class Dataset>
requires detail::StreamDataset<Dataset> StreamDataLoader<Dataset> auto_dataloader(Dataset dataset,
                                                                                  const DataLoaderOptions& opts = {}) {
  if (opts.sampler)
    throw ValueError(
        "auto_dataloader: a stream dataset takes no sampler (its batches are requested by count), but "
        "a sampler was given; shard the stream inside the dataset instead");
  const int ws = get_world_size();
  DataLoaderOptions resolved = detail::adapt_loader_options(opts, ws, get_nproc_per_node(), device());
  resolved.shuffle = false;
  if (ws > 1)
    log_info(detail::kAutoDataloaderLogger,
             "Found stream dataset, dataloader will be created without any distributed sampling. Please, make sure "
             "that the dataset itself produces different data on different ranks.");
  log_info(detail::kAutoDataloaderLogger,
           detail::describe_loader(detail::short_type_name(typeid(Dataset)), resolved, "none"));
  return StreamDataLoader<Dataset>(std::move(dataset), std::move(resolved));
}

}  // namespace idist
