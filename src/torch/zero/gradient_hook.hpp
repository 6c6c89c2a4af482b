#pragma once
// ZeRO stage 2's communication hook (ZeroRedundancyOptimizer::reduce_scatter_hook): each bucket's
// gradients are reduce-scattered by owner instead of all-reduced, so a rank receives the average of
// the gradients it steps and nothing else.
#include <cstddef>
#include <vector>

#include <ATen/core/Tensor.h>

#include "idist/group.hpp"
#include "idist/torch/comm_hook.hpp"

namespace idist::detail {

/// The hook over `params` partitioned as `owners` (group ranks) over `group`, which holds every rank of
/// the world; its collectives go through a ShardComm of `group`.
/// @throws ValueError when this rank is not a member of `group`.
CommHook make_reduce_scatter_hook(const std::vector<at::Tensor>& params, const std::vector<int>& owners,
                                  const Group& group);

}  // namespace idist::detail
