#pragma once
/// @file
/// The gradient reducer behind auto_model: DistributedDataParallel's bucketed, overlapped
/// all-reduce of gradients, written against idist's non-blocking collectives.
///
/// How it works (the design of PyTorch's c10d Reducer):
/// - Parameters that require a gradient are grouped into buckets in reverse registration order
///   (gradients become ready roughly in that order during backward). A bucket holds parameters of
///   one dtype and device; it is closed once it reaches its cap: 1 MiB for the first bucket (or
///   bucket_cap_mb when smaller), bucket_cap_mb for the others.
/// - Each bucket owns one flat, contiguous gradient buffer. With gradient_as_bucket_view (the
///   default) every parameter's .grad() becomes an alias of its slot after the first synchronised
///   backward, so autograd accumulates straight into the bucket and the gradients cost no extra
///   memory; otherwise the buckets are one extra copy of the gradients.
/// - A post hook on every parameter's gradient accumulator (AccumulateGrad) fires once the
///   parameter's .grad() is final for this backward; it divides the gradient by the world size
///   into its slot of the bucket (in place when .grad() already is the slot): the averaging is
///   folded into the bucket.
/// - When all gradients of a bucket are in, the bucket's all-reduce is launched with the
///   non-blocking API, always in bucket order so that every rank issues the same sequence. On a
///   backend without asynchronous progress (mpi on one node, where idist runs no progress thread)
///   nothing would overlap anyway, so the bucket is all-reduced at once with the backend's blocking
///   form: one bucket in flight at a time bounds the backend's scratch memory (Open MPI's libnbc
///   holds a buffer the size of each non-blocking all-reduce), and the fastest call is used
///   (MPI_Allreduce, the mpi default). mpi across nodes has a progress thread, so its buckets fly
///   while backward goes on, as on gloo.
/// - The first hook of a backward queues an autograd final callback; it launches what is left,
///   waits for every bucket and makes .grad() the averaged slot (or copies it back), so that the
///   gradients are averaged when backward() returns. Nothing is in flight afterwards, so the user's own collectives never
///   interleave with gradient buckets.
///
/// Differences from DDP: the bucket order stays the reverse registration order (DDP rebuilds its
/// buckets after the first iteration from the observed order); whether a backward synchronises is
/// decided when its first gradient is ready (DDP decides in forward), so no_sync() must cover the
/// backward() call; collectives issued by the user inside backward (custom autograd functions)
/// interleave with the buckets in gradient-ready order, which must then be the same on all ranks.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/nn/module.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/work.hpp"

namespace idist::detail {

/// DDP's bucket assignment. Parameters are visited in reverse index order (last registered
/// first); `bytes[i]` is parameter i's gradient size and `keys[i]` its dtype / device, which a
/// bucket never mixes. A bucket closes once its size reaches its cap (`first_cap` for the first
/// bucket of each key, `cap` afterwards). Returns the buckets as lists of parameter indices, in the
/// order their first parameter was visited.
/// @throws ValueError when bytes and keys differ in length.
inline std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes,
                                                            const std::vector<std::string>& keys,
                                                            std::size_t first_cap, std::size_t cap) {
  if (bytes.size() != keys.size())
    throw ValueError("assign_buckets: bytes has " + std::to_string(bytes.size()) + " entries but keys has " +
                     std::to_string(keys.size()));
  struct Open {
    std::vector<std::size_t> params;
    std::size_t size = 0;
    std::size_t limit = 0;
    std::size_t first_visit = 0;
  };
  std::map<std::string, Open> open;
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> closed;  // (first visit, params)
  std::size_t visit = 0;
  for (std::size_t k = bytes.size(); k-- > 0; ++visit) {
    auto [it, fresh] = open.try_emplace(keys[k]);
    Open& b = it->second;
    if (fresh) b.limit = first_cap;
    if (b.params.empty()) b.first_visit = visit;
    b.params.push_back(k);
    b.size += bytes[k];
    if (b.size >= b.limit) {
      closed.emplace_back(b.first_visit, std::move(b.params));
      b.params.clear();
      b.size = 0;
      b.limit = cap;
    }
  }
  for (auto& [key, b] : open)
    if (!b.params.empty()) closed.emplace_back(b.first_visit, std::move(b.params));
  std::sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<std::size_t>> out;
  out.reserve(closed.size());
  for (auto& c : closed) out.push_back(std::move(c.second));
  return out;
}

