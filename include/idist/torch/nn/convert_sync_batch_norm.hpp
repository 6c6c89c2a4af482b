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
/// directly, or put the BatchNorm in a Sequential. Compiled into idist_torch.

#include <cstddef>

#include <torch/nn/module.h>

#include "idist/group.hpp"

namespace idist::nn {

/// Replaces, in place, every BatchNorm1d / BatchNorm2d / BatchNorm3d of `module`'s tree by an
/// idist::nn::SyncBatchNorm over `group` that shares its parameters and buffers (same tensors) and
/// its options and training mode; returns how many were replaced. Mirrors
/// torch.nn.SyncBatchNorm.convert_sync_batchnorm, with C++'s limits (see the file comment for
/// which modules can be replaced). Parameter and buffer names are unchanged.
/// @throws ValueError, before changing anything, when `module` itself is a BatchNorm or some
///         BatchNorm of the tree cannot be replaced; the message names each one.
std::size_t convert_sync_batchnorm(torch::nn::Module& module, const Group& group = {});

}  // namespace idist::nn
