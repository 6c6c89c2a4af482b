#pragma once
/// @file
/// auto_model and no_sync: ignite.distributed.auto_model for LibTorch modules, with
/// DistributedDataParallel's gradient synchronisation (see idist/torch/reducer.hpp).

#include <algorithm>
#include <concepts>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/pimpl.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/logging.hpp"
#include "idist/torch/broadcast_coalesced.hpp"
#include "idist/torch/collectives.hpp"
#include "idist/torch/comm_hook.hpp"
#include "idist/torch/dtype.hpp"
#include "idist/torch/nn/convert_sync_batch_norm.hpp"
#include "idist/torch/reducer.hpp"

namespace idist {

/// Options of auto_model (the keyword arguments ignite forwards to DistributedDataParallel).
struct AutoModelOptions {
  /// ignite's sync_bn: with world size > 1, replace every BatchNorm1d/2d/3d of the model by
  /// idist::nn::SyncBatchNorm (batch statistics over all ranks) through
  /// idist::nn::convert_sync_batchnorm, which keeps the parameter and buffer tensors and names.
  /// BatchNorm entries of Sequential / ModuleList / ModuleDict and registered children that no
  /// member holds are replaced; a model with any other BatchNorm (a member holder of a user module,
  /// or the model itself) is rejected with a ValueError naming those modules, on every rank. A
  /// no-op when serial (as in ignite). With sync_bn = false, BatchNorm stays per-rank.
  bool sync_bn = false;
  /// Cap of a gradient bucket in MiB (DDP's bucket_cap_mb); the first bucket is capped at 1 MiB or
  /// this, whichever is smaller. Must be positive.
  double bucket_cap_mb = 25.0;
  /// Accept parameters that get no gradient in a backward (DDP's find_unused_parameters): they
  /// contribute zero, and a parameter no rank used keeps its gradient untouched. When false, such
  /// a backward fails with a ValueError naming the parameters.
  bool find_unused_parameters = false;
  /// Keep buffers (e.g. batch-norm running statistics) equal to rank 0's (DDP's broadcast_buffers).
  /// LibTorch has no forward hooks, so they are broadcast after each synchronised backward rather
  /// than before each forward: after every training step all ranks hold rank 0's buffers.
  bool broadcast_buffers = true;
  /// Make each parameter's .grad() share memory with its slot of the gradient bucket (DDP's
  /// gradient_as_bucket_view), so the buckets cost no memory beyond the gradients and nothing is
  /// copied back after the all-reduce. idist defaults to true where DDP defaults to false: the
  /// aliases carry no autograd view metadata, so LibTorch's zero_grad() and detach_() work on them
  /// as on any gradient, and gradient values are identical either way. Set false to give the
  /// gradients storage of their own (the buckets are then one extra copy of the gradients).
  bool gradient_as_bucket_view = true;
  /// The parameters that receive a gradient are the same in every iteration (DDP's static_graph):
  /// the first backward finds the unused ones, later backwards treat them as ready at once (their
  /// buckets need not wait for the end of backward) and skip the used-parameter all-reduce. A
  /// parameter that changes from unused to used fails the backward with ValueError.
  bool static_graph = false;
  /// After the first backward, rebuild the gradient buckets in the order rank 0's gradients became
  /// ready (DDP does so always): a model whose registration order differs from its execution
  /// order then overlaps its all-reduces with backward. false keeps reverse registration order.
  bool rebuild_buckets = true;
};

namespace detail {

/// A model handle auto_model accepts: std::shared_ptr<M> with M a torch::nn::Module, or a
/// torch::nn::ModuleHolder (torch::nn::Linear, torch::nn::Sequential, TORCH_MODULE types).
template <class T>
concept ModuleHolderType = std::is_base_of_v<torch::detail::ModuleHolderIndicator, T>;

template <class T>
struct is_module_shared_ptr : std::false_type {};
template <class M>
struct is_module_shared_ptr<std::shared_ptr<M>> : std::bool_constant<std::is_base_of_v<torch::nn::Module, M>> {};

template <class T>
concept ModelHandle = ModuleHolderType<T> || is_module_shared_ptr<T>::value;

/// The torch::nn::Module behind a handle (null for an empty holder / pointer).
template <ModelHandle T>
std::shared_ptr<torch::nn::Module> module_of(const T& model) {
  if constexpr (ModuleHolderType<T>) {
    if (model.is_empty()) return nullptr;
    return std::static_pointer_cast<torch::nn::Module>(model.ptr());
  } else {
    return std::static_pointer_cast<torch::nn::Module>(model);
  }
}

/// The reducers of the models auto_model prepared, keyed by module, so that auto_model can return
/// the user's own type. An entry whose module has been destroyed is dropped (releasing the
/// reducer's gradient buffers) the next time the registry is used.
class ReducerRegistry {
 public:
  /// Registers `reducer` for `module`, replacing the reducer of an earlier auto_model call.
  void add(const std::shared_ptr<torch::nn::Module>& module, std::shared_ptr<Reducer> reducer) {
    std::lock_guard lock(mutex_);
    prune();
    entries_[module.get()] = Entry{module, std::move(reducer)};
  }
  /// The reducer of `module`, or null.
  std::shared_ptr<Reducer> find(const torch::nn::Module* module) {
    std::lock_guard lock(mutex_);
    prune();
    auto it = entries_.find(module);
    return it == entries_.end() ? nullptr : it->second.reducer;
  }
  /// Drops the reducer of `module` (its hooks are removed).
  void remove(const torch::nn::Module* module) {
    std::lock_guard lock(mutex_);
    entries_.erase(module);
    prune();
  }

