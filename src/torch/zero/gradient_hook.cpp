// ZeRO stage 2's gradient hook (see gradient_hook.hpp). Per bucket: the gradients are copied into a
// staging buffer grouped by owner (group rank order) and divided by the group size, one
// reduce_scatter_v gives this rank the sum of its block, and a continuation writes that block back
// over this rank's parameters in the bucket. The other parameters' gradients stay as this rank
// computed them: no rank steps them here.
#include "torch/zero/gradient_hook.hpp"

#include <memory>
#include <unordered_map>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include "idist/error.hpp"
#include "torch/comm/comm.hpp"
#include "torch/comm/staging.hpp"
#include "torch/zero/shard_comm.hpp"

namespace idist::detail {

namespace {

// One contiguous copy of `count` elements from offset `from` to offset `to`.
struct Move {
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::int64_t count = 0;
};

// How one bucket is regrouped, made on the bucket's first backward and whenever its parameters change
// (the bucket autotune rebuilds buckets during the first iterations).
struct BucketPlan {
  std::vector<const void*> params;  // TensorImpl of each parameter, bucket order
  std::vector<std::size_t> counts;  // elements of each group rank's block
  std::vector<Move> to_staged;      // bucket -> staging buffer (grouped by owner)
  std::vector<Move> to_bucket;      // this rank's block -> bucket
  at::Tensor staged, mine;          // reused while the plan holds
};

class ReduceScatterHook {
 public:
  ReduceScatterHook(const std::vector<at::Tensor>& params, const std::vector<int>& owners, const Group& group)
      : comm_(group), rank_(comm_.rank()), size_(comm_.size()) {
    for (std::size_t i = 0; i < params.size(); ++i) owner_.emplace(params[i].unsafeGetTensorImpl(), owners[i]);
  }

  Work operator()(GradBucket& bucket) {
    BucketPlan& plan = plan_for(bucket, comm::device());
    at::NoGradGuard no_grad;
    const at::Tensor& grads = bucket.buffer();
    for (const Move& mv : plan.to_staged)
      plan.staged.narrow(0, mv.to, mv.count).copy_(grads.narrow(0, mv.from, mv.count));
    plan.staged.div_(size_);
    Work w = comm_.reduce_scatter_v(plan.staged, plan.mine, plan.counts);
    w.then([grads, mine = plan.mine, moves = plan.to_bucket, staged = plan.staged] {
      at::NoGradGuard guard;
      for (const Move& mv : moves) grads.narrow(0, mv.to, mv.count).copy_(mine.narrow(0, mv.from, mv.count));
    });
    return w;
  }

 private:
  BucketPlan& plan_for(const GradBucket& bucket, c10::Device dev) {
    BucketPlan& plan = plans_[bucket.index()];
    const auto& params = bucket.parameters();
    bool same = plan.params.size() == params.size() && plan.staged.defined() &&
                plan.staged.numel() == bucket.buffer().numel() &&
                plan.staged.scalar_type() == bucket.buffer().scalar_type();
    for (std::size_t i = 0; same && i < params.size(); ++i) same = plan.params[i] == params[i].unsafeGetTensorImpl();
    if (!same) plan = make_plan(bucket, dev);
    return plan;
  }

  BucketPlan make_plan(const GradBucket& bucket, c10::Device dev) const {
    const auto& params = bucket.parameters();
    const auto& offsets = bucket.offsets();
    BucketPlan plan;
    plan.counts.assign(std::size_t(size_), 0);
    std::vector<int> owner_of(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      const auto it = owner_.find(params[i].unsafeGetTensorImpl());
      if (it == owner_.end())
        throw ValueError(fmt::format(
            "ZeroRedundancyOptimizer::reduce_scatter_hook: bucket {} holds a parameter of shape {} that the optimizer "
            "was not given; expected the optimizer to hold every parameter of the model that requires a gradient",
            bucket.index(), shape_str(params[i].sizes())));
      owner_of[i] = it->second;
      plan.params.push_back(params[i].unsafeGetTensorImpl());
      plan.counts[std::size_t(it->second)] += std::size_t(params[i].numel());
    }
    std::int64_t staged_at = 0, mine_at = 0;
    for (int r = 0; r < size_; ++r)
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (owner_of[i] != r) continue;
        const std::int64_t n = params[i].numel();
        plan.to_staged.push_back({offsets[i], staged_at, n});
        if (r == rank_) plan.to_bucket.push_back({mine_at, offsets[i], n});
        staged_at += n;
        if (r == rank_) mine_at += n;
      }
    const auto options = bucket.buffer().options().device(dev);
    plan.staged = at::empty({staged_at}, options);
    plan.mine = at::empty({mine_at}, options);
    return plan;
  }

  ShardComm comm_;
  int rank_;
  int size_;
  std::unordered_map<const void*, int> owner_;
  std::unordered_map<std::size_t, BucketPlan> plans_;
};

}  // namespace

CommHook make_reduce_scatter_hook(const std::vector<at::Tensor>& params, const std::vector<int>& owners,
                                  const Group& group) {
  auto hook = std::make_shared<ReduceScatterHook>(params, owners, group);
  return [hook](GradBucket& bucket) { return (*hook)(bucket); };
}

}  // namespace idist::detail
