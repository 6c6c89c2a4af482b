// The Reducer's join support (idist::join): the per-backward tick and the shadow backward of a
// rank that has joined.
#include <cstdint>
#include <utility>

#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/broadcast_coalesced.hpp"
#include "torch/reducer_impl.hpp"

namespace idist::detail {

void ReducerImpl::apply_join_tick() {
  const JoinTick tick = join_tick_();
  world_size_tensor_.fill_(tick.divisor);
  buffer_src_ = tick.buffer_src;
}

void ReducerImpl::set_join_tick(std::function<JoinTick()> tick) {
  std::lock_guard lock(mutex_);
  join_tick_ = std::move(tick);
  if (!join_tick_) {
    world_size_tensor_.fill_(double(world_size_));
    buffer_src_ = 0;
  }
}

void ReducerImpl::shadow_backward(int buffer_src) {
  std::lock_guard lock(mutex_);
  if (in_backward_) throw ValueError("Reducer::shadow_backward: called during a backward");
  // Zero-filled buckets (and their GradBuckets) stand in for the real ones.
  std::vector<at::Tensor> kept;
  std::vector<std::unique_ptr<GradBucket>> kept_grad;
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    kept.push_back(b.flat);
    kept_grad.push_back(std::move(b.grad));
    b.flat = at::zeros_like(b.flat);
    b.grad = grad_bucket(k, b.flat);
    b.pending = 0;
    b.launched = false;
    b.work = Work{};
  }
  next_bucket_ = 0;
  launch_positions_.assign(buckets_.size(), params_.size());
  auto restore = [&] {
    for (std::size_t k = 0; k < buckets_.size(); ++k) {
      buckets_[k].flat = kept[k];
      buckets_[k].grad = std::move(kept_grad[k]);
      buckets_[k].launched = false;
      buckets_[k].work = Work{};
    }
  };
  const bool search_unused = opts_.find_unused_parameters || (opts_.static_graph && sync_count_ == 0);
  try {
    launch_ready_buckets();
    at::Tensor used = at::zeros({std::int64_t(params_.size())}, at::kInt);
    Work used_work;
    if (search_unused) used_work = all_reduce_async(used, ReduceOp::Sum);
    for (std::size_t k = 0; k < buckets_.size(); ++k) wait_bucket(buckets_[k], k);
    used_work.wait();
    if (opts_.broadcast_buffers && world_size_ > 1) broadcast_coalesced(buffers_, buffer_src);
  } catch (...) {
    drain_quietly();
    restore();
    throw;
  }
  restore();
  // Like the active ranks' first backward: adopt rank 0's ready order (this rank reports none).
  if (opts_.rebuild_buckets && !rebuilt_) rebuild_in_ready_order();
  ++sync_count_;  // the active ranks count this backward too (static_graph's first-iteration test)
  autotune_step(/*timed=*/false);
}

}  // namespace idist::detail
