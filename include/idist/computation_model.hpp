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
/// waits on that Work. Buffers passed to collectives live on device() and must stay valid until the Work
/// completes. `group` has been checked to contain this rank before a collective is called (see
/// group_rank()); `src` is always a world rank. Every collective has a default that throws
/// `BackendError("backend X does not support Y")`, so a partial backend overrides what it has.
class ComputationModel {
 public:
  virtual ~ComputationModel() = default;
  ComputationModel(const ComputationModel&) = delete;
  ComputationModel& operator=(const ComputationModel&) = delete;

  /// "serial", "mpi-dist", "gloo-dist" or "nccl-dist" (ignite's model names).
  virtual std::string model_name() const = 0;
  /// std::nullopt for serial, else "mpi", "gloo" or "nccl".
  virtual std::optional<std::string> backend() const = 0;

  /// Rank of this process in the world, in [0, world_size()).
  virtual int rank() const = 0;
  /// Rank of this process among the processes of its node.
  virtual int local_rank() const = 0;
  /// Number of processes in the world.
  virtual int world_size() const = 0;
  /// Number of processes on each node.
  virtual int nproc_per_node() const = 0;
  /// Index of this process's node, in [0, nnodes()).
  virtual int node_rank() const = 0;
  /// Number of nodes.
  virtual int nnodes() const = 0;
  /// The device this rank computes on (see idist::device()).
  virtual Device device() const;
  /// Hint for the local rank when the context was created outside idist (ignite's set_local_rank).
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

  /// In-place reduction of `data` (count elements) with `op` over `group`.
  virtual Work all_reduce(Buffer data, ReduceOp op, const Group& group);
  /// Gathers `in` (same count on every rank) into `out` (count * group size elements), rank order.
  virtual Work all_gather(ConstBuffer in, Buffer out, const Group& group);
  /// Gathers `in` whose length differs by rank: `counts[i]` elements come from group rank i into
  /// `out` (sum(counts) elements), rank order. `counts` is known to every rank.
  virtual Work all_gather_v(ConstBuffer in, Buffer out, std::span<const std::size_t> counts, const Group& group);
  /// Copies `data` of world rank `src` to every rank of `group` (same count everywhere).
  virtual Work broadcast(Buffer data, int src, const Group& group);
  /// Completes once every rank of `group` has entered it.
  virtual Work barrier(const Group& group);

  /// Blocking forms of the collectives above, used by idist's blocking free functions. The
  /// default issues the non-blocking call and waits up to timeout() (then TimeoutError). A backend
  /// overrides them when its own blocking call is faster: the mpi backend does so by default
  /// (InitOptions::mpi_blocking_collectives), keeping the timeout with a watchdog that aborts.
  /// Same arguments, checks and errors as the non-blocking forms.
  virtual void all_reduce_blocking(Buffer data, ReduceOp op, const Group& group);
  /// Blocking all_gather (see all_reduce_blocking()).
  virtual void all_gather_blocking(ConstBuffer in, Buffer out, const Group& group);
  /// Blocking broadcast (see all_reduce_blocking()).
  virtual void broadcast_blocking(Buffer data, int src, const Group& group);
  /// Blocking barrier (see all_reduce_blocking()).
  virtual void barrier_blocking(const Group& group);
  /// torch.distributed.monitored_barrier over `group` (see idist::monitored_barrier()). The default
  /// returns at once for a one-rank group and otherwise throws BackendError (unsupported).
  virtual void monitored_barrier(const Group& group, std::chrono::milliseconds timeout, bool wait_all_ranks);

 protected:
  /// @param timeout bound on rendezvous and on every collective (InitOptions::timeout).
  explicit ComputationModel(std::chrono::milliseconds timeout) : timeout_(timeout) {}
  /// Checks `group` against the world size and returns its ranks ascending (all ranks for the world).
  /// @throws ValueError for an empty list, a duplicate or a rank outside [0, world_size()).
  std::vector<int> normalize_group(const Group& group) const;
  /// Throws BackendError("the <backend> backend does not support <what>").
  [[noreturn]] void unsupported(std::string_view what) const;

 private:
  std::chrono::milliseconds timeout_;
};

}  // namespace idist
