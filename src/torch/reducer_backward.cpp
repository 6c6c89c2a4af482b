// The Reducer's backward: the post hooks on the gradient accumulators, the bucket launches and the
// autograd final callback that completes the synchronisation before backward() returns.
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/allreduce_hook.hpp"
#include "torch/broadcast_coalesced.hpp"
#include "torch/hook_result.hpp"
#include "torch/reducer_impl.hpp"

namespace idist::detail {

namespace {

/// Calls ReducerImpl::on_grad_ready once AccumulateGrad has updated the parameter's .grad().
class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  ReadyHook(std::weak_ptr<ReducerImpl> r, std::size_t index) : reducer_(std::move(r)), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    if (auto r = reducer_.lock()) r->on_grad_ready(index_);
    return outputs;
  }

 private:
  std::weak_ptr<ReducerImpl> reducer_;
  std::size_t index_;
};

}  // namespace

ReducerImpl::~ReducerImpl() {
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (accumulators_[i]) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void ReducerImpl::install_hooks() {
  accumulators_.resize(params_.size());
  hook_keys_.resize(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    // Holding the accumulator keeps the same AccumulateGrad node (and our hook) for every graph.
    accumulators_[i] = torch::autograd::impl::grad_accumulator(params_[i]);
    hook_keys_[i] = accumulators_[i]->add_post_hook(std::make_unique<ReadyHook>(weak_from_this(), i));
  }
}

void ReducerImpl::prepare_backward() {
  std::fill(ready_.begin(), ready_.end(), false);
  std::fill(used_.begin(), used_.end(), 0);
  for (auto& b : buckets_) {
    b.pending = b.params.size();
    b.launched = false;
    b.work = Work{};
  }
  next_bucket_ = 0;
  ready_count_ = 0;
  launch_positions_.assign(buckets_.size(), params_.size());
  in_backward_ = true;
  backward_start_ = std::chrono::steady_clock::now();
  // static_graph: the parameters found unused in the first backward are ready at once (a zero
  // contribution), so their buckets launch as soon as the used gradients are in.
  at::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (static_unused_[i]) {
      ready_[i] = true;
      views_[i].zero_();
      --buckets_[slots_[i].bucket].pending;
    }
  launch_ready_buckets();  // buckets of unused parameters only leave now
  torch::autograd::Engine::get_default_engine().queue_callback([weak = weak_from_this()] {
    if (auto r = weak.lock()) r->finalize_backward();
  });
}

void ReducerImpl::on_grad_ready(std::size_t i) {
  std::lock_guard lock(mutex_);
  if (in_backward_ && ready_[i]) {
    // A parameter is reported once per backward: this is a new backward and the previous one
    // ended without its final callback (it failed). Drop what it left in flight.
    drain_quietly();
    in_backward_ = false;
  }
  if (!in_backward_) {
    if (!require_sync_) return;  // no_sync(): gradients accumulate locally
    if (join_tick_) apply_join_tick();
    prepare_backward();
  }
  try {
    if (static_unused_[i])
      throw ValueError(
          fmt::format("auto_model: static_graph=true, but parameter '{}' received a gradient after the "
                      "first iteration found it unused; the set of used parameters must not change (pass "
                      "static_graph=false)",
                      names_[i]));
    if (opts_.rebuild_buckets && !rebuilt_) ready_order_.push_back(i);
    ready_[i] = true;
    used_[i] = 1;
    ++ready_count_;
    const at::Tensor& grad = params_[i].grad();
    at::Tensor& view = views_[i];
    {
      at::NoGradGuard no_grad;
      if (!grad.defined()) {
        view.zero_();
      } else if (grad.is_sparse()) {
        throw ValueError(fmt::format(
            "auto_model: parameter '{}' has a sparse gradient; idist averages dense gradients only", names_[i]));
      } else if (!allreduce_hook_) {
        if (!is_slot_alias(i)) view.copy_(grad);  // undivided: the hook averages
      } else if (is_slot_alias(i)) {
        view.div_(world_size_tensor_);  // autograd accumulated into the slot: average in place
      } else {
        at::div_out(view, grad, world_size_tensor_);  // copy and average in one pass
      }
    }
    Bucket& b = buckets_[slots_[i].bucket];
    if (--b.pending == 0) launch_ready_buckets();
    // Drive progress of what is in flight (some backends progress only when polled).
    for (std::size_t k = 0; k < next_bucket_; ++k) buckets_[k].work.is_completed();
  } catch (...) {
    // The backward fails with this error; leave nothing half-done for the next one.
    drain_quietly();
    in_backward_ = false;
    throw;
  }
}

void ReducerImpl::launch_ready_buckets() {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
    std::size_t in_flight = 1;
    for (std::size_t k = 0; k < next_bucket_; ++k) in_flight += buckets_[k].work.is_completed() ? 0 : 1;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight);
    const std::size_t index = next_bucket_++;
    Bucket& b = buckets_[index];
    launch_positions_[index] = ready_count_;
    b.work = allreduce_hook_ ? AllreduceHook::launch(b.grad->buffer(), bucket_completion_) : comm_hook_(*b.grad);
    b.launched = true;
  }
}

