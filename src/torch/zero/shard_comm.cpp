// The collectives of ZeroRedundancyOptimizer (see shard_comm.hpp).
#include "torch/zero/shard_comm.hpp"

#include <algorithm>
#include <cstdint>

#include <ATen/ATen.h>
#include <fmt/format.h>

#include "idist/collectives.hpp"
#include "idist/context.hpp"
#include "idist/error.hpp"
#include "idist/torch/collectives.hpp"
#include "torch/staging.hpp"

namespace idist::detail {

ShardComm::ShardComm(Group group) : group_(std::move(group)) {
  ComputationModel& m = current_model();
  const int me = m.process_group(group_).rank();
  if (me < 0)
    throw ValueError(fmt::format(
        "ZeroRedundancyOptimizer: this rank (world rank {}) is not a member of the group {}; only members construct it",
        m.rank(), group_.str()));
  rank_ = me;
  if (group_.is_world()) {
    world_ranks_.resize(std::size_t(m.world_size()));
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
  ComputationModel& m = current_model();
  const c10::Device dev = comm_device(m);
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
    m.all_gather(ConstBuffer(tensor_buffer(in)), tensor_buffer(out), group_, Completion::Blocking);
  else
    m.all_gather_v(ConstBuffer(tensor_buffer(in)), tensor_buffer(out), counts, group_, Completion::Blocking);
  if (!out.is_same(flat)) flat.copy_(out);
}

std::vector<std::string> ShardComm::gather(const std::string& mine, int to) const {
  std::vector<std::string> out;
  if (rank_ == to) out.resize(std::size_t(size()));
  if (size() == 1) {
    out[0] = mine;
    return out;
  }
  for (int r = 0; r < size(); ++r) {
    const bool sender = r == rank_;
    const int src = world_ranks_[std::size_t(r)];
    at::Tensor length = at::full({1}, std::int64_t(sender ? mine.size() : 0), at::kLong);
    idist::broadcast_async(length, src, group_).wait();
    const std::int64_t n = length.item<std::int64_t>();
    at::Tensor data = at::empty({n}, at::kByte);
    if (sender) std::copy(mine.begin(), mine.end(), reinterpret_cast<char*>(data.data_ptr()));
    if (n > 0) idist::broadcast_async(data, src, group_).wait();
    if (rank_ == to && n > 0)
      out[std::size_t(r)].assign(reinterpret_cast<const char*>(data.data_ptr()), std::size_t(n));
  }
  return out;
}

}  // namespace idist::detail
