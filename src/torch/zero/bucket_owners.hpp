#pragma once
// Which group rank owns each parameter of a gradient bucket: the plan both ZeRO hooks start from
// (stage 2's reduce-scatter hook and overlap_with_ddp's step hook), each bucket's parameters grouped
// by owner in group rank order.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <ATen/core/Tensor.h>

#include "idist/torch/comm_hook.hpp"

namespace idist::detail {

/// Parameter (its TensorImpl) -> owning group rank, made once per optimizer and shared by its hooks.
using OwnerMap = std::unordered_map<const void*, int>;

/// The map of `params` partitioned as `owners` (one group rank per parameter).
std::shared_ptr<const OwnerMap> make_owner_map(const std::vector<at::Tensor>& params, const std::vector<int>& owners);

/// One bucket's parameters by owner.
struct BucketOwners {
  std::vector<const void*> ids;     ///< TensorImpl of each parameter, bucket order
  std::vector<int> owner;           ///< owning group rank of each parameter, bucket order
  std::vector<std::size_t> counts;  ///< elements each group rank owns in the bucket

  /// Whether `bucket` still holds the parameters this plan was made for, in the same order (the
  /// bucket autotune and the rebuild in gradient-ready order regroup them in the first iterations).
  bool same_parameters(const GradBucket& bucket) const;

  /// Calls f(i, r, at) for each parameter i of the bucket grouped by owner r in group rank order
  /// (bucket order within an owner); `at` is the element offset of parameter i in that grouping.
  /// @returns the elements of the bucket.
  template <class F>
  std::int64_t for_each_by_owner(const GradBucket& bucket, F&& f) const {
    std::int64_t at = 0;
    const auto& params = bucket.parameters();
    for (int r = 0; r < int(counts.size()); ++r)
      for (std::size_t i = 0; i < params.size(); ++i) {
        if (owner[i] != r) continue;
        f(i, r, at);
        at += params[i].numel();
      }
    return at;
  }
};

/// The owners of `bucket`'s parameters over a group of `group_size` ranks.
/// @throws ValueError naming `who`, the bucket and the parameter's shape when a parameter of the
///         bucket is not in `owners` (an optimizer over part of the model).
BucketOwners bucket_owners(const GradBucket& bucket, const OwnerMap& owners, int group_size, std::string_view who);

}  // namespace idist::detail
