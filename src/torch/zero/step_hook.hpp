#pragma once
// ZeroRedundancyOptimizer's step inside auto_model's backward (overlap_with_ddp): a communication
// hook that wraps another, steps each bucket's owned parameters once the bucket is reduced, and
// all-gathers them while the rest of the backward's communication is in flight.
#include <cstdint>
#include <memory>
#include <utility>

#include <torch/optim/optimizer.h>

#include "idist/torch/comm_hook.hpp"
#include "torch/zero/bucket_owners.hpp"
#include "torch/zero/shard_comm.hpp"

namespace idist::detail {

/// What the hook needs of its optimizer. Shared, so that a hook kept after the optimizer is gone
/// raises instead of stepping freed state: the optimizer clears `local` and `options` when it dies.
struct ZeroStepTarget {
  explicit ZeroStepTarget(ShardComm c) : comm(std::move(c)) {}

  ShardComm comm;                                           // the optimizer's group
  torch::optim::Optimizer* local = nullptr;                 // this rank's optimizer over its shard
  const torch::optim::OptimizerOptions* options = nullptr;  // the exposed group's options (LR schedules)
  std::shared_ptr<const OwnerMap> owners;                   // the optimizer's partition
  /// Backwards whose hook finished its steps since ZeroRedundancyOptimizer::step() last looked.
  std::uint64_t stepped_backwards = 0;
};

/// The hook of hook_with_zero_step (`interleaved` false: every bucket is stepped once the backward's
/// last bucket is launched) and hook_with_zero_step_interleaved (`interleaved` true: bucket k is
/// stepped when bucket k + 1 is launched, so the steps run between the backward's computations).
CommHook make_zero_step_hook(CommHook inner, std::shared_ptr<ZeroStepTarget> target, bool interleaved);

}  // namespace idist::detail
