#pragma once
// Argument checks of the nccl collectives that need no device (pure): devices, counts, roots.
#include <cstddef>
#include <span>
#include <string_view>

#include "idist/group.hpp"
#include "idist/types.hpp"

namespace idist::nccl_backend {

/// Throws ValueError when `buf` is marked as CUDA memory of a device other than `mine`, naming the
/// collective `op`, the argument `arg` and both devices. Host buffers (device cpu) are accepted:
/// the backend stages them through device memory.
void check_buffer_device(std::string_view op, std::string_view arg, const Device& buf, const Device& mine);

/// Throws ValueError unless `out` has `in.count * group_size` elements of in's dtype.
void check_all_gather_args(const ConstBuffer& in, const Buffer& out, int group_size);

/// Throws ValueError unless `counts` has one entry per group rank, counts[my_group_rank] equals
/// in.count, out holds sum(counts) elements and in / out share a dtype.
void check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                             int group_size, int my_group_rank);

/// Position of world rank `src` in the ascending `group_ranks`, i.e. NCCL's root for a broadcast.
/// @throws ValueError naming `src` and `group` when src is not a member.
int root_in_group(int src, std::span<const int> group_ranks, const Group& group);

}  // namespace idist::nccl_backend
