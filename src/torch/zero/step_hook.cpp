// ZeroRedundancyOptimizer's step inside the backward (see step_hook.hpp).
//
// Per bucket, once the wrapped hook's reduction completed: the local optimizer steps this rank's
// parameters of the bucket (every other parameter's gradient hidden, so elementwise optimizers skip
// them), and one all-gather sends them to the other members while later buckets are still reduced.
// The collectives are issued at points every rank reaches in the same order (a bucket's launch, or
// the last bucket's completion), never at the moment a reduction happens to finish, so every rank
// issues the same sequence. The last bucket's Work completes once every gather has and every
// parameter is updated: the backward ends with the step done.
#include "torch/zero/step_hook.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "idist/error.hpp"
#include "torch/comm/comm.hpp"
#include "torch/hook_result.hpp"
#include "torch/layout_free_hook.hpp"

namespace idist::detail {

namespace {

// Where one parameter of the bucket sits in the gathered buffer.
struct Slot {
  std::size_t param = 0;  // index into the bucket's parameters
  std::int64_t at = 0;    // element offset in `gathered`
};

// How one bucket is stepped and gathered; rebuilt when the bucket's parameters change (the bucket
// autotune and the rebuild in gradient-ready order regroup them during the first iterations).
struct BucketPlan {
  BucketOwners owners;
  std::vector<at::Tensor> params;  // the bucket's parameters
  std::vector<std::size_t> mine;   // indices of the parameters this rank owns
  std::vector<Slot> others;        // the other members' parameters in `gathered`
  at::Tensor gathered;             // every member's block, group rank order
  at::Tensor send;                 // this rank's block, packed from its parameters
  bool equal = false;              // all counts equal: one all_gather instead of all_gather_v
};

// A bucket launched in this backward and not stepped yet.
struct Launched {
  GradBucket bucket;
  Work reduction;
  bool stepped = false;
};

class ZeroStepHook : public std::enable_shared_from_this<ZeroStepHook> {
 public:
  ZeroStepHook(CommHook inner, std::shared_ptr<ZeroStepTarget> target, bool interleaved)
      : inner_(std::move(inner)), target_(std::move(target)), interleaved_(interleaved) {}
  // The gathers write into this hook's buffers: none may be in flight once it is gone.
  ~ZeroStepHook() { drain(); }
  ZeroStepHook(const ZeroStepHook&) = delete;
  ZeroStepHook& operator=(const ZeroStepHook&) = delete;

  Work operator()(GradBucket& bucket) {
    if (bucket.index() == 0) drain();  // a new backward; a failed one may have left work behind
    if (!target_->local)
      throw ValueError(
          "hook_with_zero_step: the ZeroRedundancyOptimizer this hook steps was destroyed; register a hook made "
          "from the optimizer in use");
    (void)plan_for(bucket);  // a parameter the optimizer lacks is refused before any collective
    Work reduction = inner_(bucket);
    launched_.push_back({bucket, reduction});
    // Interleaved: the previous bucket now. Otherwise every earlier bucket once the last is launched
    // (the backward's computation is over). The last bucket itself is stepped when it completes.
    if (interleaved_ || bucket.is_last())
      for (std::size_t k = 0; k + 1 < launched_.size(); ++k)
        if (!launched_[k].stepped) step_and_gather(launched_[k]);
    Work done = Work::after(reduction);
    if (bucket.is_last()) done.then([self = shared_from_this()] { self->finish(); });
    return done;
  }

 private:
  // Waits the bucket's reduction, steps this rank's parameters in it and starts their all-gather.
  void step_and_gather(Launched& l) {
    take_hook_result(l.reduction, l.bucket.buffer(), l.bucket.index(), "hook_with_zero_step");
    at::NoGradGuard no_grad;
    BucketPlan& plan = plan_for(l.bucket);
    step_mine(plan, l.bucket);
    l.stepped = true;
    l.reduction = Work();
    if (plan.gathered.numel() == 0) return;  // the same on every rank: the plan depends on the bucket alone
    std::int64_t at = 0;
    for (std::size_t i : plan.mine) {
      const std::int64_t n = plan.params[i].numel();
      plan.send.narrow(0, at, n).copy_(plan.params[i].reshape({-1}));
      at += n;
    }
    gathers_.push_back(
        {target_->comm.all_gather_async(plan.send, plan.gathered, plan.owners.counts, plan.equal), &plan});
  }