void ReducerImpl::wait_bucket(Bucket& b, std::size_t index) {
  take_hook_result(b.work, b.flat, index, "register_comm_hook");
}

void ReducerImpl::drain_quietly() noexcept {
  for (auto& b : buckets_) {
    if (!b.launched) continue;
    try {
      b.work.wait();
    } catch (...) {
    }
    b.launched = false;
  }
}

void ReducerImpl::finalize_backward() {
  std::lock_guard lock(mutex_);
  if (!in_backward_) return;
  const std::size_t launched_by_hooks = next_bucket_;
  std::vector<std::size_t> missing;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (!ready_[i]) missing.push_back(i);
  const bool search_unused = opts_.find_unused_parameters || (opts_.static_graph && sync_count_ == 0);
  if (!missing.empty() && !search_unused) {
    drain_quietly();
    in_backward_ = false;
    std::vector<std::string_view> names;
    for (std::size_t i : missing) names.push_back(names_[i]);
    throw ValueError(
        fmt::format("auto_model: on rank {}, {} parameter(s) received no gradient in this backward: {}. "
                    "Make every parameter contribute to the loss, or pass "
                    "AutoModelOptions{{.find_unused_parameters = true}} when parts of the model are "
                    "legitimately unused in some iterations{}",
                    get_rank(), missing.size(), fmt::join(names, ", "),
                    opts_.static_graph ? " (static_graph: the used set must not change after the first "
                                         "iteration)."
                                       : "."));
  }
  try {
    // Gradients of missing parameters that live in their slot, set aside while the slot carries
    // this rank's zero contribution; restored should no rank have used the parameter.
    std::vector<std::pair<std::size_t, at::Tensor>> kept;
    {
      at::NoGradGuard no_grad;
      for (std::size_t i : missing) {
        if (is_slot_alias(i)) kept.emplace_back(i, views_[i].clone());
        views_[i].zero_();
        --buckets_[slots_[i].bucket].pending;
      }
    }
    launch_ready_buckets();
    // With find_unused_parameters, ranks also agree on which parameters anyone used.
    at::Tensor used = at::tensor(at::ArrayRef<std::int32_t>(used_), at::kInt);
    Work used_work;
    if (search_unused) used_work = all_reduce_async(used, ReduceOp::Sum);
    for (std::size_t k = 0; k < buckets_.size(); ++k) wait_bucket(buckets_[k], k);
    used_work.wait();
    const std::int32_t* used_by_any = used.data_ptr<std::int32_t>();
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      // A parameter no rank used keeps its gradient untouched (DDP leaves it alone too).
      if (search_unused && used_by_any[i] == 0) continue;
      if (static_unused_[i]) continue;  // static_graph: unused by everyone, as found in the first backward
      if (is_slot_alias(i)) continue;   // already holds the average
      at::Tensor& grad = params_[i].mutable_grad();
      // A gradient that is part of a graph (create_graph=True) keeps its identity.
      if (opts_.gradient_as_bucket_view && !(grad.defined() && grad.requires_grad()))
        grad = slot_alias(i);
      else if (grad.defined())
        grad.copy_(views_[i]);
      else
        grad = views_[i].clone();
    }
    for (auto& [i, grad] : kept)
      if (used_by_any[i] == 0) views_[i].copy_(grad);  // the slot is this gradient's storage
    if (opts_.broadcast_buffers && world_size_ > 1) broadcast_buffers();
    if (opts_.static_graph && sync_count_ == 0)  // the unused set, the same on every rank
      for (std::size_t i = 0; i < params_.size(); ++i) static_unused_[i] = used_by_any[i] == 0;
    if (opts_.rebuild_buckets && !rebuilt_) rebuild_in_ready_order();
  } catch (...) {
    drain_quietly();
    in_backward_ = false;
    throw;
  }
  for (auto& b : buckets_) b.launched = false;
  in_backward_ = false;
  early_launches_ = launched_by_hooks;
  ++sync_count_;
  autotune_step(/*timed=*/true);
}

void ReducerImpl::broadcast_buffers() { broadcast_coalesced(buffers_, buffer_src_); }

}  // namespace idist::detail