/// Broadcasts `tensors` from world rank `src` in place, one broadcast per dtype and device (the
/// tensors of a group are packed into one flat buffer and unpacked after). Every rank passes the
/// same list of shapes and dtypes.
inline void broadcast_coalesced(const std::vector<at::Tensor>& tensors, int src) {
  std::map<std::string, std::vector<at::Tensor>> groups;  // ordered: the same order on every rank
  for (const auto& t : tensors)
    if (t.defined() && t.numel() > 0)
      groups[std::string(c10::toString(t.scalar_type())) + "@" + t.device().str()].push_back(t.detach());
  at::NoGradGuard no_grad;
  for (auto& [key, group] : groups) {
    std::vector<at::Tensor> parts;
    for (const auto& t : group) parts.push_back(t.reshape({-1}));
    at::Tensor flat = at::cat(parts);
    idist::broadcast(flat, src);
    std::int64_t offset = 0;
    for (auto& t : group) {
      t.copy_(flat.narrow(0, offset, t.numel()).view(t.sizes()));
      offset += t.numel();
    }
  }
}

/// Averages the gradients of one module's parameters across the ranks of the world during
/// backward, DistributedDataParallel's way (see the file comment). Created by auto_model for world
/// size > 1; also usable directly (with world size 1 it only exercises the machinery).
///
/// The parameters seen at construction are the ones synchronised: do not register, replace or
/// re-create parameters of the module afterwards, nor move them to another device or dtype (the
/// bucket buffers are allocated once, on the parameters' device, with their dtype).
class Reducer : public std::enable_shared_from_this<Reducer> {
 public:
  /// Options (AutoModelOptions carries the user-facing ones).
  struct Options {
    /// Cap of every bucket but the first, in MiB (DDP's bucket_cap_mb).
    double bucket_cap_mb = 25.0;
    /// Cap of the first bucket in MiB (DDP: 1 MiB), lowered to bucket_cap_mb when that is smaller.
    double first_bucket_cap_mb = 1.0;
    /// Tolerate parameters that get no gradient in a backward (zero contribution); otherwise the
    /// backward fails with a ValueError naming them.
    bool find_unused_parameters = false;
    /// Broadcast the module's buffers from rank 0 after each synchronised backward.
    bool broadcast_buffers = true;
    /// Make each .grad() an alias of its bucket slot (DDP's gradient_as_bucket_view).
    bool gradient_as_bucket_view = true;
  };

  /// Builds the buckets and installs the hooks on the parameters of `module`.
  /// @throws ValueError for a null module, a non-positive bucket cap, or a parameter dtype that
  ///         idist cannot reduce.
  static std::shared_ptr<Reducer> create(std::shared_ptr<torch::nn::Module> module, Options opts) {
    std::shared_ptr<Reducer> r(new Reducer(module, opts));
    r->install_hooks();
    return r;
  }

  ~Reducer() {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (accumulators_[i]) accumulators_[i]->del_post_hook(hook_keys_[i]);
  }
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Whether the next backward synchronises (false inside no_sync()).
  bool require_sync() const {
    std::lock_guard lock(mutex_);
    return require_sync_;
  }
  /// Turns synchronisation of the following backwards on or off (what NoSyncGuard does).
  void set_require_sync(bool on) {
    std::lock_guard lock(mutex_);
    require_sync_ = on;
  }

  /// The bucket layout: indices into param_names(), in launch order.
  std::vector<std::vector<std::size_t>> buckets() const {
    std::vector<std::vector<std::size_t>> out;
    for (const auto& b : buckets_) out.push_back(b.params);
    return out;
  }
  /// Size of each bucket's flat buffer in bytes, in launch order.
  std::vector<std::size_t> bucket_bytes() const {
    std::vector<std::size_t> out;
    for (const auto& b : buckets_) out.push_back(std::size_t(b.flat.numel()) * b.flat.element_size());
    return out;
  }
  /// Qualified names of the synchronised parameters, in registration order.
  const std::vector<std::string>& param_names() const noexcept { return names_; }
  /// Number of backwards whose gradients were synchronised so far.
  std::size_t sync_count() const {
    std::lock_guard lock(mutex_);
    return sync_count_;
  }
  /// The most bucket all-reduces in flight at once so far, counted at each launch (1 on backends
  /// without asynchronous progress; see the file comment).
  std::size_t peak_in_flight() const {
    std::lock_guard lock(mutex_);
    return peak_in_flight_;
  }
  /// Whether parameter `i`'s .grad() currently shares memory with its bucket slot (always false
  /// without gradient_as_bucket_view, true with it once a synchronised backward has run).
  bool gradient_in_bucket(std::size_t i) const {
    std::lock_guard lock(mutex_);
    return is_slot_alias(i);
  }
  /// Buckets whose all-reduce the hooks launched during the last synchronised backward, before
  /// its final callback: the communication that overlapped the rest of the backward.
  std::size_t early_launches() const {
    std::lock_guard lock(mutex_);
    return early_launches_;
  }

 private:
  /// One parameter's place in its bucket.
  struct Slot {
    std::size_t bucket = 0;
    std::int64_t offset = 0;  // elements
    std::int64_t numel = 0;
  };
  struct Bucket {
    std::vector<std::size_t> params;
    at::Tensor flat;
    std::size_t pending = 0;  // parameters whose gradient is not in yet
    Work work;
    bool launched = false;
  };

