#pragma once
// Every collective ZeroRedundancyOptimizer issues goes through ShardComm, over the communication layer
// (torch/comm/comm.hpp): all_gather for the parameters, reduce_scatter_v for stage 2's gradients,
// gather for consolidating the state, all_gather of strings for agreeing on errors.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include "idist/work.hpp"

#include "idist/group.hpp"

namespace idist::detail {

class ShardComm {
 public:
  /// @throws ValueError when this rank is not a member of `group` (or the group is invalid).
  explicit ShardComm(Group group);

  /// This rank's position in the group, and the group's size.
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return int(world_ranks_.size()); }
  const Group& group() const noexcept { return group_; }

  /// Every member's `text`, in group rank order.
  std::vector<std::string> all_gather(std::string_view text) const;

  /// After the local step: `flat` receives every member's shard in group rank order, counts[r]
  /// elements from member r, whose own shard is in `send` (counts[rank()] elements). `flat` and
  /// `send` are contiguous, of one dtype; `equal` says all counts are the same (one all_gather
  /// through the backend's blocking form instead of an all_gather_v). Where the backend cannot read
  /// their device (CUDA parameters on gloo or mpi), they go through host buffers kept between calls.
  void publish(const at::Tensor& send, const at::Tensor& flat, std::span<const std::size_t> counts, bool equal);

  /// overlap_with_ddp's gather of one bucket: `out` receives every member's block in group rank
  /// order, counts[r] elements from member r, whose own block is `in`; `equal` as in publish().
  /// Asynchronous; the buffers stay alive until the Work completed. On the communication device.
  Work all_gather_async(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts,
                        bool equal) const;

  /// Stage 2's bucket reduction: the sum over the group of `in` (blocks of counts[r] elements, group
  /// rank order), this rank's block into `out`. Asynchronous; `in`, `out` and `counts` stay alive
  /// until the Work completed (the caller's bucket plan holds them).
  Work reduce_scatter_v(const at::Tensor& in, const at::Tensor& out, std::span<const std::size_t> counts) const;

  /// Gathers every member's bytes on member `to`, which gets them in group rank order; the others
  /// get an empty vector. Two collectives: an all_gather of the lengths, then a gather of the bytes
  /// padded to the longest (PyTorch's consolidate_state_dict broadcasts each member's bytes in turn,
  /// which sends every member's state to every member).
  std::vector<std::string> gather(const std::string& mine, int to) const;

 private:
  Group group_;
  int rank_ = 0;
  std::vector<int> world_ranks_;      // world rank of each group rank
  at::Tensor host_send_, host_flat_;  // staging, only for parameters on a device the backend cannot read
};

}  // namespace idist::detail
