#include "core/collective_checks.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "idist/error.hpp"

namespace idist::core {

void throw_not_host(std::string_view backend, std::string_view op, std::string_view arg, const Device& device) {
  throw ValueError(
      fmt::format("{}: the {} backend communicates host memory, but {} is on {}; expected a cpu buffer "
                  "(copy it to the host first)",
                  op, backend, arg, device.str()));
}

void throw_not_member(std::string_view op, int rank, const Group& group) {
  throw ValueError(fmt::format("{}: rank {} is not a member of group {}; only members may call a collective on it", op,
                               rank, group.str()));
}

namespace {
void check_same_dtype(const ConstBuffer& in, const Buffer& out) {
  if (in.dtype != out.dtype)
    throw ValueError(fmt::format("all_gather: out has element type {} but in has {}; expected the same element type",
                                 to_string(out.dtype), to_string(in.dtype)));
}
}  // namespace

void throw_bad_all_gather_args(const ConstBuffer& in, const Buffer& out, std::size_t group_size) {
  check_same_dtype(in, out);
  const std::size_t expected = in.count * group_size;
  throw ValueError(fmt::format("all_gather: out has {} elements, expected in.count * group size = {} * {} = {}",
                               out.count, in.count, group_size, expected));
}

std::size_t check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                                    std::size_t group_size, int my_group_rank) {
  check_same_dtype(in, out);
  if (counts.size() != group_size)
    throw ValueError(fmt::format("all_gather: counts has {} entries, expected one per rank of the group ({})",
                                 counts.size(), group_size));
  if (my_group_rank < 0 || std::size_t(my_group_rank) >= group_size)
    throw ValueError(
        fmt::format("all_gather: this rank's position {} is outside the group of {}", my_group_rank, group_size));
  if (counts[std::size_t(my_group_rank)] != in.count)
    throw ValueError(fmt::format("all_gather: counts[{}] is {} but this rank contributes in.count = {} elements",
                                 my_group_rank, counts[std::size_t(my_group_rank)], in.count));
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (out.count != total)
    throw ValueError(fmt::format("all_gather: out has {} elements, expected the sum of counts = {}", out.count, total));
  return total;
}

int root_in_group(int src, std::span<const int> group_ranks, const Group& group) {
  const auto it = std::lower_bound(group_ranks.begin(), group_ranks.end(), src);
  if (it == group_ranks.end() || *it != src)
    throw ValueError(fmt::format("broadcast: src {} is not a member of group {}; expected a world rank of the group",
                                 src, group.str()));
  return int(it - group_ranks.begin());
}

void throw_bad_world_root(int src, int world_size) {
  throw ValueError(fmt::format("broadcast: src should be a rank in [0, {}), but given {}", world_size, src));
}

}  // namespace idist::core
