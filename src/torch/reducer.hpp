#pragma once
/// @file
/// The gradient reducer behind auto_model: DistributedDataParallel's bucketed, overlapped
/// all-reduce of gradients, written against idist's non-blocking collectives.
///
/// How it works (the design of PyTorch's c10d Reducer):
/// - Parameters that require a gradient are grouped into buckets in reverse registration order
///   (gradients become ready roughly in that order during backward). A bucket holds parameters of
///   one dtype and device; it is closed once it reaches its cap: 1 MiB for the first bucket (or
///   bucket_cap_mb when smaller), bucket_cap_mb for the others. Unset, bucket_cap_mb is tuned: the
///   first synchronised backwards time a few caps and keep the fastest (reducer_autotune.cpp).
/// - Each bucket owns one flat, contiguous gradient buffer. With gradient_as_bucket_view (the
///   default) every parameter's .grad() becomes an alias of its slot after the first synchronised
///   backward, so autograd accumulates straight into the bucket and the gradients cost no extra
///   memory; otherwise the buckets are one extra copy of the gradients.
/// - A post hook on every parameter's gradient accumulator (AccumulateGrad) fires once the
///   parameter's .grad() is final for this backward; it divides the gradient by the world size
///   into its slot of the bucket (in place when .grad() already is the slot): the averaging is
///   folded into the bucket.
/// - When all gradients of a bucket are in, the bucket is handed to the communication hook, always in
///   bucket order so that every rank issues the same sequence; the hook returns the idist::Work of the
///   bucket's reduction (the one future of a bucket). The default hook is comm_hooks::allreduce()
///   (c10d's run_allreduce_hook): since the gradients entered divided, the Reducer hands the bucket
///   straight to its sum all-reduce, non-blocking. On a backend without asynchronous progress (mpi
///   on one node, where idist runs no progress thread) nothing would overlap anyway, so the default
///   hook all-reduces the bucket at once through the backend's blocking path: one bucket in flight
///   at a time bounds the backend's scratch memory (Open MPI's libnbc holds a buffer the size of each
///   non-blocking all-reduce), and the fastest call is used (MPI_Allreduce, the mpi default). mpi
///   across nodes has a progress thread, so its buckets fly while backward goes on, as on gloo.
/// - The first post hook of a backward queues an autograd final callback; it launches what is left,
///   waits for every bucket's Work in bucket order (copying a value it yields into the bucket) and
///   makes .grad() the averaged slot (or copies it back), so that the gradients are averaged when
///   backward() returns. Nothing is in flight afterwards, so the user's own collectives never
///   interleave with gradient buckets.
///
/// A communication hook registered by the user (register_comm_hook) replaces the default one; the
/// gradients then enter the buckets undivided (PyTorch's contract: the hook averages), unless the
/// hook is comm_hooks::allreduce() itself, which runs as the default does.
///
/// After the first synchronised backward the buckets are rebuilt in the order rank 0's gradients
/// became ready (DDP's rebuild_buckets; Options::rebuild_buckets), the order broadcast so that
/// every rank holds the same layout.
///
/// Differences from DDP: whether a backward synchronises is
/// decided when its first gradient is ready (DDP decides in forward), so no_sync() must cover the
/// backward() call; collectives issued by the user inside backward (custom autograd functions)
/// interleave with the buckets in gradient-ready order, which must then be the same on all ranks.
///
/// This header is the Reducer's surface inside idist_torch (auto_model, join and the tests use it); the
/// implementation (autograd hooks and final callbacks, which need LibTorch's internal autograd
/// headers) is reducer_impl.hpp.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "idist/torch/auto_model_options.hpp"
#include "idist/torch/comm_hook.hpp"

namespace idist::detail {

class ReducerImpl;  // src/torch/reducer_impl.hpp

/// Averages the gradients of one module's parameters across the ranks of the world during
/// backward, DistributedDataParallel's way (torch.nn.parallel.DistributedDataParallel and its
/// c10d Reducer; see the file comment). Created by auto_model for world size > 1; also usable
/// directly (with world size 1 it only exercises the machinery).
///
/// The parameters seen at construction are the ones synchronised: do not register, replace or
/// re-create parameters of the module afterwards, nor move them to another device or dtype (the
/// bucket buffers are allocated once, on the parameters' device, with their dtype).
///
/// Thread safety: every member but buckets(), bucket_bytes() and param_names() takes the
/// reducer's lock, which the autograd hooks take too.
class Reducer {
 public:
  /// auto_model's options: the bucket caps, find_unused_parameters, broadcast_buffers,
  /// gradient_as_bucket_view, static_graph and rebuild_buckets (sync_bn is auto_model's own step).
  using Options = AutoModelOptions;

