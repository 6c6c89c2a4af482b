#pragma once
// The backend interface: what serial, mpi, gloo and nccl implement behind the ComputationModel front
// door, and what the debug layer decorates. One virtual function per data-movement family; every
// operation arrives checked, its group resolved, this rank a member.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idist/computation_model.hpp"

namespace idist {

namespace core::debug {
class ProgressBoard;  // core/debug/progress_board.hpp
}  // namespace core::debug

/// A backend: discovers the layout, makes groups and their communicators, and runs the operation
/// families. Every operation's default throws BackendError("the X backend does not support Y").
class ComputationModel::Backend {
 public:
  virtual ~Backend();
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  /// The backend behind `model`, under any decorator (the debug layer).
  static Backend& of(ComputationModel& model) noexcept { return *model.backend_; }

  /// "serial" or "native-dist".
  virtual std::string model_name() const = 0;
  /// std::nullopt for serial, else "mpi", "gloo" or "nccl".
  virtual std::optional<std::string> backend() const = 0;
  /// The device this rank computes on; the host unless overridden.
  virtual Device device() const;
  /// ignite's set_local_rank hint; ignored unless overridden.
  virtual void set_local_rank(int local_rank);
  /// Whether non-blocking operations advance while the caller computes (see ComputationModel).
  virtual bool has_async_progress() const { return true; }
  /// See ComputationModel::network_interface().
  virtual std::optional<std::string> network_interface() const { return std::nullopt; }
  /// Where the debug layer publishes each rank's progress, so that a timeout names the ranks that
  /// never arrived: the rendezvous store of gloo and nccl; nullptr where there is none (serial, mpi).
  virtual std::shared_ptr<core::debug::ProgressBoard> progress_board() { return nullptr; }
  /// The backend itself under any decorator: for code that needs the concrete class (tests, benchmarks).
  virtual Backend& undecorated() { return *this; }
  /// Collective teardown (see ComputationModel::finalize()).
  virtual void finalize() {}
  /// Where buffers must live: the host unless overridden (nccl: the rank's GPU).
  virtual Device buffer_device() const { return Device{}; }
  /// Refuses a buffer on `device` (not the host) given to `op` as argument `arg` unless the backend
  /// reads that memory. The default refuses it (mpi, gloo).
  /// @throws ValueError naming the backend, `op`, `arg` and the device.
  virtual void check_device_buffer(OpType op, std::string_view arg, const Device& device) const;
  /// Makes the group of `sorted_ranks` (validated, ascending) as seen from this rank, member or not,
  /// on the group's first use; for mpi and nccl a collective call over the world. All the ranks may
  /// be listed: the backend returns its world group, or (mpi) a communicator of its own. The default
  /// makes a plain ProcessGroup (serial). Called under the front door's group table lock.
  /// @throws BackendError when the backend fails to create the communicator.
  virtual std::shared_ptr<ProcessGroup> create_group(std::vector<int> sorted_ranks);

  // The operation families, checked by the front door, on a group of which this rank is a member,
  // completed as `how` says. Every default throws unsupported().
  /// A reduction (Reduction::op: AllReduce, Reduce, ReduceScatter, ReduceScatterV).
  virtual Work do_reduce(const Reduction& r, Completion how);
  /// A gathering (Gathering::op: AllGather, AllGatherV, Gather).
  virtual Work do_gather(const Gathering& g, Completion how);
  /// A distribution (Distribution::op: Broadcast, Scatter, AllToAll, AllToAllV).
  virtual Work do_distribute(const Distribution& d, Completion how);
  /// A message to or from one rank (PointToPoint::op: Send, Recv).
  virtual Work do_point_to_point(const PointToPoint& p, Completion how);
  /// A barrier of `group`.
  virtual Work do_barrier(const ProcessGroup& group, Completion how);
  /// monitored_barrier over a group of two or more ranks, this rank a member.
  virtual void do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout, bool wait_all_ranks);

  int rank() const noexcept { return layout_.rank; }
  int local_rank() const noexcept { return layout_.local_rank; }
  int world_size() const noexcept { return layout_.world_size; }
  int nproc_per_node() const noexcept { return layout_.nproc_per_node; }
  int node_rank() const noexcept { return layout_.node_rank; }
  int nnodes() const noexcept { return layout_.nnodes; }
  const WorldLayout& layout() const noexcept { return layout_; }
  /// Bound on rendezvous and on every operation.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// The id every ProcessGroup this backend makes carries as its owner (ProcessGroup::owner()).
  std::uint64_t id() const noexcept { return id_; }
  /// The world group (the backend's own once set_world_group() ran).
  const std::shared_ptr<ProcessGroup>& world_group() const noexcept { return world_; }

  /// Throws BackendError("the <backend> backend does not support <op>").
  [[noreturn]] void unsupported(OpType op) const;

 protected:
  /// @param timeout bound on rendezvous and on every operation (InitOptions::timeout).
  explicit Backend(std::chrono::milliseconds timeout);
  /// Records the layout the backend discovered (serial keeps the default: rank 0 of 1) and makes a
  /// plain world group for it.
  void set_layout(const WorldLayout& layout);
  /// The local rank part of set_layout(), for set_local_rank() overrides.
  void set_layout_local_rank(int local_rank) noexcept { layout_.local_rank = local_rank; }
  /// Replaces the world group by the backend's own (with its communicator), after set_layout().
  void set_world_group(std::shared_ptr<ProcessGroup> world) noexcept { world_ = std::move(world); }
  /// For a decorator: takes the layout, world group and id of `inner`, so that a group made through
  /// either is the same group.
  void mirror(const Backend& inner);

 private:
  std::chrono::milliseconds timeout_;
  WorldLayout layout_;
  std::uint64_t id_;
  std::shared_ptr<ProcessGroup> world_;
};

namespace core {

/// The backend interface, under its internal name.
using Backend = ComputationModel::Backend;

/// The backend behind `model` (under any decorator) as class B, or nullptr when it is another one.
template <class B>
B* backend_as(ComputationModel& model) {
  return dynamic_cast<B*>(&Backend::of(model).undecorated());
}

}  // namespace core

}  // namespace idist
