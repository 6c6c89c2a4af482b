#pragma once
/// @file
/// idist::ComputationModel, the front door of the current backend (mirrors ignite.distributed.comp_models'
/// ComputationModel, with torch.distributed's process-group collectives folded in).
///
/// Users rarely touch it: the free functions of idist dispatch to the current model. Backend authors
/// implement the internal interface of src/core/backend.hpp in `src/BACKEND/` and register a factory
/// in src/core/registry.cpp.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "idist/group.hpp"
#include "idist/op_type.hpp"
#include "idist/operation.hpp"
#include "idist/process_group.hpp"
#include "idist/types.hpp"
#include "idist/work.hpp"

namespace idist {

/// One distributed configuration: serial, mpi, gloo or nccl — the front door of its backend.
///
/// Each operation has one front door for every backend (all_reduce(), all_gather(), ...): it checks the
/// arguments once, in the same words on every backend, resolves the group once (process_group()), lets
/// a rank outside the group return at once, and hands the backend a descriptor of the operation
/// (operation.hpp) with the Completion the caller asked for. Buffers passed live on buffer_device() and
/// stay valid until the Work completes.
///
/// The class is final and has no virtual function: what differs between backends is the Backend it
/// owns, an internal interface (src/core/backend.hpp, c10d's Backend under its ProcessGroup) with one
/// virtual function per data-movement family. initialize() makes the model; users reach it through
/// current_model() and the free functions.
class ComputationModel final {
 public:
  /// The backend interface the model dispatches to. Internal: defined in src/core/backend.hpp, where
  /// the serial, mpi, gloo and nccl backends and the debug layer implement it.
  class Backend;

  /// Takes ownership of `backend`, fully initialized (its layout and world group known).
  explicit ComputationModel(std::unique_ptr<Backend> backend);
  /// Destroys the backend without a collective call (finalize() is the collective teardown).
  ~ComputationModel();
  ComputationModel(const ComputationModel&) = delete;
  ComputationModel& operator=(const ComputationModel&) = delete;

  /// "serial" or "native-dist" (ignite's model names: _SerialModel, _NativeDistModel).
  std::string model_name() const;
  /// std::nullopt for serial, else "mpi", "gloo" or "nccl".
  std::optional<std::string> backend() const;

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
  Device device() const;
  /// Hint for the local rank when the context was created outside idist (ignite's set_local_rank):
  /// backends that discover ranks from their launcher (mpi, gloo) take it; serial and nccl (whose
  /// device is already chosen by the local rank) ignore it.
  void set_local_rank(int local_rank);
  /// Whether a non-blocking operation advances while the caller computes (a worker thread, a GPU
  /// stream): true for gloo and nccl; for mpi only with its progress thread
  /// (InitOptions::mpi_progress_thread; by default across nodes), since Open MPI progresses
  /// non-blocking collectives only inside MPI calls.
  bool has_async_progress() const;
  /// The network interface and address this rank's transport listens on, and why it was chosen,
  /// e.g. "eth0 198.18.0.2 (routes to MASTER_ADDR node1 (198.18.0.1))"; nullopt for backends that do
  /// not choose one themselves (serial; mpi, whose transports Open MPI selects). Logged by show_config().
  std::optional<std::string> network_interface() const;
  /// Timeout of every wait: rendezvous and collectives. Milliseconds.
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  /// Identifies this model among every model of the process (ProcessGroup::owner()).
  std::uint64_t id() const noexcept { return id_; }

  /// Tears the backend down (collective). Called once by idist::finalize(); never by a destructor,
  /// so that a failing rank does not hang in a collective teardown while unwinding.
  void finalize();

  /// `group` as this backend resolved it: its members, this rank's position (rank() -1 outside it)
  /// and the communicator. The world and a Group made by new_group() cost no lookup; a rank list is
  /// validated and its communicator made on its first use (for mpi and nccl collectively over the
  /// world, so every rank must reach a group's first use in the same order), then found by the list.
  /// The reference stays valid until finalize().
  /// @throws ValueError for an empty list, a duplicate or a rank outside [0, world_size()).
  const ProcessGroup& process_group(const Group& group);

