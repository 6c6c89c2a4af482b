#pragma once
// Argument checks of the collectives that every backend shares: what a rank passed is checked the
// same way, in the same words, on serial, mpi, gloo and nccl. Each throws ValueError naming the
// collective, what was given and what was expected.
#include <cstddef>
#include <span>
#include <string_view>

#include "idist/group.hpp"
#include "idist/types.hpp"

namespace idist::core {

/// Throws ValueError naming `backend`, `op`, the argument `arg` and its device.
[[noreturn]] void throw_not_host(std::string_view backend, std::string_view op, std::string_view arg,
                                 const Device& device);

/// For backends that communicate host memory (mpi, gloo): `device` must be the CPU.
/// @throws ValueError otherwise (through throw_not_host).
inline void check_host_buffer(std::string_view backend, std::string_view op, std::string_view arg,
                              const Device& device) {
  if (device.type != DeviceType::CPU) [[unlikely]]
    throw_not_host(backend, op, arg, device);
}

/// Throws ValueError: rank `rank` is not a member of `group`, named in collective `op`.
[[noreturn]] void throw_not_member(std::string_view op, int rank, const Group& group);

/// Throws the ValueError of check_all_gather_args() for these arguments.
[[noreturn]] void throw_bad_all_gather_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size);

/// all_gather: `out` holds `in.count * group_size` elements of in's dtype.
/// @throws ValueError naming the dtypes or the counts.
inline void check_all_gather_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size) {
  if (in.dtype != out.dtype || out.count != in.count * group_size) [[unlikely]]
    throw_bad_all_gather_args(in, out, group_size);
}

/// all_gather with lengths by rank: `counts` has one entry per group rank, counts[my_group_rank]
/// equals in.count, out holds sum(counts) elements of in's dtype. Returns sum(counts).
/// @throws ValueError naming the first condition that fails.
std::size_t check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                    std::size_t group_size, int my_group_rank);

/// broadcast: the position of world rank `src` in `group_ranks` (ascending), i.e. the root within
/// the group's communicator.
/// @throws ValueError naming `src` and `group` when src is not a member.
int root_in_group(int src, std::span<const int> group_ranks, const Group& group);

/// Throws the ValueError of check_world_root().
[[noreturn]] void throw_bad_world_root(int src, int world_size);

/// broadcast on the world group: 0 <= src < world_size.
/// @throws ValueError naming `src` and the world size otherwise.
inline void check_world_root(int src, int world_size) {
  if (src < 0 || src >= world_size) [[unlikely]]
    throw_bad_world_root(src, world_size);
}

}  // namespace idist::core
