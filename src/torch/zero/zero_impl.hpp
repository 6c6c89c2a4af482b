#pragma once
// The state behind idist::ZeroRedundancyOptimizer (include/idist/torch/zero.hpp).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include "idist/torch/zero.hpp"
#include "torch/zero/bucket_owners.hpp"
#include "torch/zero/shard_comm.hpp"
#include "torch/zero/shard_layout.hpp"
#include "torch/zero/step_hook.hpp"

namespace idist::detail {

class ZeroImpl {
 public:
  /// Checks the arguments with the other members, partitions, builds the local optimizer and the
  /// layout (see the public constructor for the errors).
  ZeroImpl(std::vector<at::Tensor> params, const ZeroRedundancyOptimizer::Factory& factory,
           ZeroRedundancyOptimizerOptions options);
  /// Tells a step hook that outlives the optimizer that there is nothing left to step.
  ~ZeroImpl();
  ZeroImpl(const ZeroImpl&) = delete;
  ZeroImpl& operator=(const ZeroImpl&) = delete;

  /// Before the local step: follows a change of the parameters' trainability.
  void prepare_step();
  /// After the local step: every member's updated shard reaches every member.
  void publish();
  /// `owners` by parameter, for the hooks: made on the first call, then shared.
  std::shared_ptr<const OwnerMap> owner_map();
  /// The global index of each of the local optimizer's parameters, in its parameter-group order.
  std::vector<std::int64_t> local_order() const;

  std::vector<at::Tensor> params;
  std::vector<int> owners;
  ShardComm comm;
  std::unique_ptr<torch::optim::Optimizer> local;
  std::optional<ShardLayout> layout;  // only with more than one member, without overlap_with_ddp
  /// overlap_with_ddp with more than one member: what the step hook steps (the hook shares it).
  std::shared_ptr<ZeroStepTarget> step_target;
  std::shared_ptr<const OwnerMap> owner_map_;  // owner_map()'s
  /// Each member's local optimizer archive (state_archive.hpp), on the member that consolidated.
  std::vector<std::string> consolidated;
};

}  // namespace idist::detail