  /// Calls Reducer::on_grad_ready once AccumulateGrad has updated the parameter's .grad().
  class ReadyHook final : public torch::autograd::FunctionPostHook {
   public:
    ReadyHook(std::weak_ptr<Reducer> r, std::size_t index) : reducer_(std::move(r)), index_(index) {}
    torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                              const torch::autograd::variable_list& /*inputs*/) override {
      if (auto r = reducer_.lock()) r->on_grad_ready(index_);
      return outputs;
    }

   private:
    std::weak_ptr<Reducer> reducer_;
    std::size_t index_;
  };

  // Holds tensors, never the module itself, so that the registry can notice the module's end.
  Reducer(const std::shared_ptr<torch::nn::Module>& module, Options opts) : opts_(opts) {
    if (!module) throw ValueError("Reducer: module is null");
    if (!(opts_.bucket_cap_mb > 0))
      throw ValueError("auto_model: bucket_cap_mb should be positive, but given " + std::to_string(opts_.bucket_cap_mb));
    world_size_ = get_world_size();
    no_async_progress_ = !current_model().has_async_progress();
    world_size_tensor_ = at::scalar_tensor(double(world_size_), at::kDouble);

    // Parameters that need a gradient, once each (a shared parameter is registered under
    // several names), in registration order.
    std::unordered_set<const void*> seen;
    for (const auto& item : module->named_parameters(/*recurse=*/true)) {
      const at::Tensor& p = item.value();
      if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
      to_dtype(p.scalar_type());
      params_.push_back(p);
      names_.push_back(item.key());
    }
    for (const auto& item : module->named_buffers(/*recurse=*/true)) buffers_.push_back(item.value());

    std::vector<std::size_t> bytes;
    std::vector<std::string> keys;
    for (const auto& p : params_) {
      bytes.push_back(std::size_t(p.numel()) * p.element_size());
      keys.push_back(std::string(c10::toString(p.scalar_type())) + "@" + p.device().str());
    }
    const double mib = 1024.0 * 1024.0;
    const auto cap = std::size_t(std::max(1.0, opts_.bucket_cap_mb * mib));
    const auto first = std::min(cap, std::size_t(std::max(1.0, opts_.first_bucket_cap_mb * mib)));
    slots_.resize(params_.size());
    for (auto& indices : assign_buckets(bytes, keys, first, cap)) {
      Bucket b;
      std::int64_t offset = 0;
      for (std::size_t i : indices) {
        slots_[i] = Slot{buckets_.size(), offset, params_[i].numel()};
        offset += params_[i].numel();
      }
      const at::Tensor& p0 = params_[indices.front()];
      b.flat = at::zeros({offset}, p0.options().requires_grad(false));
      b.params = std::move(indices);
      buckets_.push_back(std::move(b));
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Slot& s = slots_[i];
      views_.push_back(buckets_[s.bucket].flat.narrow(0, s.offset, s.numel).view(params_[i].sizes()));
    }
    ready_.assign(params_.size(), false);
    used_.assign(params_.size(), 0);
  }

  void install_hooks() {
    accumulators_.resize(params_.size());
    hook_keys_.resize(params_.size());
    for (std::size_t i = 0; i < params_.size(); ++i) {
      // Holding the accumulator keeps the same AccumulateGrad node (and our hook) for every graph.
      accumulators_[i] = torch::autograd::impl::grad_accumulator(params_[i]);
      hook_keys_[i] = accumulators_[i]->add_post_hook(std::make_unique<ReadyHook>(weak_from_this(), i));
    }
  }

  /// Resets the per-backward state and queues the final callback. Called by the first hook.
  void prepare_backward() {
    std::fill(ready_.begin(), ready_.end(), false);
    std::fill(used_.begin(), used_.end(), 0);
    for (auto& b : buckets_) {
      b.pending = b.params.size();
      b.launched = false;
      b.work = Work{};
    }
    next_bucket_ = 0;
    in_backward_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([weak = weak_from_this()] {
      if (auto r = weak.lock()) r->finalize_backward();
    });
  }

  void on_grad_ready(std::size_t i) {
    std::lock_guard lock(mutex_);
    if (in_backward_ && ready_[i]) {
      // A parameter is reported once per backward: this is a new backward and the previous one
      // ended without its final callback (it failed). Drop what it left in flight.
      drain_quietly();
      in_backward_ = false;
    }
    if (!in_backward_) {
      if (!require_sync_) return;  // no_sync(): gradients accumulate locally
      prepare_backward();
    }
    try {
      ready_[i] = true;
      used_[i] = 1;
      const at::Tensor& grad = params_[i].grad();
      at::Tensor& view = views_[i];
      {
        at::NoGradGuard no_grad;
        if (!grad.defined()) {
          view.zero_();
        } else if (grad.is_sparse()) {
          throw ValueError("auto_model: parameter '" + names_[i] +
                           "' has a sparse gradient; idist averages dense gradients only");
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

  /// Launches, in bucket order, every bucket whose gradients are all in.
  void launch_ready_buckets() {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
      std::size_t in_flight = 1;
      for (std::size_t k = 0; k < next_bucket_; ++k) in_flight += buckets_[k].work.is_completed() ? 0 : 1;
      peak_in_flight_ = std::max(peak_in_flight_, in_flight);
      Bucket& b = buckets_[next_bucket_++];
      if (no_async_progress_) {
        // Nothing progresses in the background: run the bucket now through the backend's blocking
        // form (MPI_Allreduce itself by default, whose large-message algorithms beat the
        // non-blocking ones).
        detail::all_reduce_blocking(b.flat, ReduceOp::Sum, Group{});
        b.work = Work{};
      } else {
        b.work = all_reduce_async(b.flat, ReduceOp::Sum);
      }
      b.launched = true;
    }
  }

  /// Waits for launched buckets, swallowing their errors (used before reporting another error).
  void drain_quietly() noexcept {
    for (auto& b : buckets_) {
      if (!b.launched) continue;
      try {
        b.work.wait();
      } catch (...) {
      }
      b.launched = false;
    }
  }

  /// The autograd final callback: completes the synchronisation before backward() returns.
  void finalize_backward() {
    std::lock_guard lock(mutex_);
    if (!in_backward_) return;
    const std::size_t launched_by_hooks = next_bucket_;
    std::vector<std::size_t> missing;
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (!ready_[i]) missing.push_back(i);
    if (!missing.empty() && !opts_.find_unused_parameters) {
      drain_quietly();
      in_backward_ = false;
      std::string list;
      for (std::size_t i : missing) list += (list.empty() ? "" : ", ") + names_[i];
      throw ValueError("auto_model: on rank " + std::to_string(get_rank()) + ", " + std::to_string(missing.size()) +
                       " parameter(s) received no gradient in this backward: " + list +
                       ". Make every parameter contribute to the loss, or pass "
                       "AutoModelOptions{.find_unused_parameters = true} when parts of the model are legitimately "
                       "unused in some iterations.");
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
      if (opts_.find_unused_parameters) used_work = all_reduce_async(used, ReduceOp::Sum);
      for (auto& b : buckets_) b.work.wait();
      used_work.wait();
      const std::int32_t* used_by_any = used.data_ptr<std::int32_t>();
      at::NoGradGuard no_grad;
      for (std::size_t i = 0; i < params_.size(); ++i) {
        // A parameter no rank used keeps its gradient untouched (DDP leaves it alone too).
        if (opts_.find_unused_parameters && used_by_any[i] == 0) continue;
        if (is_slot_alias(i)) continue;  // already holds the average
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
    } catch (...) {
      drain_quietly();
      in_backward_ = false;
      throw;
    }
    for (auto& b : buckets_) b.launched = false;
    in_backward_ = false;
    early_launches_ = launched_by_hooks;
    ++sync_count_;
  }

  /// Whether parameter i's .grad() is its bucket slot (gradient_as_bucket_view after the first
  /// synchronised backward, unless the user replaced or reset the gradient since).
  bool is_slot_alias(std::size_t i) const {
    const at::Tensor& g = params_[i].grad();
    return g.defined() && !g.is_sparse() && g.data_ptr() == views_[i].data_ptr() && g.numel() == views_[i].numel();
  }

  /// A tensor sharing parameter i's slot of its bucket, shaped like the parameter. It is made with
  /// set_() rather than as a view so that autograd sees no view: LibTorch's Optimizer::zero_grad()
  /// calls detach_() on gradients, which autograd refuses on views.
  at::Tensor slot_alias(std::size_t i) const {
    const Slot& s = slots_[i];
    const at::Tensor& flat = buckets_[s.bucket].flat;
    at::Tensor g = at::empty({0}, flat.options());
    g.set_(flat.storage(), flat.storage_offset() + s.offset, params_[i].sizes());
    return g;
  }

  /// Copies rank 0's buffers (e.g. batch-norm running statistics) to every rank.
  void broadcast_buffers() { broadcast_coalesced(buffers_, 0); }

  Options opts_;
  int world_size_ = 1;
  bool no_async_progress_ = false;  // buckets are all-reduced at once (see the file comment)
  at::Tensor world_size_tensor_;  // 0-dim divisor of the averaging
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;
  std::vector<at::Tensor> buffers_;
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
  std::size_t sync_count_ = 0;
  std::size_t early_launches_ = 0;
  std::size_t peak_in_flight_ = 0;
};

}  // namespace idist::detail