  // The local optimizer's step over this rank's parameters of one bucket: the other parameters'
  // gradients are hidden meanwhile, and restored after.
  void step_mine(const BucketPlan& plan, const GradBucket& bucket) {
    if (plan.mine.empty()) return;
    torch::optim::Optimizer& local = *target_->local;
    std::vector<std::pair<at::Tensor, at::Tensor>> kept;  // parameter, its gradient before
    for (auto& group : local.param_groups())
      for (at::Tensor& p : group.params()) {
        kept.emplace_back(p, p.grad());
        p.mutable_grad() = at::Tensor();
      }
    const auto& offsets = bucket.offsets();
    for (std::size_t i : plan.mine) {
      at::Tensor p = plan.params[i];
      p.mutable_grad() = bucket.buffer().narrow(0, offsets[i], p.numel()).view(p.sizes());
    }
    auto& groups = local.param_groups();
    if (groups.size() == 1 && target_->options) groups.front().set_options(target_->options->clone());
    try {
      local.step();
    } catch (...) {
      for (auto& [p, g] : kept) p.mutable_grad() = g;
      throw;
    }
    for (auto& [p, g] : kept) p.mutable_grad() = g;
  }

  // After the last bucket: steps what is left, then every other member's parameters arrive.
  void finish() {
    for (Launched& l : launched_)
      if (!l.stepped) step_and_gather(l);
    for (Gather& g : gathers_) {
      g.work.wait();
      const BucketPlan& plan = *g.plan;
      at::NoGradGuard no_grad;
      for (const Slot& s : plan.others) {
        const at::Tensor& p = plan.params[s.param];
        p.copy_(plan.gathered.narrow(0, s.at, p.numel()).view(p.sizes()));
      }
    }
    launched_.clear();
    gathers_.clear();
    ++target_->stepped_backwards;
  }

  // Waits for whatever a failed backward left in flight, ignoring its errors (the backward raised them).
  void drain() noexcept {
    for (Launched& l : launched_) try {
        l.reduction.wait();
      } catch (...) {
      }
    for (Gather& g : gathers_) try {
        g.work.wait();
      } catch (...) {
      }
    launched_.clear();
    gathers_.clear();
  }

  BucketPlan& plan_for(const GradBucket& bucket) {
    BucketPlan& plan = plans_[bucket.index()];
    const bool same = plan.gathered.defined() && plan.gathered.scalar_type() == bucket.buffer().scalar_type() &&
                      plan.owners.same_parameters(bucket);
    if (!same) plan = make_plan(bucket);
    return plan;
  }

  BucketPlan make_plan(const GradBucket& bucket) const {
    const int rank = target_->comm.rank();
    BucketPlan plan;
    plan.owners = bucket_owners(bucket, *target_->owners, target_->comm.size(), "hook_with_zero_step");
    plan.params = bucket.parameters();
    const std::int64_t gathered = plan.owners.for_each_by_owner(bucket, [&](std::size_t i, int r, std::int64_t at) {
      if (r == rank)
        plan.mine.push_back(i);
      else
        plan.others.push_back({i, at});
    });
    const auto& counts = plan.owners.counts;
    plan.equal = std::all_of(counts.begin(), counts.end(), [&](std::size_t c) { return c == counts.front(); });
    const auto options = bucket.buffer().options().device(comm::device());
    plan.gathered = at::empty({gathered}, options);
    plan.send = at::empty({std::int64_t(counts[std::size_t(rank)])}, options);
    return plan;
  }

  struct Gather {
    Work work;
    const BucketPlan* plan;  // its buffers stay alive until the gather completed (finish() waits)
  };

  CommHook inner_;
  std::shared_ptr<ZeroStepTarget> target_;
  bool interleaved_;
  std::vector<Launched> launched_;
  std::vector<Gather> gathers_;
  std::unordered_map<std::size_t, BucketPlan> plans_;
};

}  // namespace

CommHook make_zero_step_hook(CommHook inner, std::shared_ptr<ZeroStepTarget> target, bool interleaved) {
  // Its own per-bucket plans follow any regrouping, so it lets the bucket cap be tuned when the
  // wrapped hook does.
  const bool layout_free = is_layout_free(inner);
  auto hook = std::make_shared<ZeroStepHook>(std::move(inner), std::move(target), interleaved);
  auto run = [hook](GradBucket& bucket) { return (*hook)(bucket); };
  if (layout_free) return LayoutFreeHook{run};
  return run;
}

}  // namespace idist::detail