 private:
  struct Entry {
    std::weak_ptr<torch::nn::Module> module;
    std::shared_ptr<Reducer> reducer;
  };
  void prune() {
    std::erase_if(entries_, [](const auto& kv) { return kv.second.module.expired(); });
  }
  std::mutex mutex_;
  std::map<const torch::nn::Module*, Entry> entries_;
};

/// The process-wide registry.
inline ReducerRegistry& reducer_registry() {
  static ReducerRegistry registry;
  return registry;
}

/// The reducer auto_model attached to `model`, or null (serial, or not prepared).
template <ModelHandle T>
std::shared_ptr<Reducer> reducer_of(const T& model) {
  auto m = module_of(model);
  return m ? reducer_registry().find(m.get()) : nullptr;
}

/// auto_model's sync_bn step: converts the BatchNorm modules of `module` to SyncBatchNorm on every
/// rank (ignite: nn.SyncBatchNorm.convert_sync_batchnorm).
/// @throws ValueError on every rank when some rank cannot convert its model (that rank's message
///         names the modules; the others name the rank).
inline void convert_batch_norms(torch::nn::Module& module) {
  std::string error;
  std::size_t converted = 0;
  try {
    converted = nn::convert_sync_batchnorm(module);
  } catch (const ValueError& e) {
    error = format_message("auto_model: sync_bn=true, but {}", e.what());
  }
  const int bad = all_reduce(error.empty() ? -1 : get_rank(), ReduceOp::Max);
  if (!error.empty()) throw ValueError(error);
  if (bad >= 0)
    throw ValueError(format_message(
        "auto_model: sync_bn=true, but rank {} could not convert its BatchNorm modules to SyncBatchNorm (see that "
        "rank's error)",
        bad));
  if (converted > 0)
    log_info("distributed.auto.auto_model",
             format_message("Convert batch norm to sync batch norm ({} module(s))", converted));
}

/// One line per parameter and buffer: "name dtype [sizes]", for comparing models across ranks.
inline std::vector<std::string> module_signature(const torch::nn::Module& module) {
  std::vector<std::string> lines;
  for (const auto& p : module.named_parameters(true))
    lines.push_back(format_message("parameter {} {} {}", p.key(), c10::toString(p.value().scalar_type()),
                                   shape_str(p.value().sizes())));
  for (const auto& b : module.named_buffers(true))
    lines.push_back(format_message("buffer {} {} {}", b.key(), c10::toString(b.value().scalar_type()),
                                   shape_str(b.value().sizes())));
  return lines;
}

/// Checks that every rank has the same parameters and buffers as rank 0 (DDP's
/// _verify_param_shape_across_processes).
/// @throws ValueError on every rank when some rank's model differs.
inline void verify_same_model(const torch::nn::Module& module) {
  const std::vector<std::string> mine = module_signature(module);
  std::string text;
  for (const auto& l : mine) text += l + "\n";
  const std::string ref = broadcast(text, 0);
  std::string error;
  if (ref != text) {
    std::vector<std::string> theirs;
    std::size_t start = 0;
    for (std::size_t nl; (nl = ref.find('\n', start)) != std::string::npos; start = nl + 1)
      theirs.push_back(ref.substr(start, nl - start));
    std::size_t k = 0;
    while (k < mine.size() && k < theirs.size() && mine[k] == theirs[k]) ++k;
    error = format_message(
        "auto_model: the model on rank {} differs from rank 0's: entry {} is '{}' here but '{}' on rank 0", get_rank(),
        k, k < mine.size() ? mine[k] : std::string("<none>"), k < theirs.size() ? theirs[k] : std::string("<none>"));
  }
  const int bad = all_reduce(error.empty() ? -1 : get_rank(), ReduceOp::Max);
  if (!error.empty()) throw ValueError(error);
  if (bad >= 0)
    throw ValueError(format_message(
        "auto_model: the model on rank {} differs from rank 0's (parameters or buffers; see that rank's error)", bad));
}

/// Copies rank 0's parameters and buffers to every rank, one broadcast per dtype and device.
inline void broadcast_module_states(const torch::nn::Module& module) {
  std::vector<at::Tensor> states = module.parameters(true);
  for (const auto& b : module.buffers(true)) states.push_back(b);
  broadcast_coalesced(states, 0);
}

}  // namespace detail

/// Adapts `model` for the current distributed configuration and returns it (the same object and
/// type: std::shared_ptr<Net>, torch::nn::Sequential, any TORCH_MODULE holder). Mirrors
/// ignite.distributed.auto_model:
/// - moves the model to idist::device() when some parameter or buffer is elsewhere;
/// - when the world size is > 1: checks that every rank has the same parameters and buffers,
///   copies rank 0's parameters and buffers to every rank, and attaches a gradient reducer
///   (DistributedDataParallel's algorithm: see idist/torch/reducer.hpp) so that after each
///   backward() the gradients are averaged across ranks. no_sync() suspends it.
///
/// The returned model must be used as is: do not register, replace or re-create its parameters
/// afterwards, nor move it to another device or dtype (the gradient buckets stay where they were
/// made); call auto_model again instead. Calling auto_model again on the same model replaces
/// its reducer. Every rank must call it (it communicates).
/// @throws ValueError for an empty model, a non-positive bucket_cap_mb, a parameter dtype idist
///         cannot reduce, sync_bn with a BatchNorm that cannot be replaced (world size > 1, on every
///         rank; see AutoModelOptions::sync_bn), or models that differ between ranks (on every rank).
template <detail::ModelHandle Model>
Model auto_model(Model model, const AutoModelOptions& opts = {}) {
  const std::shared_ptr<torch::nn::Module> module = detail::module_of(model);
  if (!module) throw ValueError("auto_model: model is empty (null module); expected a constructed module");
  if (!(opts.bucket_cap_mb > 0))
    throw ValueError(
        detail::format_message("auto_model: bucket_cap_mb should be positive, but given {}", opts.bucket_cap_mb));

  const c10::Device dev = to_torch_device(device());
  bool on_device = true;
  for (const auto& p : module->parameters(true)) on_device = on_device && p.device() == dev;
  for (const auto& b : module->buffers(true)) on_device = on_device && (!b.defined() || b.device() == dev);
  if (!on_device) module->to(dev);

  if (get_world_size() > 1) {
    if (opts.sync_bn) detail::convert_batch_norms(*module);
    detail::verify_same_model(*module);
    detail::broadcast_module_states(*module);
    detail::Reducer::Options ropts;
    ropts.bucket_cap_mb = opts.bucket_cap_mb;
    ropts.gradient_as_bucket_view = opts.gradient_as_bucket_view;
    ropts.static_graph = opts.static_graph;
    ropts.rebuild_buckets = opts.rebuild_buckets;
    ropts.find_unused_parameters = opts.find_unused_parameters;
    ropts.broadcast_buffers = opts.broadcast_buffers;
    detail::reducer_registry().add(module, detail::Reducer::create(module, ropts));
  }
  return model;
}

/// Replaces the all-reduce of each gradient bucket of a model prepared by auto_model with `hook`
/// (DistributedDataParallel.register_comm_hook): from the next backward on, every bucket is handed
/// to the hook as an idist::GradBucket holding this rank's undivided gradients, and the idist::Work the
/// hook returns yields the averaged bucket (see CommHook). Built-in hooks: idist::comm_hooks (allreduce,
/// fp16_compress, bf16_compress, powersgd). Every rank must register an equivalent hook.
///
///     model = idist::auto_model(model);
///     idist::register_comm_hook(model, idist::comm_hooks::fp16_compress());
///
/// With world size 1 (no reducer, nothing to communicate) the hook is not used.
/// @throws ValueError for an empty hook, a second registration on the same model, or when the
///         world size is > 1 and the model did not go through auto_model.
template <detail::ModelHandle Model>
void register_comm_hook(const Model& model, CommHook hook) {
  auto reducer = detail::reducer_of(model);
  if (!hook) throw ValueError("register_comm_hook: the hook is empty; expected a callable");
  if (!reducer) {
    if (get_world_size() > 1)
      throw ValueError(
          "register_comm_hook: the model was not prepared by idist::auto_model, so it has no gradient buckets to hook");
    return;
  }
  reducer->register_comm_hook(std::move(hook));
}

/// RAII guard of no_sync(): while it lives, backward() accumulates gradients locally without
/// communicating (DDP's no_sync context manager). Move-only.
class [[nodiscard]] NoSyncGuard {
 public:
  /// A guard that does nothing (serial runs).
  NoSyncGuard() = default;
  /// Suspends synchronisation on `reducer` until destruction.
  explicit NoSyncGuard(std::shared_ptr<detail::Reducer> reducer) : reducer_(std::move(reducer)) {
    if (reducer_) {
      previous_ = reducer_->require_sync();
      reducer_->set_require_sync(false);
    }
  }
  ~NoSyncGuard() {
    if (reducer_) reducer_->set_require_sync(previous_);
  }
  /// Takes over `other`'s restore duty (no_sync() returns the guard by value).
  NoSyncGuard(NoSyncGuard&& other) noexcept
      : reducer_(std::exchange(other.reducer_, nullptr)), previous_(other.previous_) {}
  NoSyncGuard& operator=(NoSyncGuard&&) = delete;
  NoSyncGuard(const NoSyncGuard&) = delete;
  NoSyncGuard& operator=(const NoSyncGuard&) = delete;

 private:
  std::shared_ptr<detail::Reducer> reducer_;
  bool previous_ = true;
};

/// Suspends gradient synchronisation of a model prepared by auto_model while the returned guard
/// lives, to accumulate gradients locally over micro-batches; the first backward after the guard
/// ends averages the accumulated gradients. Mirrors DistributedDataParallel.no_sync():
///
///     {
///       auto guard = idist::no_sync(model);
///       loss_of(micro_batch_1).backward();   // local accumulation only
///     }
///     loss_of(micro_batch_2).backward();     // averages the sum of both
///
/// The decision is taken when a backward starts, so the guard must cover the backward() calls.
/// With world size 1 it does nothing.
/// @throws ValueError when the world size is > 1 and the model did not go through auto_model.
template <detail::ModelHandle Model>
NoSyncGuard no_sync(const Model& model) {
  auto reducer = detail::reducer_of(model);
  if (!reducer && get_world_size() > 1)
    throw ValueError("no_sync: the model was not prepared by idist::auto_model, so its gradients are not synchronised");
  return NoSyncGuard(std::move(reducer));
}

}  // namespace idist
