// The collectives of ZeroRedundancyOptimizer (see shard_comm.hpp).
#include "torch/zero/shard_comm.hpp"

#include <algorithm>
#include <cstdint>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "idist/collectives.hpp"
#include "idist/error.hpp"
#include "torch/comm/comm.hpp"

namespace idist::detail {

ShardComm::ShardComm(Group group) : group_(std::move(group)) {
  const int me = comm::process_group(group_).rank();
  if (me < 0)
    throw ValueError(fmt::format(
        "ZeroRedundancyOptimizer: this rank (world rank {}) is not a member of the group {}; only members construct it",
        comm::rank(), group_.str()));
  rank_ = me;
  if (group_.is_world()) {
    world_ranks_.resize(std::size_t(comm::world_size()));
    for (std::size_t r = 0; r < world_ranks_.size(); ++r) world_ranks_[r] = int(r);
  } else {
    world_ranks_ = group_.ranks();
    std::sort(world_ranks_.begin(), world_ranks_.end());  // group ranks follow ascending world ranks
  }
}

std::vector<std::string> ShardComm::all_gather(std::string_view text) const {
  if (size() == 1) return {std::string(text)};
  return idist::all_gather(text, group_);
}

void ShardComm::publish(const at::Tensor& send, const at::Tensor& flat, std::span<const std::size_t> counts,
                        bool equal) {
  const c10::Device dev = comm::device();
  at::Tensor in = send;
  at::Tensor out = flat;
  if (flat.device() != dev) {
    if (!host_flat_.defined() || host_flat_.numel() != flat.numel() || host_flat_.scalar_type() != flat.scalar_type()) {
      host_flat_ = at::empty({flat.numel()}, flat.options().device(dev));
      host_send_ = at::empty({send.numel()}, send.options().device(dev));
    }
    host_send_.copy_(send);
    in = host_send_;
    out = host_flat_;
  }
  if (equal)
    comm::all_gather(in, out, group_, Completion::Blocking);
  else
    comm::all_gather_v(in, out, counts, group_, Completion::Blocking);
  if (!out.is_same(flat)) flat.copy_(out);
}

Work ShardComm::all_gather_async(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts,
                                 bool equal) const {
  if (equal) return comm::all_gather(in, out, group_, Completion::Async);
  return comm::all_gather_v(in, out, counts, group_, Completion::Async);
}

Work ShardComm::reduce_scatter_v(const at::Tensor& in, const at::Tensor& out,
                                 std::span<const std::size_t> counts) const {
  return comm::reduce_scatter_v(in, out, counts, ReduceOp::Sum, group_, Completion::Async);
}

std::vector<std::string> ShardComm::gather(const std::string& mine, int to) const {
  if (to < 0 || to >= size())
    throw ValueError(fmt::format("ShardComm::gather: to is {}; expected a group rank in [0, {})", to, size()));
  std::vector<std::string> out;
  if (rank_ == to) out.resize(std::size_t(size()));
  if (size() == 1) {
    out[0] = mine;
    return out;
  }
  // Every member pads to the longest, so every member needs every length; only `to` needs the bytes.
  const std::vector<std::int64_t> lengths = idist::all_gather(std::int64_t(mine.size()), group_);
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest == 0) return out;
  at::Tensor padded = at::zeros({longest}, at::kByte);
  std::copy(mine.begin(), mine.end(), reinterpret_cast<char*>(padded.data_ptr()));
  at::Tensor all;
  if (rank_ == to) all = at::empty({std::int64_t(size()) * longest}, at::kByte);
  comm::gather(padded, all, world_ranks_[std::size_t(to)], group_, Completion::Blocking);
  if (rank_ != to) return out;
  const char* bytes = reinterpret_cast<const char*>(all.data_ptr());
  for (std::size_t r = 0; r < out.size(); ++r)
    out[r].assign(bytes + std::int64_t(r) * longest, std::size_t(lengths[r]));
  return out;
}

}  // namespace idist::detail
