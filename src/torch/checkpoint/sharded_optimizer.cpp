#include "torch/checkpoint/sharded_optimizer.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "idist/error.hpp"
#include "idist/torch/zero.hpp"

namespace idist::checkpoint {

void save_optimizer_for(torch::optim::Optimizer& optimizer, torch::serialize::OutputArchive& archive, int saving_rank) {
  const auto* zero = dynamic_cast<const ZeroRedundancyOptimizer*>(&optimizer);
  if (!zero) return optimizer.save(archive);
  const Group& group = zero->group();
  if (group.is_world()) return zero->save(archive, saving_rank);
  std::vector<int> members = group.ranks();
  std::sort(members.begin(), members.end());  // a member's group rank is its position in ascending order
  const auto it = std::find(members.begin(), members.end(), saving_rank);
  if (it == members.end())
    throw ValueError(fmt::format(
        "the rank that saves (save_on_rank {}) is not a member of the ZeroRedundancyOptimizer's group {}, which "
        "can gather its state only on a member: save on a member's rank, or shard over a group that includes it",
        saving_rank, group.str()));
  zero->save(archive, int(it - members.begin()));
}

}  // namespace idist::checkpoint
