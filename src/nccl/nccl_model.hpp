#pragma once
// NCCLModel: the "nccl" backend (ignite's _NativeDistModel with backend "nccl").
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "core/group_cache.hpp"
#include "idist/computation_model.hpp"
#include "idist/context.hpp"
#include "nccl/communicator.hpp"
#include "nccl/op.hpp"
#include "nccl/rendezvous.hpp"
#include "nccl/staging.hpp"
#include "nccl/watchdog.hpp"

namespace idist::nccl_backend {

/// NCCL collectives on this rank's CUDA device (cuda:<local rank>). See docs/nccl.md for the
/// memory and stream rules: CUDA buffers must be on that device, host buffers are staged through it,
/// each communicator has its own stream ordered after the caller's stream by events.
class NCCLModel final : public ComputationModel {
 public:
  /// Checks for a CUDA device, rendezvouses, selects cuda:<local rank> and creates the world
  /// communicator. Collective over the world.
  /// @throws BackendError "the nccl backend needs a CUDA device; none is visible: ..." first of all;
  ///         ValueError for bad rank information; TimeoutError when ranks do not meet in time.
  explicit NCCLModel(const InitOptions& opts);
  /// Aborts the communicators if finalize() did not run (never waits for peers).
  ~NCCLModel() override;

  std::string model_name() const override { return "native-dist"; }
  std::optional<std::string> backend() const override { return "nccl"; }
  Device device() const override { return Device{DeviceType::CUDA, device_}; }
  std::optional<std::string> network_interface() const override { return interface_; }
  store::Store* rendezvous_store() override { return rendezvous_store_.get(); }

  void finalize() override;
  std::optional<int> group_rank(const Group& group) override;

  /// The rank's device: CUDA buffers must be there; host buffers are staged through it.
  Device buffer_device() const override { return device(); }

 protected:
  /// A CUDA buffer must be on this rank's device; host memory is accepted (and staged).
  void check_device_buffer(std::string_view op, std::string_view arg, const Device& dev) const override;
  // The collectives, their arguments checked by ComputationModel's front door.
  Work do_all_reduce(Buffer data, ReduceOp op, const Group& group) override;
  Work do_all_gather(ConstBuffer in, Buffer out, const Group& group) override;
  Work do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int group_rank,
                       const Group& group) override;
  Work do_broadcast(Buffer data, int src, int root, const Group& group) override;
  Work do_barrier(const Group& group) override;
  // The blocking forms wait inside the call: no Work, no watchdog entry (Op::finish(Completion::Wait)).
  void do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group) override;
  void do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group) override;
  void do_broadcast_blocking(Buffer data, int src, int root, const Group& group) override;
  void do_barrier_blocking(const Group& group) override;

 private:
  // The communicator of `group` (created by group_rank() on first use).
  // @throws ValueError when this rank is not a member.
  std::shared_ptr<Communicator> comm_for(const Group& group, std::string_view op);
  std::shared_ptr<Communicator> create_group_comm(const std::vector<int>& ranks, bool member);
  // Where a buffer really lives: `dev` for memory of this rank's device (or managed memory), cpu for
  // host memory (staged), whatever the caller marked it as. ValueError for another device's memory.
  Device placement(std::string_view op, std::string_view arg, const void* data, std::size_t bytes,
                   const Device& dev) const;
  OpContext op_context() const;
  // One body per collective for both completions (see the do_* forms).
  Work all_reduce_op(Buffer data, ReduceOp op, const Group& group, Completion how);
  Work all_gather_op(ConstBuffer in, Buffer out, const Group& group, Completion how);
  Work broadcast_op(Buffer data, int root, const Group& group, Completion how);
  Work barrier_op(const Group& group, Completion how);
  void shutdown(bool collective) noexcept;

  int device_ = 0;
  bool use_split_ = kHaveCommSplit;
  std::shared_ptr<KeyValueStore> store_;
  std::shared_ptr<store::Store> rendezvous_store_;  // store_'s store, for the debug layer
  std::shared_ptr<void> env_guard_;
  std::optional<std::string> interface_;  // the bootstrap interface idist chose, for show_config
  std::shared_ptr<BlockPool> pinned_;
  std::shared_ptr<BlockPool> device_pool_;  // only where the device has no memory pools
  std::shared_ptr<Communicator> world_;
  core::GroupCache<std::shared_ptr<Communicator>> groups_;  // null: this rank is not a member
  std::unique_ptr<Watchdog> watchdog_;                      // last: stopped first
};

}  // namespace idist::nccl_backend
