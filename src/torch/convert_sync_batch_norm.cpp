// convert_sync_batchnorm (idist/torch/nn/convert_sync_batch_norm.hpp): where a BatchNorm can be
// replaced, and the replacement.
#include "idist/torch/nn/convert_sync_batch_norm.hpp"

#include <memory>
#include <string>
#include <vector>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/any.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/torch/nn/sync_batch_norm.hpp"

namespace idist::nn {

namespace {

/// The SyncBatchNorm replacing `m` (sharing its parameters and buffers), or null when `m` is no
/// BatchNorm1d/2d/3d.
std::shared_ptr<SyncBatchNormImpl> sync_replacement(const torch::nn::Module& m, const Group& group) {
  if (const auto* bn = m.as<torch::nn::BatchNorm1d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  if (const auto* bn = m.as<torch::nn::BatchNorm2d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  if (const auto* bn = m.as<torch::nn::BatchNorm3d>()) return SyncBatchNormImpl::from_batch_norm(*bn, group);
  return nullptr;
}

/// True for BatchNorm1d, BatchNorm2d and BatchNorm3d.
bool is_batch_norm(const torch::nn::Module& m) {
  return m.as<torch::nn::BatchNorm1d>() || m.as<torch::nn::BatchNorm2d>() || m.as<torch::nn::BatchNorm3d>();
}

/// Walks the tree below `parent` (qualified name `prefix`). With `apply` false it only lists the
/// BatchNorm modules that cannot be replaced in `blocked` and counts the others; with `apply` true
/// it replaces them.
std::size_t walk_batch_norms(torch::nn::Module& parent, const std::string& prefix, const Group& group, bool apply,
                             std::vector<std::string>& blocked) {
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

}  // namespace

std::size_t convert_sync_batchnorm(torch::nn::Module& module, const Group& group) {
  if (is_batch_norm(module))
    throw ValueError(
        fmt::format("convert_sync_batchnorm: the model itself is a {}, which cannot be "
                    "replaced in place; wrap it in a torch::nn::Sequential or use "
                    "idist::nn::SyncBatchNorm directly",
                    module.name()));
  std::vector<std::string> blocked;
  walk_batch_norms(module, "", group, /*apply=*/false, blocked);
  if (!blocked.empty()) {
    std::string list;
    for (const auto& b : blocked) list += (list.empty() ? "" : "; ") + b;
    throw ValueError(fmt::format("convert_sync_batchnorm: {} BatchNorm module(s) cannot be replaced by "
                                 "SyncBatchNorm: {}",
                                 blocked.size(), list) +
                     ". Only BatchNorm entries of Sequential / ModuleList / ModuleDict and registered children "
                     "that no member holds can be replaced; build these with idist::nn::SyncBatchNorm, or hold "
                     "them in a torch::nn::Sequential");
  }
  return walk_batch_norms(module, "", group, /*apply=*/true, blocked);
}

}  // namespace idist::nn
