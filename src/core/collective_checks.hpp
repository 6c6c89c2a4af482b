#pragma once
// The argument checks of the front door (ComputationModel), shared by every backend: what a rank
// passed is checked the same way, in the same words, on serial, mpi, gloo and nccl. Each throws
// ValueError naming the operation, what was given and what was expected.
#include <chrono>
#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "idist/group.hpp"
#include "idist/op_type.hpp"
#include "idist/process_group.hpp"
#include "idist/types.hpp"

namespace idist::core {

/// Throws ValueError naming `backend`, `op`, the argument `arg` and its device.
[[noreturn]] void throw_not_host(std::string_view backend, OpType op, std::string_view arg, const Device& device);

/// For backends that communicate host memory (mpi, gloo): `device` must be the CPU.
/// @throws ValueError otherwise (through throw_not_host).
inline void check_host_buffer(std::string_view backend, OpType op, std::string_view arg, const Device& device) {
  if (device.type != DeviceType::CPU) [[unlikely]]
    throw_not_host(backend, op, arg, device);
}

/// The ranks of a group given as a list, checked against the world size and sorted.
/// @throws ValueError for an empty list, a duplicate or a rank outside [0, world_size).
std::vector<int> validated_ranks(const Group& group, int world_size);

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

/// reduce_scatter with lengths by rank: `counts` has one entry per group rank, in holds sum(counts)
/// elements, out holds counts[my_group_rank], both of one dtype.
/// @throws ValueError naming the first condition that fails.
void check_reduce_scatter_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                 std::size_t group_size, int my_group_rank);

/// The position of world rank `src` in `group`: the root within the group's communicator.
/// @throws ValueError naming `op`, `src` and the group when src is not a member.
int root_in_group(OpType op, int src, const ProcessGroup& group);

/// Throws the ValueError of check_world_root().
[[noreturn]] void throw_bad_world_root(OpType op, int src, int world_size);

/// The root of `op` is a world rank: 0 <= src < world_size.
/// @throws ValueError naming `op`, `src` and the world size otherwise.
inline void check_world_root(OpType op, int src, int world_size) {
  if (src < 0 || src >= world_size) [[unlikely]]
    throw_bad_world_root(op, src, world_size);
}

/// The world rank `value` given as argument `arg` ("dst", "src") of `op`: 0 <= value < world_size.
/// @throws ValueError naming `op`, `arg`, the value and the range otherwise.
void check_world_rank(OpType op, std::string_view arg, int value, int world_size);

/// The position of world rank `value` (argument `arg` of `op`) in `group`.
/// @throws ValueError naming `op`, `arg`, the value and the group when it is not a member.
int rank_in_group(OpType op, std::string_view arg, int value, const ProcessGroup& group);

/// A rooted gathering or scattering: `whole` (argument `whole_arg`) holds `part.count * group_size`
/// elements of part's dtype.
/// @throws ValueError naming the dtypes or the counts.
void check_blocks(OpType op, const ConstBuffer& part, std::string_view part_arg, const ConstBuffer& whole,
                  std::string_view whole_arg, std::size_t group_size);

/// all_to_all: same dtype, out.count == in.count, and in.count a multiple of `group_size`.
/// @throws ValueError naming the first condition that fails.
void check_all_to_all_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size);

/// all_to_all with split sizes: one entry per group rank in each list, in.count == sum(in_counts),
/// out.count == sum(out_counts), same dtype.
/// @throws ValueError naming the first condition that fails.
void check_all_to_all_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> out_counts,
                             std::span<const std::size_t> in_counts, std::size_t group_size);

/// The peer of a send or recv (argument `arg`): a world rank other than `my_rank`; `tag` >= 0.
/// @throws ValueError naming `op`, the argument and what was expected.
void check_peer(OpType op, std::string_view arg, int peer, int my_rank, int world_size, int tag);

/// @throws ValueError naming `op` unless `timeout` is positive.
void check_positive_timeout(OpType op, std::chrono::milliseconds timeout);

}  // namespace idist::core
