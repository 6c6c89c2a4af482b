#pragma once
/// @file
/// Broadcast of many tensors in few messages, shared by auto_model (initial states), join and the
/// gradient Reducer (buffers). Compiled into idist_torch.

#include <vector>

#include <ATen/core/Tensor.h>

namespace idist::detail {

/// Broadcasts `tensors` from world rank `src` in place, one broadcast per dtype and device (the
/// tensors of a group are packed into one flat buffer and unpacked after; c10d's
/// _broadcast_coalesced). Every rank passes the same list of shapes and dtypes; undefined and
/// empty tensors are skipped. No autograd operation is recorded.
/// @throws what idist::broadcast raises.
void broadcast_coalesced(const std::vector<at::Tensor>& tensors, int src);

}  // namespace idist::detail
