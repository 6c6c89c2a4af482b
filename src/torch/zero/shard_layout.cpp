// The flat buffer of ZeroRedundancyOptimizer's parameters (see shard_layout.hpp).
#include "torch/zero/shard_layout.hpp"

#include <algorithm>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

namespace idist::detail {

ShardLayout::ShardLayout(std::vector<at::Tensor> params, std::vector<int> owners, int rank, int ranks, bool views)
    : params_(std::move(params)),
      owners_(std::move(owners)),
      rank_(rank),
      ranks_(ranks),
      views_(views),
      in_flat_(params_.size(), false) {
  build();
}

bool ShardLayout::trainability_changed() const {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (params_[i].requires_grad() != trainable_[i]) return true;
  return false;
}

void ShardLayout::rebuild() { build(); }

void ShardLayout::build() {
  at::NoGradGuard no_grad;
  const std::size_t n = params_.size();
  trainable_.assign(n, false);
  for (std::size_t i = 0; i < n; ++i) trainable_[i] = params_[i].requires_grad();

  counts_.assign(std::size_t(ranks_), 0);
  for (std::size_t i = 0; i < n; ++i)
    if (trainable_[i]) counts_[std::size_t(owners_[i])] += std::size_t(params_[i].numel());
  total_ = 0;
  for (std::size_t c : counts_) total_ += c;
  equal_ = std::all_of(counts_.begin(), counts_.end(), [&](std::size_t c) { return c == counts_.front(); });

  // A parameter leaving the layout must not keep pointing into the buffer about to be replaced.
  for (std::size_t i = 0; i < n; ++i)
    if (in_flat_[i] && !trainable_[i]) {
      params_[i].set_data(params_[i].detach().clone());
      in_flat_[i] = false;
    }

  const at::TensorOptions opts = params_.front().options().requires_grad(false);
  flat_ = at::empty({std::int64_t(total_)}, opts);
  send_ = at::empty({std::int64_t(counts_[std::size_t(rank_)])}, opts);
  own_.clear();
  others_.clear();
  std::int64_t own_offset = 0;
  for (int r = 0; r < rank_; ++r) own_offset += std::int64_t(counts_[std::size_t(r)]);
  own_slice_ = flat_.narrow(0, own_offset, send_.numel());
  std::int64_t offset = 0;
  std::int64_t send_offset = 0;
  for (int r = 0; r < ranks_; ++r) {
    for (std::size_t i = 0; i < n; ++i) {
      if (!trainable_[i] || owners_[i] != r) continue;
      at::Tensor& p = params_[i];
      const std::int64_t numel = p.numel();
      at::Tensor slot = flat_.narrow(0, offset, numel).view(p.sizes());
      offset += numel;
      if (views_) {
        slot.copy_(p);
        p.set_data(slot);
        in_flat_[i] = true;
      } else if (r == rank_) {
        own_.emplace_back(p, send_.narrow(0, send_offset, numel).view(p.sizes()));
        send_offset += numel;
      } else {
        others_.emplace_back(p, slot);
      }
    }
  }
}

void ShardLayout::pack() {
  at::NoGradGuard no_grad;
  if (views_) {
    if (send_.numel() > 0) send_.copy_(own_slice_);
    return;
  }
  for (auto& [p, slot] : own_) slot.copy_(p);
}

void ShardLayout::unpack() {
  at::NoGradGuard no_grad;
  for (auto& [p, slot] : others_) p.copy_(slot);  // no autograd record: NoGradGuard
}

}  // namespace idist::detail
