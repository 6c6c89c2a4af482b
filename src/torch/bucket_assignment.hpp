#pragma once
/// @file
/// DDP's bucket assignment, the layout rule of the gradient Reducer (idist/torch/reducer.hpp):
/// pure functions of sizes and keys, compiled into idist_torch and exposed for tests.

#include <cstddef>
#include <string>
#include <vector>

namespace idist::detail {

/// DDP's bucket assignment (torch.distributed's _compute_bucket_assignment_by_size). Parameters
/// are visited in reverse index order (last registered first); `bytes[i]` is parameter i's
/// gradient size in bytes and `keys[i]` its dtype / device, which a bucket never mixes. A bucket
/// closes once its size reaches its cap (`first_cap` bytes for the first bucket of each key, `cap`
/// bytes afterwards). Returns the buckets as lists of parameter indices, in the order their first
/// parameter was visited.
/// @throws ValueError when bytes and keys differ in length.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<std::size_t>& bytes,
                                                     const std::vector<std::string>& keys, std::size_t first_cap,
                                                     std::size_t cap);

/// assign_buckets visiting the parameters in `order` (a permutation of 0..n-1) instead of reverse
/// index order: DDP's rebuilt buckets, with `order` the order gradients became ready.
/// @throws ValueError when bytes and keys differ in length or order is not a permutation of them.
std::vector<std::vector<std::size_t>> assign_buckets_in_order(const std::vector<std::size_t>& order,
                                                              const std::vector<std::size_t>& bytes,
                                                              const std::vector<std::string>& keys,
                                                              std::size_t first_cap, std::size_t cap);

}  // namespace idist::detail
