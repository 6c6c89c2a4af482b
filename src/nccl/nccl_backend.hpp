#pragma once
// NCCLBackend: the "nccl" backend (ignite's _NativeDistModel with backend "nccl").
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/backend.hpp"
#include "idist/context.hpp"
#include "nccl/communicator.hpp"
#include "nccl/nccl_staging.hpp"
#include "nccl/nccl_types.hpp"
#include "nccl/nccl_watchdog.hpp"
#include "nccl/op.hpp"
#include "nccl/rendezvous.hpp"

namespace idist::nccl_backend {

/// One process group: for a member, its NCCL communicator (the world's or one split from it); null for
/// a non-member and once the backend shut down.
class NcclGroup final : public ProcessGroup {
 public:
  using ProcessGroup::ProcessGroup;
  std::shared_ptr<Communicator> comm;
};

/// The communicator of `group` (an NcclGroup).
inline const std::shared_ptr<Communicator>& comm_of(const ProcessGroup& group) {
  return static_cast<const NcclGroup&>(group).comm;
}

/// NCCL collectives on this rank's CUDA device (cuda:<local rank>). See docs/nccl.md for the
/// memory and stream rules: CUDA buffers must be on that device, host buffers are staged through it,
/// each communicator has its own stream ordered after the caller's stream by events.
class NCCLBackend final : public core::Backend {
 public:
  /// Checks for a CUDA device, rendezvouses, selects cuda:<local rank> and creates the world
  /// communicator. Collective over the world.
  /// @throws BackendError "the nccl backend needs a CUDA device; none is visible: ..." first of all;
  ///         ValueError for bad rank information; TimeoutError when ranks do not meet in time.
  explicit NCCLBackend(const InitOptions& opts);
  /// Aborts the communicators if finalize() did not run (never waits for peers).
  ~NCCLBackend() override;

  std::string model_name() const override { return "native-dist"; }
  std::optional<std::string> backend() const override { return "nccl"; }
  Device device() const override { return Device{DeviceType::CUDA, device_}; }
  std::optional<std::string> network_interface() const override { return interface_; }
  /// The board over the rendezvous store (keys "idist/debug/seq/..."), where there is one.
  std::shared_ptr<core::debug::ProgressBoard> progress_board() override;

  void finalize() override;

  /// The rank's device: CUDA buffers must be there; host buffers are staged through it.
  Device buffer_device() const override { return device(); }

  /// A CUDA buffer must be on this rank's device; host memory is accepted (and staged).
  void check_device_buffer(OpType op, std::string_view arg, const Device& dev) const override;
  /// ncclCommSplit of the world's communicator (collective over the world), or with
  /// IDIST_NCCL_NO_SPLIT a communicator of its own from a unique id exchanged through the store.
  std::shared_ptr<ProcessGroup> create_group(std::vector<int> sorted_ranks) override;
  // The operations, their arguments checked by ComputationModel's front door. Completion::Blocking
  // waits inside the call: no Work, no watchdog entry (Op::finish).
  /// AllReduce: ncclAllReduce (the host fallback for what NCCL cannot reduce); Reduce: ncclReduce;
  /// ReduceScatter: ncclReduceScatter; ReduceScatterV: one ncclReduce per rank in one NCCL group
  /// (these three only for what NCCL reduces natively).
  Work do_reduce(const Reduction& r, Completion how) override;
  /// AllGather: ncclAllGather of bytes; AllGatherV: one ncclBroadcast per rank, in one NCCL group;
  /// Gather: ncclSend to the root / ncclRecv from every rank, in one NCCL group.
  Work do_gather(const Gathering& g, Completion how) override;
  /// Broadcast: ncclBroadcast of bytes; Scatter, AllToAll, AllToAllV: ncclSend / ncclRecv of each
  /// block, in one NCCL group.
  Work do_distribute(const Distribution& d, Completion how) override;
  /// Send / Recv: ncclSend / ncclRecv on the world's communicator. NCCL has no tags: messages between
  /// two ranks match in issue order, whatever their tag.
  Work do_point_to_point(const PointToPoint& p, Completion how) override;
  /// A one-element all-reduce.
  Work do_barrier(const ProcessGroup& group, Completion how) override;

 private:
  std::shared_ptr<Communicator> create_group_comm(const std::vector<int>& ranks, bool member);
  // Where a buffer really lives: `dev` for memory of this rank's device (or managed memory), cpu for
  // host memory (staged), whatever the caller marked it as. ValueError for another device's memory.
  Device placement(OpType op, std::string_view arg, const void* data, std::size_t bytes, const Device& dev) const;
  OpContext op_context() const;
  // The reductions (nccl_reduce.cpp); `plan`: NCCL's native type and operator.
  Work all_reduce(const Reduction& r, Completion how);
  Work reduce_to_root(const Reduction& r, const ReducePlan& plan, Completion how);
  Work reduce_scatter(const Reduction& r, const ReducePlan& plan, Completion how);
  Work reduce_scatter_v(const Reduction& r, const ReducePlan& plan, Completion how);
  // The gatherings (nccl_gather.cpp). gather_to_all: the setup both all-gathers share (buffers
  // placed, nothing for an empty output, one Op); issue(o, in, out) queues the NCCL calls.
  template <class Issue>
  Work gather_to_all(const Gathering& g, Completion how, Issue issue);
  Work all_gather(const Gathering& g, Completion how);
  Work all_gather_v(const Gathering& g, Completion how);
  Work gather_to_root(const Gathering& g, Completion how);
  // The distributions (nccl_distribute.cpp). exchange_blocks: sends[i] elements to and receives[i]
  // from group rank i, blocks back to back in `in` and `out`; `in` is read only when `sends_any`.
  Work broadcast(const Distribution& d, Completion how);
  Work exchange_blocks(const Distribution& d, const std::vector<std::size_t>& sends,
                       const std::vector<std::size_t>& receives, bool sends_any, Completion how);
  // Send (`sending`) or Recv (nccl_point_to_point.cpp).
  Work transfer(const PointToPoint& p, bool sending, Completion how);
  void shutdown(bool collective) noexcept;

  int device_ = 0;
  bool use_split_ = kHaveCommSplit;
  std::shared_ptr<KeyValueStore> store_;
  std::shared_ptr<store::Store> rendezvous_store_;  // store_'s store, for the debug layer
  std::shared_ptr<void> env_guard_;
  std::optional<std::string> interface_;  // the bootstrap interface idist chose, for show_config
  std::shared_ptr<BlockPool> pinned_;
  std::shared_ptr<BlockPool> device_pool_;  // only where the device has no memory pools
  std::shared_ptr<Communicator> world_comm_;
  std::vector<std::shared_ptr<NcclGroup>> groups_;  // every group made, the world first
  std::unique_ptr<Watchdog> watchdog_;              // last: stopped first
};

}  // namespace idist::nccl_backend
