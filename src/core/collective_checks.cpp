#include "core/collective_checks.hpp"

#include <algorithm>
#include <numeric>
#include <string>

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

std::size_t check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                    std::size_t group_size, int my_group_rank) {
  const std::string_view op = to_string(OpType::AllGather);  // the user called all_gather
  check_same_dtype(OpType::AllGather, in, out);
  if (counts.size() != group_size)
    throw ValueError(fmt::format("{}: counts has {} entries, expected one per rank of the group ({})", op,
                                 counts.size(), group_size));
  if (my_group_rank < 0 || std::size_t(my_group_rank) >= group_size)
    throw ValueError(
        fmt::format("{}: this rank's position {} is outside the group of {}", op, my_group_rank, group_size));
  if (counts[std::size_t(my_group_rank)] != in.count)
    throw ValueError(fmt::format("{}: counts[{}] is {} but this rank contributes in.count = {} elements", op,
                                 my_group_rank, counts[std::size_t(my_group_rank)], in.count));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (out.count != total)
    throw ValueError(fmt::format("{}: out has {} elements, expected the sum of counts = {}", op, out.count, total));
  return total;
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

void check_positive_timeout(OpType op, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0)
    throw ValueError(fmt::format("{}: timeout should be positive, but given {} ms", to_string(op), timeout.count()));
}

}  // namespace idist::core
