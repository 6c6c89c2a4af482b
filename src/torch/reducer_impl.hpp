#pragma once
// The gradient Reducer's state and algorithm (the public surface is idist/torch/reducer.hpp, whose
// file comment describes the design). Private to idist_torch: it holds LibTorch autograd internals
// (gradient accumulator nodes), which the installed headers must not expose. Its members are open
// to the src/torch/reducer*.cpp files, which split the work: layout (reducer_buckets.cpp), the
// backward (reducer_backward.cpp), join (reducer_join.cpp) and the public class (reducer.cpp).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/module.h>

#include "idist/op_type.hpp"
#include "idist/torch/comm_hook.hpp"
#include "idist/work.hpp"
#include "torch/reducer.hpp"

namespace idist::detail {

/// The bucket cap when AutoModelOptions::bucket_cap_mb is unset and not tuned (DDP's default), MiB.
inline constexpr double kDefaultBucketCapMb = 25.0;

class ReducerImpl : public std::enable_shared_from_this<ReducerImpl> {
 public:
  using Options = Reducer::Options;
  using JoinTick = Reducer::JoinTick;

  /// One parameter's place in its bucket.
  struct Slot {
    std::size_t bucket = 0;
    std::int64_t offset = 0;  // elements
    std::int64_t numel = 0;
  };
  struct Bucket {
    std::vector<std::size_t> params;
    at::Tensor flat;
    std::unique_ptr<GradBucket> grad;  // what the hook receives: flat, its parameters and their offsets
    std::size_t pending = 0;           // parameters whose gradient is not in yet
    Work work;                         // the hook's: the bucket's reduction
    bool launched = false;
  };

  // Holds tensors, never the module itself, so that the registry can notice the module's end.
  ReducerImpl(const std::shared_ptr<torch::nn::Module>& module, Options opts);
  /// Removes the post hooks from the gradient accumulators.
  ~ReducerImpl();
  ReducerImpl(const ReducerImpl&) = delete;
  ReducerImpl& operator=(const ReducerImpl&) = delete;

  // --- Layout (reducer_buckets.cpp) ---

  /// The buckets (parameter indices) of the parameters visited in `order` under a cap of `cap_mb`.
  std::vector<std::vector<std::size_t>> layout(const std::vector<std::size_t>& order, double cap_mb) const;
  /// (Re)builds buckets, slots and views visiting the parameters in `order` under cap_mb_. Gradients
  /// that alias their old slot move to the new one with their values.
  void build_buckets(const std::vector<std::size_t>& order);
  /// The GradBucket of bucket `index` over `flat` (its buffer, or the zeros of a shadow backward).
  std::unique_ptr<GradBucket> grad_bucket(std::size_t index, const at::Tensor& flat) const;
  /// After the first synchronised backward: every rank adopts the order in which rank 0's
  /// gradients became ready (unreported parameters last, in reverse index order) and rebuilds its
  /// buckets (DDP's rebuild_buckets + sync_bucket_indices). Collective: one broadcast.
  void rebuild_in_ready_order();
  /// Whether parameter i's .grad() is its bucket slot (gradient_as_bucket_view after the first
  /// synchronised backward, unless the user replaced or reset the gradient since).
  bool is_slot_alias(std::size_t i) const;
  /// A tensor sharing parameter i's slot of its bucket, shaped like the parameter. It is made with
  /// set_() rather than as a view so that autograd sees no view: LibTorch's Optimizer::zero_grad()
  /// calls detach_() on gradients, which autograd refuses on views.
  at::Tensor slot_alias(std::size_t i) const;

  // --- The backward (reducer_backward.cpp) ---

