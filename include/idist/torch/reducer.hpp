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
/// With a communication hook (register_comm_hook), gradients enter the buckets undivided and each
/// ready bucket is handed to the hook instead of the all-reduce; the final callback waits for the
/// hooks' futures in bucket order and copies what they return into the buckets.
///
/// After the first synchronised backward the buckets are rebuilt in the order rank 0's gradients
/// became ready (DDP's rebuild_buckets; Options::rebuild_buckets), the order broadcast so that
/// every rank holds the same layout.
///
/// Differences from DDP: whether a backward synchronises is
/// decided when its first gradient is ready (DDP decides in forward), so no_sync() must cover the
/// backward() call; collectives issued by the user inside backward (custom autograd functions)
/// interleave with the buckets in gradient-ready order, which must then be the same on all ranks.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
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
#include "idist/torch/comm_hook.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/work.hpp"

namespace idist::detail {

/// DDP's bucket assignment. Parameters are visited in reverse index order (last registered
/// first); `bytes[i]` is parameter i's gradient size and `keys[i]` its dtype / device, which a
/// bucket never mixes. A bucket closes once its size reaches its cap (`first_cap` for the first
/// bucket of each key, `cap` afterwards). Returns the buckets as lists of parameter indices, in the
/// order their first parameter was visited.
/// @throws ValueError when bytes and keys differ in length.
inline std::vector<std::vector<std::size_t>> assign_buckets_in_order(const std::vector<std::size_t>& order,
                                                                     const std::vector<std::size_t>& bytes,
                                                                     const std::vector<std::string>& keys,
                                                                     std::size_t first_cap, std::size_t cap);

inline std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes,
                                                            const std::vector<std::string>& keys,
                                                            std::size_t first_cap, std::size_t cap) {
  std::vector<std::size_t> order(bytes.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = order.size() - 1 - k;
  return assign_buckets_in_order(order, bytes, keys, first_cap, cap);
}

/// assign_buckets visiting the parameters in `order` (a permutation of 0..n-1) instead of reverse
/// index order: DDP's rebuilt buckets, with `order` the order gradients became ready.
/// @throws ValueError when bytes and keys differ in length or order is not a permutation of them.
inline std::vector<std::vector<std::size_t>> assign_buckets_in_order(const std::vector<std::size_t>& order,
                                                                     const std::vector<std::size_t>& bytes,
                                                                     const std::vector<std::string>& keys,
                                                                     std::size_t first_cap, std::size_t cap) {
  if (bytes.size() != keys.size())
    throw ValueError("assign_buckets: bytes has " + std::to_string(bytes.size()) + " entries but keys has " +
                     std::to_string(keys.size()));
  std::vector<bool> seen_index(bytes.size(), false);
  for (std::size_t k : order) {
    if (k >= bytes.size() || seen_index[k])
      throw ValueError("assign_buckets: the visiting order is not a permutation of the " +
                       std::to_string(bytes.size()) + " parameters");
    seen_index[k] = true;
  }
  if (order.size() != bytes.size())
    throw ValueError("assign_buckets: the visiting order has " + std::to_string(order.size()) + " entries, expected " +
                     std::to_string(bytes.size()));
  struct Open {
    std::vector<std::size_t> params;
    std::size_t size = 0;
    std::size_t limit = 0;
    std::size_t first_visit = 0;
  };
  std::map<std::string, Open> open;
  std::vector<std::pair<std::size_t, std::vector<std::size_t>>> closed;  // (first visit, params)
  std::size_t visit = 0;
  for (std::size_t k : order) {
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
    ++visit;
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
    /// After the first synchronised backward, rebuild the buckets in the order the gradients
    /// became ready on rank 0 (DDP's rebuild_buckets), so that buckets fill in backward order.
    bool rebuild_buckets = true;
    /// The set of parameters that get a gradient is the same in every iteration (DDP's
    /// static_graph): the first synchronised backward finds the unused ones (as
    /// find_unused_parameters does); later ones mark them ready at once and skip the search.
    bool static_graph = false;
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
  /// Replaces each bucket's all-reduce with `hook` from the next backward on (DDP's
  /// register_comm_hook). Gradients then enter the buckets undivided: the hook averages.
  /// @throws ValueError for an empty hook, a second registration (DDP allows one), or a call during
  ///         a backward.
  void register_comm_hook(CommHook hook) {
    std::lock_guard lock(mutex_);
    if (!hook) throw ValueError("register_comm_hook: the hook is empty; expected a callable");
    if (comm_hook_)
      throw ValueError("register_comm_hook: a communication hook is already registered on this model; it can be "
                       "registered only once (as in DistributedDataParallel)");
    if (in_backward_) throw ValueError("register_comm_hook: called during a backward; register it before training");
    comm_hook_ = std::move(hook);
  }
  /// Whether a communication hook replaces the default all-reduce.
  bool has_comm_hook() const {
    std::lock_guard lock(mutex_);
    return bool(comm_hook_);
  }

  /// For each bucket of the last synchronised backward, how many parameters' gradients were ready
  /// when its reduction was launched (parameters().size() for those launched by the final
  /// callback): how early each bucket left, the measure of overlap bucket rebuilding improves.
  std::vector<std::size_t> launch_positions() const {
    std::lock_guard lock(mutex_);
    return launch_positions_;
  }
  /// Whether the buckets were rebuilt in gradient-ready order (after the first synchronised backward).
  bool buckets_rebuilt() const {
    std::lock_guard lock(mutex_);
    return rebuilt_;
  }

  /// Buckets whose all-reduce the hooks launched during the last synchronised backward, before
  /// its final callback: the communication that overlapped the rest of the backward.
  std::size_t early_launches() const {
    std::lock_guard lock(mutex_);
    return early_launches_;
  }

  // --- Join support (idist::join, idist/torch/join.hpp); unused otherwise. ---

  /// What a synchronised backward learns from join's per-iteration indicator: the divisor of the
  /// gradients (DDP under Join: the initial world size, or the number of ranks still active) and
  /// the world rank whose buffers are broadcast after the backward (the highest active rank).
  struct JoinTick {
    double divisor = 1.0;
    int buffer_src = 0;
  };
  /// Installs the function run at the start of every synchronised backward, before any bucket is
  /// reduced (join's indicator all-reduce; it may throw to fail the backward, e.g. for
  /// throw_on_early_termination), or removes it when empty. It is called with the reducer's lock
  /// held, so it must not call the reducer. While it is installed the returned divisor and buffer
  /// source are used; removing it restores the world size and rank 0.
  void set_join_tick(std::function<JoinTick()> tick) {
    std::lock_guard lock(mutex_);
    join_tick_ = std::move(tick);
    if (!join_tick_) {
      world_size_tensor_.fill_(double(world_size_));
      buffer_src_ = 0;
    }
  }
  /// Whether a join tick is installed (a join is running).
  bool has_join_tick() const {
    std::lock_guard lock(mutex_);
    return static_cast<bool>(join_tick_);
  }
  /// The shadow of one synchronised backward for a rank that has joined (DDP's join hook,
  /// _match_all_reduce_for_bwd_pass): issues exactly the collectives a synchronised backward issues,
  /// in the same order and through the same calls, with zero contributions: one all-reduce of a
  /// zero-filled bucket per bucket (launch_ready_buckets), the used-parameter map when
  /// find_unused_parameters, and the buffer broadcast from world rank `buffer_src` when
  /// broadcast_buffers, and after the first backward the broadcast of the rebuilt bucket order. With
  /// a communication hook the zero buckets go through the hook, as in DDP. This rank's gradients
  /// are left untouched; its buffers receive buffer_src's.
  /// @throws ValueError when called during a backward; what the collectives raise.
  void shadow_backward(int buffer_src) {
    std::lock_guard lock(mutex_);
    if (in_backward_) throw ValueError("Reducer::shadow_backward: called during a backward");
    std::vector<at::Tensor> kept;
    for (auto& b : buckets_) {
      kept.push_back(b.flat);
      b.flat = at::zeros_like(b.flat);
      b.pending = 0;
      b.launched = false;
      b.work = Work{};
      b.future = BucketFuture{};
    }
    next_bucket_ = 0;
    launch_positions_.assign(buckets_.size(), params_.size());
    auto restore = [&] {
      for (std::size_t k = 0; k < buckets_.size(); ++k) {
        buckets_[k].flat = kept[k];
        buckets_[k].launched = false;
        buckets_[k].work = Work{};
        buckets_[k].future = BucketFuture{};
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
    BucketFuture future;  // with a communication hook: the hook's pending result
    bool launched = false;
    /// Drives progress and reports whether the bucket's reduction finished.
    bool is_completed() { return work.is_completed() && future.is_completed(); }
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

    std::vector<std::size_t> reverse(params_.size());
    for (std::size_t k = 0; k < reverse.size(); ++k) reverse[k] = reverse.size() - 1 - k;
    build_buckets(reverse);
    ready_.assign(params_.size(), false);
    used_.assign(params_.size(), 0);
    static_unused_.assign(params_.size(), false);
  }

  /// (Re)builds buckets, slots and views visiting the parameters in `order`. Gradients that alias
  /// their old slot move to the new one with their values.
  void build_buckets(const std::vector<std::size_t>& order) {
    std::vector<std::size_t> bytes;
    std::vector<std::string> keys;
    for (const auto& p : params_) {
      bytes.push_back(std::size_t(p.numel()) * p.element_size());
      keys.push_back(std::string(c10::toString(p.scalar_type())) + "@" + p.device().str());
    }
    const double mib = 1024.0 * 1024.0;
    const auto cap = std::size_t(std::max(1.0, opts_.bucket_cap_mb * mib));
    const auto first = std::min(cap, std::size_t(std::max(1.0, opts_.first_bucket_cap_mb * mib)));
    std::vector<bool> aliased(params_.size(), false);
    for (std::size_t i = 0; i < views_.size(); ++i) aliased[i] = is_slot_alias(i);
    std::vector<at::Tensor> old_views = std::move(views_);
    std::vector<Bucket> buckets;
    std::vector<Slot> slots(params_.size());
    for (auto& indices : assign_buckets_in_order(order, bytes, keys, first, cap)) {
      Bucket b;
      std::int64_t offset = 0;
      for (std::size_t i : indices) {
        slots[i] = Slot{buckets.size(), offset, params_[i].numel()};
        offset += params_[i].numel();
      }
      const at::Tensor& p0 = params_[indices.front()];
      b.flat = at::zeros({offset}, p0.options().requires_grad(false));
      b.params = std::move(indices);
      buckets.push_back(std::move(b));
    }
    buckets_ = std::move(buckets);
    slots_ = std::move(slots);
    views_.clear();
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Slot& sl = slots_[i];
      views_.push_back(buckets_[sl.bucket].flat.narrow(0, sl.offset, sl.numel).view(params_[i].sizes()));
    }
    at::NoGradGuard no_grad;
    for (std::size_t i = 0; i < old_views.size(); ++i) {
      views_[i].copy_(old_views[i]);
      if (aliased[i]) params_[i].mutable_grad() = slot_alias(i);
    }
  }

  /// After the first synchronised backward: every rank adopts the order in which rank 0's
  /// gradients became ready (unreported parameters last, in reverse index order) and rebuilds its
  /// buckets (DDP's rebuild_buckets + sync_bucket_indices). Collective: one broadcast.
  void rebuild_in_ready_order() {
    std::vector<std::int64_t> order;
    std::vector<bool> listed(params_.size(), false);
    for (std::size_t i : ready_order_)
      if (!listed[i]) {
        order.push_back(std::int64_t(i));
        listed[i] = true;
      }
    for (std::size_t k = params_.size(); k-- > 0;)
      if (!listed[k]) order.push_back(std::int64_t(k));
    at::Tensor t = at::tensor(at::ArrayRef<std::int64_t>(order), at::kLong);
    idist::broadcast(t, 0);
    const std::int64_t* o = t.data_ptr<std::int64_t>();
    build_buckets(std::vector<std::size_t>(o, o + t.numel()));
    rebuilt_ = true;
    ready_order_.clear();
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
      b.future = BucketFuture{};
    }
    next_bucket_ = 0;
    ready_count_ = 0;
    launch_positions_.assign(buckets_.size(), params_.size());
    in_backward_ = true;
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
      if (join_tick_) apply_join_tick();
      prepare_backward();
    }
    try {
      if (static_unused_[i])
        throw ValueError("auto_model: static_graph=true, but parameter '" + names_[i] +
                         "' received a gradient after the first iteration found it unused; the set of used "
                         "parameters must not change (pass static_graph=false)");
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
          throw ValueError("auto_model: parameter '" + names_[i] +
                           "' has a sparse gradient; idist averages dense gradients only");
        } else if (comm_hook_) {
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
      for (std::size_t k = 0; k < next_bucket_; ++k) buckets_[k].is_completed();
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
      for (std::size_t k = 0; k < next_bucket_; ++k) in_flight += buckets_[k].is_completed() ? 0 : 1;
      peak_in_flight_ = std::max(peak_in_flight_, in_flight);
      const std::size_t index = next_bucket_++;
      Bucket& b = buckets_[index];
      launch_positions_[index] = ready_count_;
      if (comm_hook_) {
        b.work = Work{};
        b.future = run_comm_hook(index);
      } else if (no_async_progress_) {
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

  /// Hands bucket `index` to the communication hook.
  BucketFuture run_comm_hook(std::size_t index) {
    const Bucket& b = buckets_[index];
    std::vector<at::Tensor> params;
    std::vector<std::int64_t> offsets;
    for (std::size_t i : b.params) {
      params.push_back(params_[i]);
      offsets.push_back(slots_[i].offset);
    }
    GradBucket bucket(index, b.flat, std::move(params), std::move(offsets), index + 1 == buckets_.size());
    return comm_hook_(bucket);
  }

  /// Waits for bucket `b`'s reduction; with a hook, copies the hook's result into the bucket.
  /// @throws ValueError when a hook returns a tensor of another size or dtype than the bucket.
  void wait_bucket(Bucket& b, std::size_t index) {
    b.work.wait();
    if (!comm_hook_) return;
    const at::Tensor out = b.future.wait();
    if (!out.defined() || out.is_same(b.flat)) return;
    if (out.numel() != b.flat.numel() || out.scalar_type() != b.flat.scalar_type())
      throw ValueError("register_comm_hook: the hook returned a " + std::string(c10::toString(out.scalar_type())) +
                       " tensor of " + std::to_string(out.numel()) + " elements for bucket " + std::to_string(index) +
                       ", expected " + std::string(c10::toString(b.flat.scalar_type())) + " with " +
                       std::to_string(b.flat.numel()) + " elements (the bucket's buffer)");
    at::NoGradGuard no_grad;
    b.flat.copy_(out.reshape({-1}));
  }

  /// Waits for launched buckets, swallowing their errors (used before reporting another error).
  void drain_quietly() noexcept {
    for (auto& b : buckets_) {
      if (!b.launched) continue;
      try {
        b.work.wait();
      } catch (...) {
      }
      try {
        b.future.wait();
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
    const bool search_unused = opts_.find_unused_parameters || (opts_.static_graph && sync_count_ == 0);
    if (!missing.empty() && !search_unused) {
      drain_quietly();
      in_backward_ = false;
      std::string list;
      for (std::size_t i : missing) list += (list.empty() ? "" : ", ") + names_[i];
      throw ValueError("auto_model: on rank " + std::to_string(get_rank()) + ", " + std::to_string(missing.size()) +
                       " parameter(s) received no gradient in this backward: " + list +
                       ". Make every parameter contribute to the loss, or pass "
                       "AutoModelOptions{.find_unused_parameters = true} when parts of the model are legitimately "
                       "unused in some iterations" +
                       std::string(opts_.static_graph ? " (static_graph: the used set must not change after the first "
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

  /// Copies rank 0's buffers (e.g. batch-norm running statistics) to every rank (under join: the
  /// highest active rank's).
  void broadcast_buffers() { broadcast_coalesced(buffers_, buffer_src_); }

  /// Runs the join tick and adopts its divisor and buffer source (lock held).
  void apply_join_tick() {
    const JoinTick tick = join_tick_();
    world_size_tensor_.fill_(tick.divisor);
    buffer_src_ = tick.buffer_src;
  }

  Options opts_;
  CommHook comm_hook_;  // empty: the default all-reduce of averaged gradients
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
  std::size_t ready_count_ = 0;                 // gradients reported in this backward
  std::vector<std::size_t> launch_positions_;  // per bucket: ready_count_ at its launch
  std::vector<std::size_t> ready_order_;  // until the rebuild: parameters in the order their hooks fired
  bool rebuilt_ = false;
  std::vector<bool> static_unused_;  // static_graph: unused in the first backward, ready at once since
  std::size_t sync_count_ = 0;
  std::size_t early_launches_ = 0;
  std::size_t peak_in_flight_ = 0;
  std::function<JoinTick()> join_tick_;  // set by idist::join while it runs
  int buffer_src_ = 0;                   // world rank whose buffers broadcast_buffers() copies
};

}  // namespace idist::detail
