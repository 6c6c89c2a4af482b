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

#include "torch/comm/comm.hpp"
#include "torch/zero/bucket_owners.hpp"
#include "torch/zero/shard_comm.hpp"

namespace idist::detail {

namespace {

// One contiguous copy of `count` elements from offset `from` to offset `to`.
struct Move {
  std::int64_t from = 0;
  std::int64_t to = 0;
  std::int64_t count = 0;
};

// How one bucket is regrouped, made on the bucket's first backward and whenever its parameters change.
struct BucketPlan {
  BucketOwners owners;
  std::vector<Move> to_staged;  // bucket -> staging buffer (grouped by owner)
  std::vector<Move> to_bucket;  // this rank's block -> bucket
  at::Tensor staged, mine;      // reused while the plan holds
};

class ReduceScatterHook {
 public:
  ReduceScatterHook(std::shared_ptr<const OwnerMap> owners, const Group& group)
      : comm_(group), owners_(std::move(owners)) {}

  Work operator()(GradBucket& bucket) {
    BucketPlan& plan = plan_for(bucket, comm::device());
    at::NoGradGuard no_grad;
    const at::Tensor& grads = bucket.buffer();
    for (const Move& mv : plan.to_staged)
      plan.staged.narrow(0, mv.to, mv.count).copy_(grads.narrow(0, mv.from, mv.count));
    plan.staged.div_(comm_.size());
    Work w = comm_.reduce_scatter_v(plan.staged, plan.mine, plan.owners.counts);
    w.then([grads, mine = plan.mine, moves = plan.to_bucket, staged = plan.staged] {
      at::NoGradGuard guard;
      for (const Move& mv : moves) grads.narrow(0, mv.to, mv.count).copy_(mine.narrow(0, mv.from, mv.count));
    });
    return w;
  }

 private:
  BucketPlan& plan_for(const GradBucket& bucket, c10::Device dev) {
    BucketPlan& plan = plans_[bucket.index()];
    const bool same = plan.staged.defined() && plan.staged.numel() == bucket.buffer().numel() &&
                      plan.staged.scalar_type() == bucket.buffer().scalar_type() && plan.owners.same_parameters(bucket);
    if (!same) plan = make_plan(bucket, dev);
    return plan;
  }

  BucketPlan make_plan(const GradBucket& bucket, c10::Device dev) const {
    BucketPlan plan;
    plan.owners = bucket_owners(bucket, *owners_, comm_.size(), "ZeroRedundancyOptimizer::reduce_scatter_hook");
    const auto& params = bucket.parameters();
    const auto& offsets = bucket.offsets();
    std::int64_t mine_at = 0;
    const std::int64_t staged = plan.owners.for_each_by_owner(bucket, [&](std::size_t i, int r, std::int64_t at) {
      const std::int64_t n = params[i].numel();
      plan.to_staged.push_back({offsets[i], at, n});
      if (r != comm_.rank()) return;
      plan.to_bucket.push_back({mine_at, offsets[i], n});
      mine_at += n;
    });
    const auto options = bucket.buffer().options().device(dev);
    plan.staged = at::empty({staged}, options);
    plan.mine = at::empty({mine_at}, options);
    return plan;
  }

  ShardComm comm_;
  std::shared_ptr<const OwnerMap> owners_;
  std::unordered_map<std::size_t, BucketPlan> plans_;
};

}  // namespace

CommHook make_reduce_scatter_hook(std::shared_ptr<const OwnerMap> owners, const Group& group) {
  auto hook = std::make_shared<ReduceScatterHook>(std::move(owners), group);
  return [hook](GradBucket& bucket) { return (*hook)(bucket); };
}

}  // namespace idist::detail
