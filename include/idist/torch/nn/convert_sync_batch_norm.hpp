#pragma once
/// @file
/// idist::nn::convert_sync_batchnorm: replaces the BatchNorm1d/2d/3d modules of a module tree by
/// idist::nn::SyncBatchNorm in place (torch.nn.SyncBatchNorm.convert_sync_batchnorm, what
/// auto_model(model, {.sync_bn = true}) calls).
///
/// A C++ module cannot change the type of its members, so a BatchNorm is replaced only where the
/// replacement is what the forward pass will call:
/// - an entry of a torch::nn::Sequential (its module list and its registered child are both
///   replaced), of a torch::nn::ModuleList or of a torch::nn::ModuleDict (code that reaches the entry
///   through these containers must not cast it to a BatchNorm type: use `->forward` through
///   Sequential, or `as<idist::nn::SyncBatchNorm>()` / `ptr()`);
/// - a child registered with register_module that nothing else holds (the parent keeps no member
///   holder of it and reaches it through named_children() or children()): it is replaced with
///   replace_module.
/// Any other BatchNorm (typically a member `torch::nn::BatchNorm2d bn{nullptr}` of a user module, or
/// the root module itself) cannot be replaced: the conversion then raises ValueError naming every
/// such module, before changing anything. Build those modules with idist::nn::SyncBatchNorm
/// directly, or put the BatchNorm in a Sequential.

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include "idist/detail/format.hpp"
#include "idist/error.hpp"
#include "idist/group.hpp"
#include "idist/torch/nn/sync_batch_norm.hpp"

namespace idist::nn {

namespace detail {

/// The SyncBatchNorm replacing `m` (sharing its parameters and buffers), or null when `m` is no
/// BatchNorm1d/2d/3d.
inline std::shared_ptr<SyncBatchNormImpl> sync_replacement(const torch::nn::Module& m, const Group& group) {
  if (const auto* bn = m.as<torch::nn::BatchNorm1d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  if (const auto* bn = m.as<torch::nn::BatchNorm2d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  if (const auto* bn = m.as<torch::nn::BatchNorm3d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  return nullptr;
}

/// True for BatchNorm1d, BatchNorm2d and BatchNorm3d.
inline bool is_batch_norm(const torch::nn::Module& m) {
  return m.as<torch::nn::BatchNorm1d>() || m.as<torch::nn::BatchNorm2d>() || m.as<torch::nn::BatchNorm3d>();
}

/// Walks the tree below `parent` (qualified name `prefix`). With `apply` false it only lists the
/// BatchNorm modules that cannot be replaced in `blocked` and counts the others; with `apply` true
/// it replaces them.
inline std::size_t walk_batch_norms(torch::nn::Module& parent, const std::string& prefix, const Group& group,
                                    bool apply, std::vector<std::string>& blocked) {
  std::size_t count = 0;
  auto* seq = parent.as<torch::nn::Sequential>();
  auto* list = parent.as<torch::nn::ModuleList>();
  auto* dict = parent.as<torch::nn::ModuleDict>();
  // One snapshot of the children: each entry adds one owner to what the parent holds.
  const auto children = parent.named_children();
  for (const auto& item : children) {
    const std::string& name = item.key();
    const std::shared_ptr<torch::nn::Module>& child = item.value();
    const std::string qualified = prefix.empty() ? name : prefix + "." + name;
    if (!is_batch_norm(*child)) {
      count += walk_batch_norms(*child, qualified, group, apply, blocked);
      continue;
    }
    // Where the forward pass finds the child.
    std::ptrdiff_t seq_index = -1, list_index = -1;
    if (seq)
      for (std::size_t k = 0; k < seq->size(); ++k)
        if (seq->ptr(k).get() == child.get()) seq_index = std::ptrdiff_t(k);
    if (list)
      for (std::size_t k = 0; k < list->size(); ++k)
        if (list->ptr(k).get() == child.get()) list_index = std::ptrdiff_t(k);
    const bool in_dict = dict && dict->contains(name) && (*dict)[name].get() == child.get();
    // Owners: the parent's registry and our snapshot; one more is a member holder or a user handle.
    const bool only_registered = child.use_count() <= 2;
    if (seq_index < 0 && list_index < 0 && !in_dict && !only_registered) {
      blocked.push_back(qualified + " (" + child->name() + ", held outside the module tree, e.g. by a member of " +
                        parent.name() + ")");
      continue;
    }
    ++count;
    if (!apply) continue;
    std::shared_ptr<SyncBatchNormImpl> sync = sync_replacement(*child, group);
    if (seq_index >= 0) *(seq->begin() + seq_index) = torch::nn::AnyModule(sync);
    if (list_index >= 0) *(list->begin() + list_index) = sync;
    if (in_dict) {
      dict->update(std::vector<std::pair<std::string, std::shared_ptr<torch::nn::Module>>>{{name, sync}});
    } else {
      parent.replace_module(name, sync);
    }
  }
  return count;
}

}  // namespace detail

/// Replaces, in place, every BatchNorm1d / BatchNorm2d / BatchNorm3d of `module`'s tree by an
/// idist::nn::SyncBatchNorm over `group` that shares its parameters and buffers (same tensors) and
/// its options and training mode; returns how many were replaced. Mirrors
/// torch.nn.SyncBatchNorm.convert_sync_batchnorm, with C++'s limits (see the file comment for
/// which modules can be replaced). Parameter and buffer names are unchanged.
/// @throws ValueError, before changing anything, when `module` itself is a BatchNorm or some
///         BatchNorm of the tree cannot be replaced; the message names each one.
inline std::size_t convert_sync_batchnorm(torch::nn::Module& module, const Group& group = {}) {
  if (detail::is_batch_norm(module))
    throw ValueError(
        idist::detail::format_message("convert_sync_batchnorm: the model itself is a {}, which cannot be "
                                      "replaced in place; wrap it in a torch::nn::Sequential or use "
                                      "idist::nn::SyncBatchNorm directly",
                                      module.name()));
  std::vector<std::string> blocked;
  detail::walk_batch_norms(module, "", group, /*apply=*/false, blocked);
  if (!blocked.empty()) {
    std::string list;
    for (const auto& b : blocked) list += (list.empty() ? "" : "; ") + b;
    throw ValueError(
        idist::detail::format_message("convert_sync_batchnorm: {} BatchNorm module(s) cannot be replaced by "
                                      "SyncBatchNorm: {}",
                                      blocked.size(), list) +
        ". Only BatchNorm entries of Sequential / ModuleList / ModuleDict and registered children "
        "that no member holds can be replaced; build these with idist::nn::SyncBatchNorm, or hold "
        "them in a torch::nn::Sequential");
  }
  return detail::walk_batch_norms(module, "", group, /*apply=*/true, blocked);
}

}  // namespace idist::nn