  /// Puts a post hook on every parameter's gradient accumulator (after construction: the hooks
  /// hold a weak reference to this reducer).
  void install_hooks();
  /// Resets the per-backward state and queues the final callback. Called by the first hook.
  void prepare_backward();
  /// The post hook of parameter i's gradient accumulator: its .grad() is final for this backward.
  void on_grad_ready(std::size_t i);
  /// Launches, in bucket order, every bucket whose gradients are all in: hands each to the hook.
  void launch_ready_buckets();
  /// Waits for bucket `b`'s reduction; copies the value of the hook's Work into the bucket when it is
  /// not the bucket itself.
  /// @throws ValueError when a hook's Work yields something else than a tensor of the bucket's size
  ///         and dtype.
  void wait_bucket(Bucket& b, std::size_t index);
  /// Waits for launched buckets, swallowing their errors (used before reporting another error).
  void drain_quietly() noexcept;
  /// The autograd final callback: completes the synchronisation before backward() returns.
  void finalize_backward();
  /// Copies rank 0's buffers (e.g. batch-norm running statistics) to every rank (under join: the
  /// highest active rank's).
  void broadcast_buffers();

  // --- Bucket cap tuning (reducer_autotune.cpp) ---

  /// Plans the trials (the candidate caps that give distinct buckets) when bucket_cap_mb is unset.
  void start_autotune();
  /// After every synchronised backward (shadow ones included: the count agrees on every rank):
  /// records the time since backward_start_ when `timed`, moves to the next trial (rebuilding the
  /// buckets) and, after the last, agrees on the fastest cap (collective: one all_reduce).
  void autotune_step(bool timed);
  /// Ends tuning at the default cap (a hook whose state follows the bucket layout was registered).
  void stop_autotune();

  // --- Join (reducer_join.cpp) ---

  /// Runs the join tick and adopts its divisor and buffer source (lock held).
  void apply_join_tick();
  /// Reducer::set_join_tick (takes the lock).
  void set_join_tick(std::function<JoinTick()> tick);
  /// Reducer::shadow_backward (takes the lock).
  void shadow_backward(int buffer_src);

  // The state, open to reducer.cpp's accessors: what changes after construction is read and
  // written under mutex_ (the hooks and the final callback take it too).
  Options opts_;
  // The hook every bucket goes through: comm_hooks::allreduce() until register_comm_hook() installs
  // the user's. While it is comm_hooks::allreduce() (allreduce_hook_) the gradients enter the buckets
  // divided and each bucket goes to AllreduceHook::launch() as bucket_completion_ says (blocking on a
  // backend without asynchronous progress, see reducer.hpp); another hook gets them undivided.
  CommHook comm_hook_;
  bool user_hook_ = false;       // register_comm_hook() was called (once only)
  bool allreduce_hook_ = false;  // comm_hook_ is comm_hooks::allreduce()
  Completion bucket_completion_ = Completion::Async;
  int world_size_ = 1;
  at::Tensor world_size_tensor_;  // 0-dim divisor of the averaging
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> buffers_;
  double cap_mb_ = kDefaultBucketCapMb;  // the cap the buckets are built with
  std::vector<std::size_t> order_;       // the order the buckets were built in
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<at::Tensor> views_;  // parameter i's slot in its bucket, shaped like the parameter
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<std::uintptr_t> hook_keys_;

  mutable std::mutex mutex_;
  bool require_sync_ = true;
  bool in_backward_ = false;
  std::vector<bool> ready_;
  std::vector<std::int32_t> used_;  // 1 when the parameter's hook fired in this backward
  std::size_t next_bucket_ = 0;
  std::size_t ready_count_ = 0;                // gradients reported in this backward
  std::vector<std::size_t> launch_positions_;  // per bucket: ready_count_ at its launch
  std::vector<std::size_t> ready_order_;       // until the rebuild: parameters in the order their hooks fired
  bool rebuilt_ = false;
  std::vector<bool> static_unused_;  // static_graph: unused in the first backward, ready at once since
  std::size_t sync_count_ = 0;
  std::size_t early_launches_ = 0;
  std::size_t peak_in_flight_ = 0;
  std::function<JoinTick()> join_tick_;                   // set by idist::join while it runs
  int buffer_src_ = 0;                                    // world rank whose buffers broadcast_buffers() copies
  std::chrono::steady_clock::time_point backward_start_;  // the first gradient of this backward
  struct Autotune {
    std::vector<double> caps;                  // the candidates, MiB
    std::vector<std::vector<double>> seconds;  // per candidate: timed backwards
    std::size_t trial = 0;                     // index into caps
    std::size_t iteration = 0;                 // synchronised backwards in this trial
    bool active = false;
  } tune_;
};

}  // namespace idist::detail
