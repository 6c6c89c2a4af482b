#pragma once
/// @file
/// auto_model, register_comm_hook and no_sync: ignite.distributed.auto_model for LibTorch modules,
/// with DistributedDataParallel's gradient synchronisation (the reducer in idist_torch: parameters
/// bucketed in reverse registration order, each bucket all-reduced by a communication hook as soon as
/// its gradients are in, overlapping the rest of backward; buckets rebuilt in gradient-ready order
/// after the first backward; the gradients averaged when backward() returns).

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/auto_model_options.hpp"
#include "idist/torch/comm_hook.hpp"

namespace idist {

namespace detail {

class Reducer;  // src/torch/reducer.hpp

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

/// auto_model's work on `module` (see auto_model()).
void adapt_model(const std::shared_ptr<torch::nn::Module>& module, const AutoModelOptions& opts);
/// The reducer auto_model attached to `module`, or null (serial, or not prepared).
std::shared_ptr<Reducer> find_reducer(const torch::nn::Module* module);
/// register_comm_hook on `module` (see register_comm_hook()).
void register_hook(const std::shared_ptr<torch::nn::Module>& module, CommHook hook);
/// The bucket sizes of `reducer` (null: none).
std::vector<std::size_t> bucket_bytes_of(const std::shared_ptr<Reducer>& reducer);

/// The reducer auto_model attached to `model`, or null (serial, or not prepared).
template <ModelHandle T>
std::shared_ptr<Reducer> reducer_of(const T& model) {
  auto m = module_of(model);
  return m ? find_reducer(m.get()) : nullptr;
}

}  // namespace detail

/// Adapts `model` for the current distributed configuration and returns it (the same object and
/// type: std::shared_ptr<Net>, torch::nn::Sequential, any TORCH_MODULE holder). Mirrors
/// ignite.distributed.auto_model:
/// - moves the model to idist::device() when some parameter or buffer is elsewhere;
/// - when the world size is > 1: with sync_bn replaces its BatchNorm modules by SyncBatchNorm,
///   checks that every rank has the same parameters and buffers, copies rank 0's parameters and
///   buffers to every rank, and attaches a gradient reducer (DistributedDataParallel's algorithm; see
///   the file comment) so that after each backward() the gradients are averaged across ranks.
///   no_sync() suspends it.
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
  detail::adapt_model(module, opts);
  return model;
}

/// Replaces the all-reduce of each gradient bucket of a model prepared by auto_model with `hook`
/// (DistributedDataParallel.register_comm_hook): from the next backward on, every bucket is handed
/// to the hook as an idist::GradBucket holding this rank's undivided gradients, and the idist::Work
/// the hook returns yields the averaged bucket (see CommHook). Built-in hooks: idist::comm_hooks
/// (allreduce, fp16_compress, bf16_compress, powersgd). Every rank must register an equivalent hook.
///
///     model = idist::auto_model(model);
///     idist::register_comm_hook(model, idist::comm_hooks::fp16_compress());
///
/// With world size 1 (no reducer, nothing to communicate) the hook is not used.
/// @throws ValueError for an empty hook, a second registration on the same model, or when the
///         world size is > 1 and the model did not go through auto_model.
template <detail::ModelHandle Model>
void register_comm_hook(const Model& model, CommHook hook) {
  detail::register_hook(detail::module_of(model), std::move(hook));
}

/// The size in bytes of each gradient bucket auto_model made for `model`, in launch order (what DDP
/// logs as its bucket sizes); empty when the model has none (world size 1, or not prepared by
/// auto_model).
template <detail::ModelHandle Model>
std::vector<std::size_t> gradient_bucket_bytes(const Model& model) {
  return detail::bucket_bytes_of(detail::reducer_of(model));
}

/// RAII guard of no_sync(): while it lives, backward() accumulates gradients locally without
/// communicating (DDP's no_sync context manager). Move-only.
class [[nodiscard]] NoSyncGuard {
 public:
  /// A guard that does nothing (serial runs).
  NoSyncGuard() = default;
  /// Suspends synchronisation on `reducer` (null: nothing) until destruction.
  explicit NoSyncGuard(std::shared_ptr<detail::Reducer> reducer);
  /// Restores the synchronisation the reducer had before.
  ~NoSyncGuard();
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
