// Which group rank owns each parameter of a gradient bucket (see bucket_owners.hpp).
#include "torch/zero/bucket_owners.hpp"

#include <fmt/format.h>

#include "idist/error.hpp"
#include "torch/comm/staging.hpp"

namespace idist::detail {

std::shared_ptr<const OwnerMap> make_owner_map(const std::vector<at::Tensor>& params, const std::vector<int>& owners) {
  auto map = std::make_shared<OwnerMap>();
  map->reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) map->emplace(params[i].unsafeGetTensorImpl(), owners[i]);
  return map;
}

bool BucketOwners::same_parameters(const GradBucket& bucket) const {
  const auto& params = bucket.parameters();
  if (ids.size() != params.size()) return false;
  for (std::size_t i = 0; i < params.size(); ++i)
    if (ids[i] != params[i].unsafeGetTensorImpl()) return false;
  return true;
}

BucketOwners bucket_owners(const GradBucket& bucket, const OwnerMap& owners, int group_size, std::string_view who) {
  const auto& params = bucket.parameters();
  BucketOwners plan;
  plan.counts.assign(std::size_t(group_size), 0);
  plan.ids.reserve(params.size());
  plan.owner.reserve(params.size());
  for (const at::Tensor& p : params) {
    const auto it = owners.find(p.unsafeGetTensorImpl());
    if (it == owners.end())
      throw ValueError(fmt::format(
          "{}: bucket {} holds a parameter of shape {} that the ZeroRedundancyOptimizer was not given; expected "
          "the optimizer to hold every parameter of the model that requires a gradient",
          who, bucket.index(), shape_str(p.sizes())));
    plan.ids.push_back(p.unsafeGetTensorImpl());
    plan.owner.push_back(it->second);
    plan.counts[std::size_t(it->second)] += std::size_t(p.numel());
  }
  return plan;
}

}  // namespace idist::detail
