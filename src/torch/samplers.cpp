// The non-template parts of the samplers (include/idist/torch/samplers.hpp).
#include "idist/torch/samplers.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <torch/data/samplers/distributed.h>
#include <torch/utils.h>

#include "idist/context.hpp"

namespace idist {
namespace detail {

torch::optional<std::vector<std::size_t>> IndexCursor::next(std::size_t batch_size) {
  if (pos >= indices.size() || batch_size == 0) return torch::nullopt;
  const std::size_t n = std::min(batch_size, indices.size() - pos);
  std::vector<std::size_t> out(indices.begin() + std::ptrdiff_t(pos), indices.begin() + std::ptrdiff_t(pos + n));
  pos += n;
  return out;
}

std::pair<int, int> replicas_and_rank(std::optional<int> num_replicas, std::optional<int> rank, const char* who) {
  const int n = num_replicas.value_or(get_world_size());
  const int r = rank.value_or(get_rank());
  if (n < 1) throw ValueError(fmt::format("{}: num_replicas should be a positive integer, but given {}", who, n));
  if (r < 0 || r >= n)
    throw ValueError(fmt::format("{}: Invalid rank {}, rank should be in the interval [0, {}]", who, r, n - 1));
  return {n, r};
}

std::vector<std::size_t> draw_all(torch::data::samplers::Sampler<>& sampler) {
  std::vector<std::size_t> out;
  sampler.reset(torch::nullopt);
  while (auto batch = sampler.next(4096)) out.insert(out.end(), batch->begin(), batch->end());
  return out;
}

void save_cursor(torch::serialize::OutputArchive& archive, std::uint64_t epoch, std::size_t pos) {
  archive.write("idist_epoch", c10::IValue(std::int64_t(epoch)));
  archive.write("idist_position", c10::IValue(std::int64_t(pos)));
}

std::pair<std::uint64_t, std::size_t> load_cursor(torch::serialize::InputArchive& archive) {
  c10::IValue epoch, pos;
  archive.read("idist_epoch", epoch);
  archive.read("idist_position", pos);
  return {std::uint64_t(epoch.toInt()), std::size_t(pos.toInt())};
}

bool is_distributed_sampler(const torch::data::samplers::Sampler<>* s) {
  return dynamic_cast<const DistributedSampler*>(s) || dynamic_cast<const DistributedProxySampler*>(s) ||
         dynamic_cast<const torch::data::samplers::DistributedSampler<>*>(s);
}

}  // namespace detail

std::size_t DistributedSampler::num_samples() const {
  const std::size_t n = std::size_t(num_replicas_);
  if (drop_last_ && dataset_size_ % n != 0) return dataset_size_ / n;  // == ceil((size - n) / n)
  return (dataset_size_ + n - 1) / n;
}

std::size_t DistributedSampler::unpadded_size() const {
  const std::size_t n = std::min(dataset_size_, total_size()), r = std::size_t(rank_);
  return n > r ? (n - r + std::size_t(num_replicas_) - 1) / std::size_t(num_replicas_) : 0;
}

std::vector<std::size_t> DistributedSampler::indices() const {
  std::vector<std::size_t> all(dataset_size_);
  if (shuffle_) {
    at::Generator gen = at::detail::createCPUGenerator(seed_ + epoch_);
    const at::Tensor perm = at::randperm(std::int64_t(dataset_size_), gen, at::kLong);
    const std::int64_t* p = perm.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < dataset_size_; ++i) all[i] = std::size_t(p[i]);
  } else {
    for (std::size_t i = 0; i < dataset_size_; ++i) all[i] = i;
  }
  const std::size_t total = total_size();
  if (all.size() < total && !all.empty()) {
    const std::size_t n = all.size();
    for (std::size_t i = 0; all.size() < total; ++i) all.push_back(all[i % n]);  // pad by repetition
  }
  all.resize(std::min(all.size(), total));
  std::vector<std::size_t> mine;
  mine.reserve(num_samples());
  for (std::size_t i = std::size_t(rank_); i < all.size(); i += std::size_t(num_replicas_)) mine.push_back(all[i]);
  return mine;
}

void DistributedSampler::reset(torch::optional<std::size_t> new_size) {
  if (new_size) dataset_size_ = *new_size;
  cursor_ = {indices(), 0};
}

WeightedRandomSampler::WeightedRandomSampler(const at::Tensor& weights, std::size_t num_samples, bool replacement,
                                             std::optional<at::Generator> generator)
    : num_samples_(num_samples), replacement_(replacement), generator_(std::move(generator)) {
  if (!weights.defined() || weights.dim() != 1 || weights.numel() == 0)
    throw ValueError("WeightedRandomSampler: weights should be a non-empty 1-D tensor");
  weights_ = weights.detach().to(at::kCPU, at::kDouble).contiguous();
  if ((weights_ < 0).any().item<bool>() || !(weights_.sum().item<double>() > 0))
    throw ValueError("WeightedRandomSampler: weights should be non-negative with a positive sum");
  if (num_samples == 0)
    throw ValueError("WeightedRandomSampler: num_samples should be a positive integer value, but got num_samples=0");
  if (!replacement && num_samples > std::size_t(weights_.numel()))
    throw ValueError(
        fmt::format("WeightedRandomSampler: num_samples={} exceeds the {} weights, which is only possible with "
                    "replacement",
                    num_samples, weights_.numel()));
}

void WeightedRandomSampler::reset(torch::optional<std::size_t> /*new_size*/) {
  const at::Tensor drawn = at::multinomial(weights_, std::int64_t(num_samples_), replacement_,
                                           generator_ ? c10::optional<at::Generator>(*generator_) : c10::nullopt);
  const std::int64_t* p = drawn.data_ptr<std::int64_t>();
  cursor_ = {std::vector<std::size_t>(p, p + drawn.numel()), 0};
}

DistributedProxySampler::DistributedProxySampler(std::shared_ptr<torch::data::samplers::Sampler<>> sampler,
                                                 std::optional<int> num_replicas, std::optional<int> rank)
    : ShardedEpochSampler(num_replicas, rank, "DistributedProxySampler"), sampler_(std::move(sampler)) {
  if (!sampler_) throw ValueError("DistributedProxySampler: Argument sampler should be a sampler, but given null");
  if (detail::is_distributed_sampler(sampler_.get()))
    throw ValueError("DistributedProxySampler: Argument sampler must not be a distributed sampler already");
  if (auto* w = dynamic_cast<WeightedRandomSampler*>(sampler_.get())) set_length(w->size());
}

void DistributedProxySampler::reset(torch::optional<std::size_t> /*new_size*/) {
  torch::manual_seed(epoch_);
  std::vector<std::size_t> all = detail::draw_all(*sampler_);
  set_length(all.size());
  const std::size_t total = *num_samples_ * std::size_t(num_replicas_);
  while (!all.empty() && all.size() < total) {
    std::vector<std::size_t> more = detail::draw_all(*sampler_);
    if (more.empty()) break;
    all.insert(all.end(), more.begin(), more.end());
  }
  all.resize(std::min(all.size(), total));
  std::vector<std::size_t> mine;
  for (std::size_t i = std::size_t(rank_); i < all.size(); i += std::size_t(num_replicas_)) mine.push_back(all[i]);
  cursor_ = {std::move(mine), 0};
}

void DistributedProxySampler::set_length(std::size_t len) {
  const std::size_t n = std::size_t(num_replicas_);
  num_samples_ = (len + n - 1) / n;
}

}  // namespace idist
