#include "core/collective_checks.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::core {

void throw_not_host(std::string_view backend, OpType op, std::string_view arg, const Device& device) {
  throw ValueError(
      fmt::format("{}: the {} backend communicates host memory, but {} is on {}; expected a cpu buffer "
                  "(copy it to the host first)",
                  to_string(op), backend, arg, device.str()));
}

std::vector<int> validated_ranks(const Group& group, int world_size) {
  std::vector<int> ranks = group.ranks();
  for (int r : ranks)
    if (r < 0 || r >= world_size)
      throw ValueError(
          fmt::format("group {}: rank {} is outside [0, {}) (world size {})", group.str(), r, world_size, world_size));
  std::sort(ranks.begin(), ranks.end());
  if (std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end())
    throw ValueError(fmt::format("group {}: ranks must be distinct", group.str()));
  return ranks;
}

namespace {
void check_same_dtype(OpType op, const ConstBuffer& in, const Buffer& out) {
  if (in.dtype != out.dtype)
    throw ValueError(fmt::format("{}: out has element type {} but in has {}; expected the same element type",
                                 to_string(op), to_string(out.dtype), to_string(in.dtype)));
}
}  // namespace

void throw_bad_all_gather_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size) {
  check_same_dtype(OpType::AllGather, in, out);
  const std::size_t expected = in.count * group_size;
  throw ValueError(fmt::format("{}: out has {} elements, expected in.count * group size = {} * {} = {}",
                               to_string(OpType::AllGather), out.count, in.count, group_size, expected));
}

namespace {
// The checks of a collective whose blocks differ in length by rank: this rank's block (`part`,
// argument `part_arg`, which this rank `verb`s) has counts[my rank] elements, all of them `whole`.
std::size_t check_blocks_by_rank(OpType op, const ConstBuffer& part, std::string_view part_arg, std::string_view verb,
                                 const ConstBuffer& whole, std::string_view whole_arg,
                                 std::span<const std::size_t> counts, std::size_t group_size, int my_group_rank) {
  const std::string_view name = to_string(op);
  if (counts.size() != group_size)
    throw ValueError(fmt::format("{}: counts has {} entries, expected one per rank of the group ({})", name,
                                 counts.size(), group_size));
  if (my_group_rank < 0 || std::size_t(my_group_rank) >= group_size)
    throw ValueError(
        fmt::format("{}: this rank's position {} is outside the group of {}", name, my_group_rank, group_size));
  if (counts[std::size_t(my_group_rank)] != part.count)
    throw ValueError(fmt::format("{}: counts[{}] is {} but this rank {} {}.count = {} elements", name, my_group_rank,
                                 counts[std::size_t(my_group_rank)], verb, part_arg, part.count));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (whole.count != total)
    throw ValueError(
        fmt::format("{}: {} has {} elements, expected the sum of counts = {}", name, whole_arg, whole.count, total));
  return total;
}
}  // namespace

std::size_t check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                    std::size_t group_size, int my_group_rank) {
  check_same_dtype(OpType::AllGather, in, out);
  // The user called all_gather.
  return check_blocks_by_rank(OpType::AllGather, in, "in", "contributes", ConstBuffer(out), "out", counts, group_size,
                              my_group_rank);
}

void check_reduce_scatter_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                 std::size_t group_size, int my_group_rank) {
  check_same_dtype(OpType::ReduceScatterV, in, out);
  check_blocks_by_rank(OpType::ReduceScatterV, ConstBuffer(out), "out", "receives", in, "in", counts, group_size,
                       my_group_rank);
}

int root_in_group(OpType op, int src, const ProcessGroup& group) {
  const int root = group.position_of(src);
  if (root < 0)
    throw ValueError(fmt::format("{}: src {} is not a member of group {}; expected a world rank of the group",
                                 to_string(op), src, group.name()));
  return root;
}

void throw_bad_world_root(OpType op, int src, int world_size) {
  throw ValueError(fmt::format("{}: src should be a rank in [0, {}), but given {}", to_string(op), world_size, src));
}

void check_world_rank(OpType op, std::string_view arg, int value, int world_size) {
  if (value < 0 || value >= world_size)
    throw ValueError(
        fmt::format("{}: {} should be a rank in [0, {}), but given {}", to_string(op), arg, world_size, value));
}

int rank_in_group(OpType op, std::string_view arg, int value, const ProcessGroup& group) {
  const int position = group.position_of(value);
  if (position < 0)
    throw ValueError(fmt::format("{}: {} {} is not a member of group {}; expected a world rank of the group",
                                 to_string(op), arg, value, group.name()));
  return position;
}

void check_blocks(OpType op, const ConstBuffer& part, std::string_view part_arg, const ConstBuffer& whole,
                  std::string_view whole_arg, std::size_t group_size) {
  if (part.dtype != whole.dtype)
    throw ValueError(fmt::format("{}: {} has element type {} but {} has {}; expected the same element type",
                                 to_string(op), whole_arg, to_string(whole.dtype), part_arg, to_string(part.dtype)));
  if (whole.count != part.count * group_size)
    throw ValueError(fmt::format("{}: {} has {} elements, expected {}.count * group size = {} * {} = {}", to_string(op),
                                 whole_arg, whole.count, part_arg, part.count, group_size, part.count * group_size));
}

void check_all_to_all_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size) {
  const std::string_view op = to_string(OpType::AllToAll);
  check_same_dtype(OpType::AllToAll, in, out);
  if (out.count != in.count)
    throw ValueError(fmt::format("{}: out has {} elements, expected in.count = {}", op, out.count, in.count));
  if (in.count % group_size != 0)
    throw ValueError(
        fmt::format("{}: in has {} elements, expected a multiple of the group size {}", op, in.count, group_size));
}

void check_all_to_all_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> out_counts,
                             std::span<const std::size_t> in_counts, std::size_t group_size) {
  const std::string_view op = to_string(OpType::AllToAll);  // the user called all_to_all
  check_same_dtype(OpType::AllToAll, in, out);
  for (auto [name, counts, buffer_count] :
       {std::tuple{"in_counts", in_counts, in.count}, std::tuple{"out_counts", out_counts, out.count}}) {
    if (counts.size() != group_size)
      throw ValueError(fmt::format("{}: {} has {} entries, expected one per rank of the group ({})", op, name,
                                   counts.size(), group_size));
    const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    if (total != buffer_count)
      throw ValueError(fmt::format("{}: {} sums to {} elements, but {} has {}; expected equal", op, name, total,
                                   name[0] == 'i' ? "in" : "out", buffer_count));
  }
}

void check_peer(OpType op, std::string_view arg, int peer, int my_rank, int world_size, int tag) {
  check_world_rank(op, arg, peer, world_size);
  if (peer == my_rank)
    throw ValueError(fmt::format("{}: {} {} is this rank; expected another rank", to_string(op), arg, peer));
  if (tag < 0) throw ValueError(fmt::format("{}: tag should be non-negative, but given {}", to_string(op), tag));
}

void check_positive_timeout(OpType op, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    throw ValueError(fmt::format("{}: timeout should be positive, but given {} ms", to_string(op), timeout.count()));
}

}  // namespace idist::core
