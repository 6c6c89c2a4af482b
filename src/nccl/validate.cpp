#include "nccl/validate.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "idist/error.hpp"

namespace idist::nccl_backend {

void check_buffer_device(std::string_view op, std::string_view arg, const Device& buf, const Device& mine) {
  if (buf.type == DeviceType::CPU) return;
  if (buf.index == mine.index && mine.type == DeviceType::CUDA) return;
  throw ValueError(std::string(op) + ": " + std::string(arg) + " is on " + buf.str() + " but this rank's device is " +
                   mine.str() + "; the nccl backend communicates memory of the rank's own device (idist::device())");
}

void check_all_gather_args(const ConstBuffer& in, const Buffer& out, int group_size) {
  if (in.dtype != out.dtype)
    throw ValueError("all_gather: out has element type " + std::string(to_string(out.dtype)) + " but in has " +
                     std::string(to_string(in.dtype)) + "; expected the same element type");
  const std::size_t expected = in.count * std::size_t(group_size);
  if (out.count != expected)
    throw ValueError("all_gather: out has " + std::to_string(out.count) + " elements, expected in.count * group size = " +
                     std::to_string(in.count) + " * " + std::to_string(group_size) + " = " + std::to_string(expected));
}

void check_all_gather_v_args(const ConstBuffer& in, const Buffer& out, std::span<const std::size_t> counts,
                             int group_size, int my_group_rank) {
  if (in.dtype != out.dtype)
    throw ValueError("all_gather: out has element type " + std::string(to_string(out.dtype)) + " but in has " +
                     std::string(to_string(in.dtype)) + "; expected the same element type");
  if (counts.size() != std::size_t(group_size))
    throw ValueError("all_gather: counts has " + std::to_string(counts.size()) + " entries, expected one per rank of the group (" +
                     std::to_string(group_size) + ")");
  if (my_group_rank < 0 || my_group_rank >= group_size)
    throw ValueError("all_gather: this rank's position " + std::to_string(my_group_rank) + " is outside the group of " +
                     std::to_string(group_size));
  if (counts[std::size_t(my_group_rank)] != in.count)
    throw ValueError("all_gather: counts[" + std::to_string(my_group_rank) + "] is " +
                     std::to_string(counts[std::size_t(my_group_rank)]) + " but this rank contributes " +
                     std::to_string(in.count) + " elements");
  const std::size_t total = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
  if (out.count != total)
    throw ValueError("all_gather: out has " + std::to_string(out.count) + " elements, expected the sum of counts = " +
                     std::to_string(total));
}

int root_in_group(int src, std::span<const int> group_ranks, const Group& group) {
  const auto it = std::find(group_ranks.begin(), group_ranks.end(), src);
  if (it == group_ranks.end())
    throw ValueError("broadcast: src " + std::to_string(src) + " is not a member of group " + group.str() +
                     "; expected a world rank of the group");
  return int(it - group_ranks.begin());
}

}  // namespace idist::nccl_backend