  /// Builds the buckets and installs a post hook on the gradient accumulator of every parameter
  /// of `module` that requires a gradient (DDP's constructor). Communicates nothing: the
  /// collectives run during backward.
  /// @throws ValueError for a null module, a non-positive bucket cap, or a parameter dtype that
  ///         idist cannot reduce.
  static std::shared_ptr<Reducer> create(std::shared_ptr<torch::nn::Module> module, Options opts);

  /// Removes the hooks from the parameters' gradient accumulators (once no backward holds the
  /// reducer any more).
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  /// Whether the next backward synchronises (false inside no_sync()).
  bool require_sync() const;
  /// Turns synchronisation of the following backwards on or off (what NoSyncGuard does; DDP's
  /// require_backward_grad_sync).
  void set_require_sync(bool on);

  /// The bucket layout: indices into param_names(), in launch order.
  std::vector<std::vector<std::size_t>> buckets() const;
  /// Size of each bucket's flat buffer in bytes, in launch order.
  std::vector<std::size_t> bucket_bytes() const;
  /// Qualified names of the synchronised parameters, in registration order.
  const std::vector<std::string>& param_names() const noexcept;
  /// Number of backwards whose gradients were synchronised so far.
  std::size_t sync_count() const;
  /// The most bucket all-reduces in flight at once so far, counted at each launch (1 on backends
  /// without asynchronous progress; see the file comment).
  std::size_t peak_in_flight() const;
  /// Whether parameter `i`'s .grad() currently shares memory with its bucket slot (always false
  /// without gradient_as_bucket_view, true with it once a synchronised backward has run).
  /// `i` indexes param_names() and must be smaller than its size.
  bool gradient_in_bucket(std::size_t i) const;
  /// Replaces each bucket's all-reduce with `hook` from the next backward on (DDP's
  /// register_comm_hook). Gradients then enter the buckets undivided: the hook averages
  /// (comm_hooks::allreduce() runs as the default hook, gradients divided on entry).
  /// @throws ValueError for an empty hook, a second registration (DDP allows one), or a call during
  ///         a backward.
  void register_comm_hook(CommHook hook);
  /// The cap the buckets are built with now, MiB: Options::bucket_cap_mb when set; else the cap on
  /// trial while tuning_bucket_cap(), then the tuned one (the same on every rank).
  double bucket_cap_mb() const;
  /// Whether the first synchronised backwards are still trying bucket caps (Options::bucket_cap_mb unset).
  bool tuning_bucket_cap() const;
  /// For each bucket of the last synchronised backward, how many parameters' gradients were ready
  /// when its reduction was launched (param_names().size() for those launched by the final
  /// callback): how early each bucket left, the measure of overlap bucket rebuilding improves.
  std::vector<std::size_t> launch_positions() const;
  /// Whether the buckets were rebuilt in gradient-ready order (after the first synchronised
  /// backward).
  bool buckets_rebuilt() const;
  /// Buckets whose all-reduce the hooks launched during the last synchronised backward, before
  /// its final callback: the communication that overlapped the rest of the backward.
  std::size_t early_launches() const;

  // --- Join support (idist::join, idist/torch/join.hpp); unused otherwise. ---

  /// What a synchronised backward learns from join's per-iteration indicator: the divisor of the
  /// gradients (DDP under Join: the initial world size, or the number of ranks still active) and
  /// the world rank whose buffers are broadcast after the backward (the highest active rank).
  struct JoinTick {
    /// What each gradient is divided by (> 0).
    double divisor = 1.0;
    /// World rank whose buffers every rank receives after the backward.
    int buffer_src = 0;
  };
  /// Installs the function run at the start of every synchronised backward, before any bucket is
  /// reduced (join's indicator all-reduce; it may throw to fail the backward, e.g. for
  /// throw_on_early_termination), or removes it when empty. It is called with the reducer's lock
  /// held, so it must not call the reducer. While it is installed the returned divisor and buffer
  /// source are used; removing it restores the world size and rank 0.
  void set_join_tick(std::function<JoinTick()> tick);
  /// Whether a join tick is installed (a join is running).
  bool has_join_tick() const;
  /// The shadow of one synchronised backward for a rank that has joined (DDP's join hook,
  /// _match_all_reduce_for_bwd_pass): issues exactly the collectives a synchronised backward issues,
  /// in the same order and through the same calls, with zero contributions: one all-reduce of a
  /// zero-filled bucket per bucket, the used-parameter map when find_unused_parameters, and the
  /// buffer broadcast from world rank `buffer_src` when broadcast_buffers, and after the first
  /// backward the broadcast of the rebuilt bucket order. With a communication hook the zero buckets
  /// go through the hook, as in DDP. This rank's gradients are left untouched; its buffers receive
  /// buffer_src's.
  /// @throws ValueError when called during a backward; what the collectives raise.
  void shadow_backward(int buffer_src);

 private:
  explicit Reducer(std::shared_ptr<ReducerImpl> impl);
  // Shared: the autograd hooks and final callbacks hold weak references to it.
  std::shared_ptr<ReducerImpl> impl_;
};

}  // namespace idist::detail
