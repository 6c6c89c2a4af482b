#pragma once
/// @file
/// Samplers for data-parallel loading, LibTorch-compatible (torch::data::samplers::Sampler<>):
/// - DistributedSampler: torch.utils.data.DistributedSampler's semantics (padding to a multiple of
///   the replicas, shuffling seeded with seed + epoch, drop_last);
/// - DistributedProxySampler: ignite.distributed.DistributedProxySampler, which shards any other
///   sampler across the replicas;
/// - WeightedRandomSampler: torch.utils.data.WeightedRandomSampler, which LibTorch lacks.
/// All of them produce their epoch's indices in reset() (which LibTorch's data loader calls when an
/// iteration starts) and hand them out in batches from next().

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/data/samplers/base.h>
#include <torch/data/samplers/distributed.h>
#include <torch/serialize/archive.h>

#include "idist/error.hpp"

namespace idist {

/// A LibTorch sampler that knows its epoch: what auto_dataloader's loader exposes so that a training
/// loop can call `loader.sampler().set_epoch(epoch)` (or `loader.set_epoch(epoch)`) every epoch.
class EpochSampler : public torch::data::samplers::Sampler<> {
 public:
  /// Sets the epoch that seeds the next reset() (torch's DistributedSampler.set_epoch). Samplers
  /// whose order does not depend on the epoch ignore it.
  virtual void set_epoch(std::uint64_t epoch) = 0;
  /// The epoch last set (0 initially).
  virtual std::uint64_t epoch() const = 0;
  /// Number of indices one epoch yields on this rank, when known.
  virtual std::optional<std::size_t> size() const = 0;
};

namespace detail {

/// The indices of one epoch and the position reached in them; next() hands out batches.
struct IndexCursor {
  std::vector<std::size_t> indices;
  std::size_t pos = 0;

  /// The next at most `batch_size` indices; nullopt at the end (or for batch_size 0).
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size);
};

/// Resolves num_replicas / rank defaults (world size / rank of idist) and checks them.
/// @throws ValueError "Invalid rank R, rank should be in the interval [0, N-1]" (torch's words).
std::pair<int, int> replicas_and_rank(std::optional<int> num_replicas, std::optional<int> rank, const char* who);

/// Draws every index `sampler` yields in one pass (reset, then next() until exhausted).
std::vector<std::size_t> draw_all(torch::data::samplers::Sampler<>& sampler);

/// Writes a sampler's epoch and position within it (LibTorch's Sampler::save protocol).
void save_cursor(torch::serialize::OutputArchive& archive, std::uint64_t epoch, std::size_t pos);

/// Reads what save_cursor() wrote: the epoch and the position.
std::pair<std::uint64_t, std::size_t> load_cursor(torch::serialize::InputArchive& archive);

}  // namespace detail

class DistributedSampler;
class DistributedProxySampler;

namespace detail {

/// True for samplers that already shard across ranks: idist's DistributedSampler and
/// DistributedProxySampler, LibTorch's DistributedRandomSampler / DistributedSequentialSampler
/// (ignite's isinstance(sampler, DistributedSampler)). Any other sampler, a user's EpochSampler
/// included, is not.
bool is_distributed_sampler(const torch::data::samplers::Sampler<>* s);

}  // namespace detail