  /// Where spans given to the collectives must live: the host (Device{}) for serial, mpi and gloo;
  /// the rank's CUDA device for nccl (which also accepts host memory and stages it). The LibTorch
  /// layer places its buffers by it.
  Device buffer_device() const noexcept { return buffer_device_; }

  // The operations. On a rank outside `group` each returns a completed Work at once and leaves the
  // buffers as they are (ignite: such a rank gets its input back). With Completion::Blocking the call
  // returns once the operation completed and the Work it returns is already complete.

  /// In-place reduction of `data` (count elements) with `op` over `group`.
  /// @throws ValueError when `op` cannot be applied to data.dtype (And / Or on floating types) or
  ///         data lives where the backend cannot read it (see buffer_device()); TimeoutError (Blocking)
  ///         after the timeout.
  Work all_reduce(Buffer data, ReduceOp op, const Group& group = {}, Completion how = Completion::Async);
  /// Gathers `in` (same count on every rank) into `out` (count * group size elements), rank order.
  /// @throws ValueError when out's dtype differs from in's, out.count != in.count * group size, or
  ///         a buffer lives where the backend cannot read it.
  Work all_gather(ConstBuffer in, Buffer out, const Group& group = {}, Completion how = Completion::Async);
  /// Gathers `in` whose length differs by rank: `counts[i]` elements come from group rank i into
  /// `out` (sum(counts) elements), rank order. `counts` is known to every rank.
  /// @throws ValueError when counts has not one entry per group rank, counts[group rank] != in.count,
  ///         out.count != sum(counts), the dtypes differ, or a buffer lives where the backend cannot
  ///         read it.
  Work all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group& group = {},
                    Completion how = Completion::Async);
  /// Copies `data` of world rank `src` to every rank of `group` (same count everywhere).
  /// @throws ValueError when `src` is outside [0, world size) or not a rank of `group`, or data lives
  ///         where the backend cannot read it.
  Work broadcast(Buffer data, int src, const Group& group = {}, Completion how = Completion::Async);
  /// Reduces `data` (count elements, the same on every rank) with `op` into world rank `dst`'s
  /// buffer; the other ranks' buffers are left unchanged (torch.distributed.reduce).
  /// @throws ValueError when `dst` is outside [0, world size) or not a rank of `group`, `op` cannot be
  ///         applied to data.dtype, or data lives where the backend cannot read it.
  Work reduce(Buffer data, ReduceOp op, int dst, const Group& group = {}, Completion how = Completion::Async);
  /// Gathers `in` (same count on every rank) into `out` on world rank `dst` (in.count * group size
  /// elements, group rank order); `out` is not used on the other ranks (torch.distributed.gather).
  /// @throws ValueError when `dst` is outside [0, world size) or not a rank of `group`; on `dst` when
  ///         out's dtype differs from in's or out.count != in.count * group size; when a buffer lives
  ///         where the backend cannot read it.
  Work gather(ConstBuffer in, Buffer out, int dst, const Group& group = {}, Completion how = Completion::Async);
  /// Sends block i of `in` on world rank `src` (group size blocks of out.count elements) to group rank
  /// i's `out`; `in` is not used on the other ranks (torch.distributed.scatter).
  /// @throws ValueError when `src` is outside [0, world size) or not a rank of `group`; on `src` when
  ///         the dtypes differ or in.count != out.count * group size; when a buffer lives where the
  ///         backend cannot read it.
  Work scatter(ConstBuffer in, Buffer out, int src, const Group& group = {}, Completion how = Completion::Async);
  /// Reduces `in` (group size blocks of out.count elements) with `op` over `group`; `out` receives
  /// the reduction of block group rank (torch.distributed.reduce_scatter_tensor).
  /// @throws ValueError when the dtypes differ, in.count != out.count * group size, `op` cannot be
  ///         applied to the dtype, or a buffer lives where the backend cannot read it.
  Work reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, const Group& group = {},
                      Completion how = Completion::Async);
  /// reduce_scatter with blocks whose lengths differ: `in` holds the blocks back to back, counts[i]
  /// elements for group rank i; `out` (counts[group rank] elements) receives the reduction of this
  /// rank's block (MPI_Reduce_scatter; what ZeroRedundancyOptimizer's gradient hook reduces with).
  /// `counts` is the same on every rank.
  /// @throws ValueError when counts has not one entry per group rank, in.count != sum(counts),
  ///         out.count != counts[group rank], the dtypes differ, `op` cannot be applied to the dtype,
  ///         or a buffer lives where the backend cannot read it.
  Work reduce_scatter_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, ReduceOp op,
                        const Group& group = {}, Completion how = Completion::Async);
  /// Block j of `in` (group size blocks of in.count / group size elements) goes to group rank j;
  /// block i of `out` (same count as `in`) comes from group rank i (torch.distributed.all_to_all_single).
  /// @throws ValueError when the dtypes differ, out.count != in.count, in.count is not a multiple of
  ///         the group size, or a buffer lives where the backend cannot read it.
  Work all_to_all(ConstBuffer in, Buffer out, const Group& group = {}, Completion how = Completion::Async);
  /// all_to_all with blocks whose lengths differ: block j of `in` has in_counts[j] elements and goes
  /// to group rank j; block i of `out` has out_counts[i] elements and comes from group rank i, blocks
  /// back to back (torch.distributed.all_to_all_single with split sizes, in elements).
  /// @throws ValueError when either list has not one entry per group rank, in.count != sum(in_counts),
  ///         out.count != sum(out_counts), the dtypes differ, or a buffer lives where the backend cannot
  ///         read it. A count that disagrees with the peer's is not seen here: the operation fails or
  ///         times out (on gloo, Gloo aborts the process); IDIST_DISTRIBUTED_DEBUG=DETAIL compares the
  ///         per-pair counts first and raises DesyncError on every rank.
  Work all_to_all_v(ConstBuffer in, Buffer out, std::span<const std::size_t> out_counts,
                    std::span<const std::size_t> in_counts, const Group& group = {},
                    Completion how = Completion::Async);
  /// Sends `data` to world rank `dst`, matched by the recv() of the same tag there
  /// (torch.distributed.send / isend). Completes when `data` may be reused.
  /// @throws ValueError when `dst` is outside [0, world size) or this rank, `tag` is negative, or
  ///         data lives where the backend cannot read it.
  Work send(ConstBuffer data, int dst, int tag = 0, Completion how = Completion::Async);
  /// Receives into `data` the message of world rank `src` sent with `tag` (same dtype and count)
  /// (torch.distributed.recv / irecv).
  /// @throws ValueError when `src` is outside [0, world size) or this rank, `tag` is negative, or
  ///         data lives where the backend cannot read it.
  Work recv(Buffer data, int src, int tag = 0, Completion how = Completion::Async);
  /// Completes once every rank of `group` has entered it.
  Work barrier(const Group& group = {}, Completion how = Completion::Async);
  /// torch.distributed.monitored_barrier over `group` (see idist::monitored_barrier()): returns at
  /// once for a one-rank group; otherwise the backend's, whose default throws BackendError
  /// (unsupported).
  void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks);

 private:
  friend class Backend;  // Backend::of() hands internal code the backend behind a model
  struct GroupTable;     // the groups made from rank lists (computation_model.cpp)

  // Host memory passes inline; any other goes to the backend, which refuses what it cannot read.
  void check_buffer(OpType op, std::string_view arg, const Device& device) const {
    if (device.type != DeviceType::CPU) [[unlikely]]
      check_device_buffer(op, arg, device);
  }
  void check_device_buffer(OpType op, std::string_view arg, const Device& device) const;
  // Resolution of a rank list: found by the list as written, else validated and created.
  const ProcessGroup& resolve_list(const Group& group);

  std::unique_ptr<Backend> backend_;
  // Copies of what the backend discovered, so that the accessors above are inline.
  WorldLayout layout_;
  std::chrono::milliseconds timeout_;
  std::uint64_t id_;
  Device buffer_device_;
  std::shared_ptr<ProcessGroup> world_;
  std::unique_ptr<GroupTable> groups_;
};

}  // namespace idist
