#pragma once
// ZeRO stage 2's communication hook (ZeroRedundancyOptimizer::reduce_scatter_hook): each bucket's
// gradients are reduce-scattered by owner instead of all-reduced, so a rank receives the average of
// the gradients it steps and nothing else.
#include <memory>

#include "idist/group.hpp"
#include "idist/torch/comm_hook.hpp"
#include "torch/zero/bucket_owners.hpp"

namespace idist::detail {

/// The hook over the parameters of `owners` (each one's group rank) over `group`, which holds every
/// rank of the world; its collectives go through a ShardComm of `group`.
/// @throws ValueError when this rank is not a member of `group`.
CommHook make_reduce_scatter_hook(std::shared_ptr<const OwnerMap> owners, const Group& group);

}  // namespace idist::detail