/// The base of the two distributed samplers (DistributedSampler, DistributedProxySampler): the
/// rank's place among num_replicas, the epoch, and a cursor over this epoch's indices that reset()
/// fills, next() walks and save() / load() persist. A loop that only sets epochs and reads the
/// replica layout can hold either sampler through it.
class ShardedEpochSampler : public EpochSampler {
 public:
  /// Selects the epoch whose indices the next reset() draws.
  void set_epoch(std::uint64_t epoch) override { epoch_ = epoch; }
  /// The epoch set last (0 before any).
  std::uint64_t epoch() const override { return epoch_; }
  /// Number of ranks sharing the indices.
  int num_replicas() const noexcept { return num_replicas_; }
  /// This rank among them.
  int rank() const noexcept { return rank_; }
  /// The next at most `batch_size` indices of this epoch; nullopt when it is exhausted.
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return cursor_.next(batch_size); }
  /// Writes the epoch and the position within it (resumes mid-epoch).
  void save(torch::serialize::OutputArchive& archive) const override {
    detail::save_cursor(archive, epoch_, cursor_.pos);
  }
  /// Restores what save() wrote: redraws that epoch's indices and moves to the saved position.
  void load(torch::serialize::InputArchive& archive) override {
    auto [epoch, pos] = detail::load_cursor(archive);
    epoch_ = epoch;
    reset(torch::nullopt);
    cursor_.pos = pos;
  }

 protected:
  /// Resolves and checks num_replicas / rank (see replicas_and_rank); `who` names the sampler in errors.
  ShardedEpochSampler(std::optional<int> num_replicas, std::optional<int> rank, const char* who) {
    std::tie(num_replicas_, rank_) = detail::replicas_and_rank(num_replicas, rank, who);
  }

  /// Number of ranks sharing the indices (resolved at construction).
  int num_replicas_ = 1;
  /// This rank among num_replicas_.
  int rank_ = 0;
  /// The epoch whose indices reset() draws.
  std::uint64_t epoch_ = 0;
  /// This epoch's indices for this rank and the position next() has reached in them.
  detail::IndexCursor cursor_;
};

/// torch.utils.data.DistributedSampler for LibTorch: restricts loading to this rank's share of a
/// dataset of `dataset_size` examples.
///
/// Each epoch the indices 0..size-1 are shuffled (when `shuffle`) with a generator seeded with
/// seed + epoch — the same permutation on every rank —, then padded by repeating indices from the
/// start to a multiple of num_replicas (or, with drop_last, truncated to one), and rank r takes
/// every num_replicas-th index starting at r. Every rank therefore gets size() indices:
/// ceil(dataset_size / num_replicas), or floor(...) with drop_last when not divisible.
/// Call set_epoch(e) before each epoch, or every epoch sees the same order.
class DistributedSampler : public ShardedEpochSampler {
 public:
  /// @param dataset_size number of examples in the dataset
  /// @param num_replicas number of ranks sharing the dataset (default: idist's world size)
  /// @param rank this rank among them (default: idist's rank)
  /// @param shuffle draw a permutation seeded with seed + epoch (else the natural order)
  /// @param seed base of the shuffle's seed, the same on every rank
  /// @param drop_last drop the tail that does not divide evenly instead of padding by repetition
  /// @throws ValueError for num_replicas < 1 or rank outside [0, num_replicas - 1].
  explicit DistributedSampler(std::size_t dataset_size, std::optional<int> num_replicas = std::nullopt,
                              std::optional<int> rank = std::nullopt, bool shuffle = true, std::uint64_t seed = 0,
                              bool drop_last = false)
      : ShardedEpochSampler(num_replicas, rank, "DistributedSampler"),
        dataset_size_(dataset_size),
        shuffle_(shuffle),
        seed_(seed),
        drop_last_(drop_last) {}

  /// Indices per rank and epoch (num_samples()).
  std::optional<std::size_t> size() const override { return num_samples(); }

  /// Indices per rank and epoch (torch's num_samples).
  std::size_t num_samples() const;
  /// num_samples() * num_replicas (torch's total_size).
  std::size_t total_size() const { return num_samples() * std::size_t(num_replicas_); }
  /// How many of this rank's indices are not padding: the first unpadded_size() of indices().
  /// Rank r's j-th index sits at position j * num_replicas + r of the padded list, so only its last
  /// index can be a repeat. Evaluation counting every example exactly once reads only these (without
  /// drop_last, the unpadded sizes of all ranks add up to the dataset size).
  std::size_t unpadded_size() const;
  /// Whether each epoch is a seeded permutation.
  bool shuffle() const noexcept { return shuffle_; }
  /// Base of the shuffle's seed.
  std::uint64_t seed() const noexcept { return seed_; }
  /// Whether the uneven tail is dropped.
  bool drop_last() const noexcept { return drop_last_; }

  /// This rank's indices for the current epoch, in order (what one epoch of next() yields).
  std::vector<std::size_t> indices() const;

  /// Starts an epoch: computes this rank's indices. `new_size` replaces the dataset size.
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override;

