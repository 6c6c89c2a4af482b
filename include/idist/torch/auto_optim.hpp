#pragma once
/// @file
/// auto_optim: ignite.distributed.auto_optim for LibTorch optimizers.

#include <concepts>
#include <memory>
#include <type_traits>
#include <utility>

#include <torch/optim/optimizer.h>

namespace idist {

namespace detail {

/// A torch::optim optimizer, or a shared pointer to one.
template <class T>
concept OptimizerLike = std::derived_from<std::remove_cvref_t<T>, torch::optim::Optimizer> ||
    requires(const std::remove_cvref_t<T>& p) {
  { p.get() } -> std::convertible_to<const torch::optim::Optimizer*>;
};

}  // namespace detail

/// Adapts `optimizer` for the current distributed configuration. Mirrors
/// ignite.distributed.auto_optim: for the serial, mpi, gloo and nccl configurations the gradients
/// are already averaged by auto_model, so the optimizer is returned unchanged (the call exists so
/// that programs keep ignite's shape and later backends can wrap it). An lvalue is returned by
/// reference, a temporary by value:
///
///     torch::optim::SGD sgd(model->parameters(), 0.01);
///     auto& opt = idist::auto_optim(sgd);
///     auto opt2 = idist::auto_optim(torch::optim::SGD(model->parameters(), 0.01));
template <detail::OptimizerLike Optimizer>
Optimizer& auto_optim(Optimizer& optimizer) {
  return optimizer;
}

/// auto_optim of a temporary optimizer (or of a shared pointer to one): returns it by value.
template <detail::OptimizerLike Optimizer>
requires(!std::is_lvalue_reference_v<Optimizer>) Optimizer auto_optim(Optimizer&& optimizer) {
  return std::move(optimizer);
}

}  // namespace idist
