#pragma once
/// @file
/// The abstract ComputationModel every backend implements (mirrors ignite.distributed.comp_models'
/// ComputationModel, with torch.distributed's process-group collectives folded in).
///
/// Users rarely touch it: the free functions of idist dispatch to the current model. Backend authors
/// implement one subclass in `src/BACKEND/` and register a factory in src/core/registry.cpp.

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idist/group.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist {

namespace store {
class Store;  // src/store/store.hpp: internal to libidist
}

/// One distributed configuration: serial, mpi, gloo or nccl.
///
/// Collectives are non-blocking and return a Work; each also has a blocking form whose default
/// waits on that Work. Buffers passed to collectives live on buffer_device() and must stay valid
/// until the Work completes. `group` has been checked to contain this rank before a collective is
/// called (see group_rank()); `src` is always a world rank. The public collectives are a template
/// method: they check their arguments once for every backend, then call the backend's protected
/// do_* function, whose default throws `BackendError("the X backend does not support Y")`.
class ComputationModel {
 public:
  virtual ~ComputationModel() = default;
  ComputationModel(const ComputationModel&) = delete;
  ComputationModel& operator=(const ComputationModel&) = delete;

  /// "serial" or "native-dist" (ignite's model names: _SerialModel, _NativeDistModel).
  virtual std::string model_name() const = 0;
  /// std::nullopt for serial, else "mpi", "gloo" or "nccl".
  virtual std::optional<std::string> backend() const = 0;

  /// Rank of this process in the world, in [0, world_size()).
  int rank() const noexcept { return layout_.rank; }
  /// Rank of this process among the processes of its node.
  int local_rank() const noexcept { return layout_.local_rank; }
  /// Number of processes in the world.
  int world_size() const noexcept { return layout_.world_size; }
  /// Number of processes on each node.
  int nproc_per_node() const noexcept { return layout_.nproc_per_node; }
  /// Index of this process's node, in [0, nnodes()).
  int node_rank() const noexcept { return layout_.node_rank; }
  /// Number of nodes.
  int nnodes() const noexcept { return layout_.nnodes; }
  /// All six numbers above at once.
  const WorldLayout& layout() const noexcept { return layout_; }
  /// The device this rank computes on (see idist::device()).
  virtual Device device() const;
  /// Hint for the local rank when the context was created outside idist (ignite's set_local_rank):
  /// backends that discover ranks from their launcher (mpi, gloo) take it; serial and nccl (whose
  /// device is already chosen by the local rank) ignore it.
  virtual void set_local_rank(int local_rank);
  /// Whether a non-blocking collective advances while the caller computes (a worker thread, a GPU
  /// stream). For mpi only with its progress thread (InitOptions::mpi_progress_thread; by default
  /// across nodes): Open MPI progresses non-blocking collectives only inside MPI calls.
  /// auto_model's reducer keeps one bucket in flight on such backends, since more would overlap
  /// nothing and each costs the backend scratch memory.
  virtual bool has_async_progress() const { return true; }
  /// The network interface and address this rank's transport listens on, and why it was chosen,
  /// e.g. "eth0 198.18.0.2 (routes to MASTER_ADDR node1 (198.18.0.1))"; nullopt for backends that do
  /// not choose one themselves (serial; mpi, whose transports Open MPI selects). Logged by show_config().
  virtual std::optional<std::string> network_interface() const { return std::nullopt; }
  /// The rendezvous store of the backend (gloo), through which diagnostics publish progress;
  /// nullptr where there is none (serial, mpi) or it is not shared (nccl). An internal type.
  virtual store::Store* rendezvous_store() { return nullptr; }
  /// The backend's own model under any diagnostic wrapper (IDIST_DISTRIBUTED_DEBUG): itself unless
  /// overridden. For code that needs the concrete backend class (benchmarks, tests).
  virtual ComputationModel& backend_model() { return *this; }
  /// Timeout of every wait: rendezvous and collectives. Milliseconds.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  /// Tears the backend down (collective). Called once by idist::finalize(); never by a destructor,
  /// so that a failing rank does not hang in a collective teardown while unwinding.
  virtual void finalize() {}

  /// This rank's position inside `group`, or std::nullopt when it is not a member.
  /// Validates `group` (non-empty, distinct ranks in range) and creates its communicator on first
  /// use; for some backends that is collective over the whole world.
  /// @throws ValueError naming the bad rank list.
  virtual std::optional<int> group_rank(const Group& group) = 0;
  /// Number of ranks in `group`.
  int group_size(const Group& group) const { return group.is_world() ? world_size() : int(group.ranks().size()); }

  /// Where spans given to the collectives must live: the host (Device{}) for serial, mpi and gloo;
  /// the rank's CUDA device for nccl (which also accepts host memory and stages it). The LibTorch
  /// layer places its buffers by it.
  virtual Device buffer_device() const { return Device{}; }

  // The collectives. Each is one front door for every backend: the arguments are checked here, the
  // same way and in the same words on every backend (src/core/collective_checks.hpp), and only then
  // does the backend run it (the protected do_* functions below).

  /// In-place reduction of `data` (count elements) with `op` over `group`.
  /// @throws ValueError when `op` cannot be applied to data.dtype (And / Or on floating types) or
  ///         data lives where the backend cannot read it (see buffer_device()).
  Work all_reduce(Buffer data, ReduceOp op, const Group& group);
  /// Gathers `in` (same count on every rank) into `out` (count * group size elements), rank order.
  /// @throws ValueError when out's dtype differs from in's, out.count != in.count * group size, or
  ///         a buffer lives where the backend cannot read it.
  Work all_gather(ConstBuffer in, Buffer out, const Group& group);
  /// Gathers `in` whose length differs by rank: `counts[i]` elements come from group rank i into
  /// `out` (sum(counts) elements), rank order. `counts` is known to every rank.
  /// @throws ValueError when this rank is not in `group`, counts has not one entry per group rank,
  ///         counts[group rank] != in.count, out.count != sum(counts), the dtypes differ, or a buffer
  ///         lives where the backend cannot read it.
  Work all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group& group);
  /// Copies `data` of world rank `src` to every rank of `group` (same count everywhere).
  /// @throws ValueError when `src` is not a rank of `group` (of the world for the world group), or
  ///         data lives where the backend cannot read it.
  Work broadcast(Buffer data, int src, const Group& group);
  /// Completes once every rank of `group` has entered it.
  Work barrier(const Group& group);

  /// Blocking forms of the collectives above, used by idist's blocking free functions: the same
  /// checks, then the backend's blocking call. Its default issues the non-blocking call and waits up
  /// to timeout() (then TimeoutError). A backend overrides it when its own blocking call is faster:
  /// the mpi backend does so by default (InitOptions::mpi_blocking_collectives), keeping the timeout
  /// with a watchdog that aborts.
  void all_reduce_blocking(Buffer data, ReduceOp op, const Group& group);
  /// Blocking all_gather (see all_reduce_blocking()).
  void all_gather_blocking(ConstBuffer in, Buffer out, const Group& group);
  /// Blocking broadcast (see all_reduce_blocking()).
  void broadcast_blocking(Buffer data, int src, const Group& group);
  /// Blocking barrier (see all_reduce_blocking()).
  void barrier_blocking(const Group& group);
  /// torch.distributed.monitored_barrier over `group` (see idist::monitored_barrier()): returns at
  /// once for a one-rank group; otherwise the backend's, whose default throws BackendError
  /// (unsupported).
  void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks);

 protected:
  /// @param timeout bound on rendezvous and on every collective (InitOptions::timeout).
  explicit ComputationModel(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  /// Records the layout the backend discovered (the serial model keeps the default: rank 0 of 1).
  void set_layout(const WorldLayout& layout) noexcept { layout_ = layout; }
  /// The local rank part of set_layout(), for set_local_rank() overrides.
  void set_layout_local_rank(int local_rank) noexcept { layout_.local_rank = local_rank; }
  /// Checks `group` against the world size and returns its ranks ascending (all ranks for the world).
  /// @throws ValueError for an empty list, a duplicate or a rank outside [0, world_size()).
  std::vector<int> normalize_group(const Group& group) const;
  /// Throws BackendError("the <backend> backend does not support <what>").
  [[noreturn]] void unsupported(std::string_view what) const;

  /// Checks that a buffer given to collective `op` as argument `arg` lives on `device` where this
  /// backend can read it. Every backend reads host memory, so only a device buffer costs a call.
  /// @throws ValueError (from check_device_buffer()).
  void check_buffer(std::string_view op, std::string_view arg, const Device& device) const {
    if (device.type != DeviceType::CPU) [[unlikely]]
      check_device_buffer(op, arg, device);
  }
  /// check_buffer() for a buffer on `device`, not the host. The default refuses it (mpi, gloo).
  /// @throws ValueError naming the backend, `op`, `arg` and the device.
  virtual void check_device_buffer(std::string_view op, std::string_view arg, const Device& device) const;

  // What each backend implements: the collectives with their arguments already checked. Every
  // default throws unsupported(), so a partial backend overrides what it has.
  /// all_reduce, checked.
  virtual Work do_all_reduce(Buffer data, ReduceOp op, const Group& group);
  /// all_gather, checked.
  virtual Work do_all_gather(ConstBuffer in, Buffer out, const Group& group);
  /// all_gather_v, checked; `group_rank` is this rank's position in `group`.
  virtual Work do_all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, int group_rank,
                               const Group& group);
  /// broadcast, checked; `root` is the position of world rank `src` in `group`.
  virtual Work do_broadcast(Buffer data, int src, int root, const Group& group);
  /// barrier.
  virtual Work do_barrier(const Group& group);
  /// Blocking all_reduce, checked; default do_all_reduce(...).wait().
  virtual void do_all_reduce_blocking(Buffer data, ReduceOp op, const Group& group);
  /// Blocking all_gather, checked; default do_all_gather(...).wait().
  virtual void do_all_gather_blocking(ConstBuffer in, Buffer out, const Group& group);
  /// Blocking broadcast, checked; default do_broadcast(...).wait().
  virtual void do_broadcast_blocking(Buffer data, int src, int root, const Group& group);
  /// Blocking barrier; default do_barrier(...).wait().
  virtual void do_barrier_blocking(const Group& group);
  /// monitored_barrier over a group of two or more ranks; default unsupported().
  virtual void do_monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks);

 private:
  // The front door's checks, shared by the non-blocking and blocking forms (ValueError as documented
  // on each collective). check_broadcast returns the position of world rank `src` in `group` (src
  // itself for the world).
  void check_all_reduce(const Buffer& data, ReduceOp op) const;
  void check_all_gather(const ConstBuffer& in, const Buffer& out, const Group& group) const;
  int check_broadcast(const Buffer& data, int src, const Group& group) const;

  std::chrono::milliseconds timeout_;
  WorldLayout layout_;
};

}  // namespace idist