 private:
  std::size_t dataset_size_;
  bool shuffle_;
  std::uint64_t seed_;
  bool drop_last_;
};

/// torch.utils.data.WeightedRandomSampler for LibTorch: each reset() draws `num_samples` indices
/// in [0, weights.numel()) with probabilities proportional to `weights` (torch::multinomial), with
/// or without replacement, from `generator` or, by default, LibTorch's global generator (so that
/// torch::manual_seed makes it reproducible, and DistributedProxySampler can seed it).
class WeightedRandomSampler : public torch::data::samplers::Sampler<> {
 public:
  /// @throws ValueError for weights that are not a non-empty 1-D tensor of non-negative values
  ///         with a positive sum, num_samples == 0, or num_samples > weights.numel() without
  ///         replacement.
  WeightedRandomSampler(const at::Tensor& weights, std::size_t num_samples, bool replacement = true,
                        std::optional<at::Generator> generator = std::nullopt);

  /// Number of indices one epoch yields.
  std::size_t size() const noexcept { return num_samples_; }

  /// Draws the indices of a new epoch.
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override;
  /// The next at most `batch_size` indices of this epoch; nullopt when it is exhausted.
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override { return cursor_.next(batch_size); }
  /// Writes the position within the epoch.
  void save(torch::serialize::OutputArchive& archive) const override { detail::save_cursor(archive, 0, cursor_.pos); }
  /// Restores what save() wrote.
  void load(torch::serialize::InputArchive& archive) override { cursor_.pos = detail::load_cursor(archive).second; }

 private:
  at::Tensor weights_;
  std::size_t num_samples_;
  bool replacement_;
  std::optional<at::Generator> generator_;
  detail::IndexCursor cursor_;
};

/// ignite.distributed.DistributedProxySampler: shards the indices of any sampler (random, weighted,
/// user-written) across num_replicas ranks.
///
/// At each reset(): seeds LibTorch's global generator with the epoch (torch::manual_seed(epoch),
/// as ignite does), draws the wrapped sampler's indices — re-drawing it as often as needed to
/// reach ceil(len / num_replicas) * num_replicas indices, then truncating —, and gives rank r every
/// num_replicas-th index starting at r. The wrapped sampler's length is assumed constant; it is
/// measured on each draw. Call set_epoch(e) before each epoch.
class DistributedProxySampler : public ShardedEpochSampler {
 public:
  /// Wraps a shared sampler (shared with the caller). A user's own EpochSampler is accepted (it is
  /// not distributed); its set_epoch is not called: the proxy seeds the global generator instead.
  /// @throws ValueError for a null or already distributed sampler (detail::is_distributed_sampler),
  ///         num_replicas < 1, or rank outside [0, num_replicas - 1].
  DistributedProxySampler(std::shared_ptr<torch::data::samplers::Sampler<>> sampler,
                          std::optional<int> num_replicas = std::nullopt, std::optional<int> rank = std::nullopt);

  /// Wraps a copy of `sampler` (any torch::data::samplers::Sampler<> subclass that is not distributed).
  template <class S>
  requires(
      std::derived_from<S, torch::data::samplers::Sampler<>> && !std::derived_from<S, DistributedSampler> &&
      !std::derived_from<S, DistributedProxySampler>) explicit DistributedProxySampler(S sampler,
                                                                                       std::optional<int> num_replicas =
                                                                                           std::nullopt,
                                                                                       std::optional<int> rank =
                                                                                           std::nullopt)
      : DistributedProxySampler(std::make_shared<S>(std::move(sampler)), num_replicas, rank) {}

  /// Indices per rank and epoch (ignite's num_samples), once the wrapped sampler's length is known
  /// (from a WeightedRandomSampler at construction, else after the first reset()).
  std::optional<std::size_t> size() const override { return num_samples_; }
  /// The wrapped sampler.
  const std::shared_ptr<torch::data::samplers::Sampler<>>& sampler() const noexcept { return sampler_; }

  /// Draws this rank's indices for the current epoch (seeds the global generator with it).
  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override;

 private:
  void set_length(std::size_t len);

  std::shared_ptr<torch::data::samplers::Sampler<>> sampler_;
  std::optional<std::size_t> num_samples_;
};

}  // namespace idist
