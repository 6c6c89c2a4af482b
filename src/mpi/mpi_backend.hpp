#pragma once
// MPIBackend: the "mpi" backend (Open MPI), ignite's _NativeDistModel with backend "mpi".
#include <mpi.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/backend.hpp"
#include "mpi/health.hpp"
#include "mpi/mpi_groups.hpp"
#include "mpi/mpi_topology.hpp"
#include "mpi/mpi_types.hpp"
#include "mpi/mpi_watchdog.hpp"
#include "mpi/progress.hpp"

namespace idist::mpi_backend {

class MpiWork;

/// Across nodes, all-gathers whose largest block has at least this many bytes go as a direct exchange
/// of the blocks (point-to-point messages) instead of MPI's all-gather, whose pairwise step
/// serialises the two directions of a link when the ranks arrive apart (docs/performance.md).
inline constexpr std::size_t kExchangeMinBlockBytes = std::size_t(256) << 10;
/// The tag of that exchange's messages on a group's communicator (mpi_monitored_barrier's start at
/// 1000; user messages go on another communicator).
inline constexpr int kExchangeTag = 1;
/// Across nodes, blocking all-reduces of at least this many bytes wait on MPI_Iallreduce instead of
/// calling MPI_Allreduce: between two hosts Open MPI's blocking call keeps the link busy only about two
/// thirds of the time its non-blocking one does (docs/performance.md).
inline constexpr std::size_t kPostedAllReduceMinBytes = std::size_t(512) << 10;

/// The largest element count idist passes to one MPI call: INT_MAX (the limit of MPI-3's int
/// counts), or less when the environment variable IDIST_MPI_MAX_COUNT says so. That variable is a
/// testing knob: it makes the chunked paths for huge buffers run on small ones.
/// @throws ValueError when IDIST_MPI_MAX_COUNT is set but not a positive integer.
std::size_t max_count_from_env();

/// The environment variable IDIST_MPI_BLOCKING: "1" = blocking collectives (the default), "0" = the
/// polled non-blocking calls; unset or empty = std::nullopt (no preference).
/// @throws ValueError for any other value.
std::optional<bool> blocking_from_env();

/// The environment variable IDIST_MPI_PROGRESS_THREAD: "1" = always run the progress thread, "0" =
/// never, "auto" (or unset / empty) = std::nullopt, the model's rule (see MPIBackend()).
/// @throws ValueError for any other value.
std::optional<bool> progress_thread_from_env();

/// How the mpi backend runs its collectives (InitOptions and the environment, resolved).
struct MpiSettings {
  /// Largest element count passed to one MPI call (see max_count_from_env()).
  std::size_t max_count = std::size_t(INT_MAX);
  /// Blocking forms call MPI's blocking collectives under the watchdog (default) instead of the
  /// polled non-blocking calls.
  bool blocking_collectives = true;
  /// Progress thread for non-blocking collectives: on, off, or std::nullopt = on exactly when the
  /// world spans several nodes and MPI provides MPI_THREAD_MULTIPLE.
  std::optional<bool> progress_thread;
  /// With the progress thread and fewer than 4 ranks, non-blocking all-reduces larger than this many
  /// bytes are posted as chunks of this size (0: never); see MPIBackend::all_reduce().
  std::size_t progress_chunk_bytes = std::size_t(4) << 20;
  /// Blocking all-reduces larger than this many bytes are issued as consecutive MPI_Allreduce calls
  /// of this size (0: whole); std::nullopt: 1 MiB on one node of at most 4 ranks when Open MPI's
  /// shared-memory transport copies twice (btl_vader_single_copy_mechanism none, as in containers),
  /// else whole. There Open MPI's blocking all-reduce of large buffers is faster in 1 MiB calls than
  /// whole; with a single-copy mechanism it is not (docs/performance.md, "Figures behind the defaults").
  std::optional<std::size_t> blocking_chunk_bytes;
  /// The progress thread's sleep between two rounds of MPI_Testall over the pending collectives.
  /// Each round costs the rank's cores CPU time that backward needs, so a longer sleep exposed less of
  /// the all-reduce across hosts (docs/performance.md, "Figures behind the defaults").
  std::chrono::microseconds progress_interval{500};
};

/// The environment variable IDIST_MPI_PROGRESS_CHUNK_BYTES (a testing and tuning knob): the chunk
/// size of MpiSettings::progress_chunk_bytes, 0 to post every all-reduce whole; unset: 4 MiB.
/// @throws ValueError when set but not a non-negative integer.
std::size_t progress_chunk_from_env();

/// The environment variable IDIST_MPI_BLOCKING_CHUNK_BYTES (a tuning knob): the chunk size of
/// MpiSettings::blocking_chunk_bytes in bytes, 0 for whole calls; unset or empty: std::nullopt.
/// @throws ValueError when set but not a non-negative integer.
std::optional<std::size_t> blocking_chunk_from_env();

/// The environment variable IDIST_MPI_PROGRESS_INTERVAL_US (a tuning knob): the progress thread's
/// MpiSettings::progress_interval in microseconds; unset: 500.
/// @throws ValueError when set but not a positive integer.
std::chrono::microseconds progress_interval_from_env();

/// The mpi computation model: non-blocking collectives are MPI's (MPI_Iallreduce, MPI_Iallgather(v),
/// MPI_Ibcast, MPI_Ibarrier), blocking ones MPI_Allreduce and its kin under a Watchdog (unless
/// MpiSettings::blocking_collectives is off), all on a duplicate of MPI_COMM_WORLD, so idist's traffic
/// never matches the program's own MPI messages. Every communicator idist makes returns errors
/// (MPI_ERRORS_RETURN), which become BackendError naming the MPI function, the rank and MPI's text.
/// Open MPI reports a non-blocking collective that fails while MPI_Test drives it through
/// MPI_COMM_WORLD's error handler; idist sets that one to MPI_ERRORS_RETURN only when it initialized
/// MPI itself, so in an adopted context such failures follow the program's own handler (by default,
/// abort the job).
///
/// With blocking collectives on (the default; InitOptions::mpi_blocking_collectives, IDIST_MPI_BLOCKING)
/// the blocking forms call MPI_Allreduce, MPI_Allgather, MPI_Bcast and MPI_Barrier directly under a
/// Watchdog, which aborts the job when one runs past the timeout. Off, they are the non-blocking
/// calls polled to the deadline (a catchable TimeoutError, at Open MPI libnbc's cost).
///
/// With a ProgressThread (across nodes by default) non-blocking collectives progress in the
/// background, so auto_model's bucket all-reduces overlap backward (has_async_progress()).
///
/// After a timeout or an MPI error the model is broken (CommHealth): every later collective raises
/// BackendError naming the first failure, and finalize() ends the job (this rank exits with code 1
/// after min(timeout / 2, 5 s) and the launcher ends the others) with that message instead of
/// calling MPI_Finalize on abandoned requests. MPI_Finalize itself is bounded by max(timeout, 10 s).
///
/// Buffers must be host memory. Element counts above the int range of the MPI-3 interface are split
/// into several MPI calls (all_reduce, broadcast) or gathered as one broadcast per rank
/// (all_gather_v) transparently.
class MPIBackend final : public core::Backend {
 public:
  /// Builds the model on an initialized MPI (collective over MPI_COMM_WORLD: duplicates it and
  /// measures the node layout).
  /// @param timeout bound of every wait (see ComputationModel::timeout()).
  /// @param owns_mpi true when idist called MPI_Init_thread, so finalize() must call MPI_Finalize.
  /// @param thread_level what MPI provided; below MPI_THREAD_MULTIPLE idist serialises its MPI calls.
  /// @param settings max_count (larger buffers are split), blocking collectives, progress thread.
  /// @throws BackendError when an MPI call fails.
  MPIBackend(std::chrono::milliseconds timeout, bool owns_mpi, int thread_level, const MpiSettings& settings);
  /// Makes no MPI call (finalize() does the collective teardown).
  ~MPIBackend() override = default;

  /// "native-dist" (ignite's _NativeDistModel.name, whatever the backend).
  std::string model_name() const override { return "native-dist"; }
  /// "mpi".
  std::optional<std::string> backend() const override { return std::string("mpi"); }
  /// "cuda:<local rank>" when a CUDA device is usable, else "cpu" (ignite's rule for mpi).
  Device device() const override;
  /// True with the progress thread; otherwise false: Open MPI progresses non-blocking collectives
  /// only inside MPI calls (MPI_Test).
  bool has_async_progress() const override { return progress_ != nullptr; }
  /// Overrides the measured local rank (ignite's set_local_rank hint).
  void set_local_rank(int local_rank) override;

  /// Waits (up to the timeout) for non-blocking collectives still in flight on the progress thread,
  /// frees idist's communicators and reductions, then calls MPI_Finalize only when idist initialized
  /// MPI (an adopted context is left for the program to finalize). Collective. When the backend is
  /// broken (see above), prints the first failure and ends the job (exit code 1, see above):
  /// MPI_Finalize would crash or hang on the requests MPI cannot cancel. A MPI_Finalize that has not
  /// returned after max(timeout, 10 s) (a launcher that stopped answering) ends this process with
  /// exit code 1 and a message.
  /// @throws BackendError when MPI_Finalize fails.
  void finalize() override;

  /// Whether the blocking forms call MPI's blocking collectives.
  bool blocking_collectives() const noexcept { return watchdog_ != nullptr; }
  /// Whether non-blocking collectives are progressed by the background thread.
  bool progress_thread() const noexcept { return progress_ != nullptr; }
  /// Bytes per MPI_Allreduce call of a blocking all-reduce (0: whole; MpiSettings::blocking_chunk_bytes).
  std::size_t blocking_chunk_bytes() const noexcept { return blocking_chunk_; }
  /// True after a timeout or an MPI error (see above).
  bool broken() const noexcept { return health_->broken(); }

  /// The thread level MPI provided (MPI_THREAD_SINGLE ... MPI_THREAD_MULTIPLE).
  int thread_level() const noexcept { return thread_level_; }
  /// True when idist initialized MPI (and will finalize it).
  bool owns_mpi() const noexcept { return owns_mpi_; }

  /// MPI_Comm_split of the world (collective over it).
  std::shared_ptr<ProcessGroup> create_group(std::vector<int> sorted_ranks) override;
  // The operations, their arguments checked by ComputationModel's front door. Completion::Blocking
  // calls MPI's blocking function under the watchdog when blocking collectives are on (and the buffer
  // fits MPI's int counts and a watchdog slot is free), else it waits on the non-blocking call.
  /// AllReduce: MPI_Iallreduce in place (MPI_Allreduce, chunked on one node, when blocking, except across
  /// nodes from kPostedAllReduceMinBytes); Reduce:
  /// MPI_Ireduce (MPI_Reduce); ReduceScatter: MPI_Ireduce_scatter_block (MPI_Reduce_scatter_block) on
  /// one node, and like ReduceScatterV across nodes: one MPI_Ireduce per block (MPI_Reduce_scatter).
  Work do_reduce(const Reduction& r, Completion how) override;
  /// AllGather: MPI_Iallgather (MPI_Allgather); AllGatherV: MPI_Iallgatherv with displacements from
  /// the counts; both by all_gather_by_exchange() across nodes for blocks of kExchangeMinBlockBytes or
  /// more, and for blocks beyond max_count; Gather: MPI_Igather (MPI_Gather).
  Work do_gather(const Gathering& g, Completion how) override;
  /// Broadcast: MPI_Ibcast from the root (MPI_Bcast); Scatter: MPI_Iscatter (MPI_Scatter); AllToAll:
  /// MPI_Ialltoall (MPI_Alltoall); AllToAllV: MPI_Ialltoallv (MPI_Alltoallv).
  Work do_distribute(const Distribution& d, Completion how) override;
  /// Send: MPI_Isend (MPI_Send); Recv: MPI_Irecv (MPI_Recv), on a communicator of their own so that
  /// user tags never meet idist's internal messages.
  Work do_point_to_point(const PointToPoint& p, Completion how) override;
  /// MPI_Ibarrier (MPI_Barrier).
  Work do_barrier(const ProcessGroup& group, Completion how) override;
  /// Point-to-point messages on the group's communicator (mpi_monitored_barrier).
  void do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout, bool wait_all_ranks) override;

 private:
  // The group's communicator, the backend's health checked first (BackendError naming the first
  // failure once broken).
  MPI_Comm healthy_comm(const ProcessGroup& group, OpType op) const;
  // Runs the blocking MPI call `call` (returning MPI's error code) under the watchdog as `op` on
  // `group`. False, without calling, when every watchdog slot is taken (the caller takes the polled
  // path). @throws BackendError naming `mpi_fn` when the call fails. (Defined in mpi_backend_calls.hpp.)
  template <class Call>
  bool run_watched(OpType op, const ProcessGroup& group, const char* mpi_fn, Call call);
  // Posts `post(pointer, count, &request)` (a non-blocking MPI call returning its error code) on
  // `data` at once when data.count <= limit, else once per chunk of `limit` elements, and wraps the
  // requests in one Work named `op`, completed as `how` says (make_work). For the operations that
  // work element by element. (Defined in mpi_backend_calls.hpp.)
  template <class Post>
  Work post_in_chunks(const Buffer& data, std::size_t limit, const char* mpi_fn, OpType op, Completion how, Post post);
  // Elements per MPI call for chunks of `chunk_bytes` of `dtype` (0: whole), at most max_count_.
  std::size_t elements_per_call(std::size_t chunk_bytes, DType dtype) const;
  // Wraps posted requests into a Work named `op`. Async: the Work, driven by the progress thread when
  // there is one. Blocking (the polled path): this thread polls them itself, sooner than the progress
  // thread's next round, and an empty Work is returned once they completed.
  Work make_work(MPI_Request request, const char* mpi_fn, OpType op, Completion how);
  // The same for several requests and the ints MPI reads until they complete.
  Work make_work(std::vector<MPI_Request> requests, std::vector<int> ints, const char* mpi_fn, OpType op,
                 Completion how);
  // `polled` as a Work (Async), or waited for (Blocking).
  Work finish(std::shared_ptr<MpiWork> polled, OpType op, Completion how);
  // Posts-time failure: marks the model broken and throws BackendError naming `fn`.
  void check(int rc, const char* fn) { health_->check_rc(rc, fn, rank()); }
  [[noreturn]] void abort_broken() const;
  // One operation of int counts: with blocking collectives on and Completion::Blocking, `blocking()`
  // (returning MPI's error code) under the watchdog; otherwise `post(&request)` wrapped in a Work
  // named `op` that keeps `ints` (counts MPI reads until completion) alive, waited for when Blocking.
  Work run_op(OpType op, const ProcessGroup& group, Completion how, const char* blocking_fn,
              const std::function<int()>& blocking, const char* post_fn, const std::function<int(MPI_Request*)>& post,
              std::vector<int> ints = {});
  // BackendError unless every count fits MPI's int counts.
  void check_int_counts(OpType op, std::initializer_list<std::size_t> counts) const;

  // The reductions (mpi_reduce.cpp).
  Work all_reduce(const Reduction& r, MPI_Comm comm, Completion how);
  Work reduce_to_root(const Reduction& r, MPI_Comm comm, Completion how);
  // reduce_scatter: MPI's block form on one node (the fastest over shared memory), else as below.
  Work reduce_scatter(const Reduction& r, MPI_Comm comm, Completion how);
  // Across nodes, reduce_scatter and reduce_scatter_v: counts[i] elements to rank i. Blocking, with blocking
  // collectives on: MPI_Reduce_scatter. Otherwise one MPI_Ireduce per rank with a block, rooted at
  // that rank, all in flight at once: libnbc's MPI_Ireduce_scatter and MPI_Ireduce_scatter_block
  // reduce everything to rank 0 and scatter from there, twice the traffic of the others on rank 0's
  // link, and Open MPI's blocking MPI_Reduce_scatter_block is as slow as they are across hosts.
  Work reduce_scatter_blocks(const Reduction& r, std::span<const std::size_t> counts, MPI_Comm comm, Completion how);
  // The gatherings (mpi_gather.cpp). all_gather: MPI_Allgather under the watchdog, else the posted call.
  Work all_gather(const Gathering& g, MPI_Comm comm, Completion how);
  // The non-blocking gathers (waited for when `how` is Blocking).
  Work post_all_gather(const Gathering& g, MPI_Comm comm, Completion how);
  Work all_gather_v(const Gathering& g, MPI_Comm comm, Completion how);
  // Gathers counts[i] elements from each rank by point-to-point messages on the group's communicator,
  // each block straight to every other rank (the bytes of a ring) in messages of at most max_count_
  // elements: the path across nodes for blocks of kExchangeMinBlockBytes and more, and beyond MPI's
  // int range.
  Work all_gather_by_exchange(const Gathering& g, std::span<const std::size_t> counts, MPI_Comm comm, Completion how);
  Work gather_to_root(const Gathering& g, MPI_Comm comm, Completion how);
  // The distributions (mpi_distribute.cpp).
  Work broadcast(const Distribution& d, MPI_Comm comm, Completion how);
  Work scatter_from_root(const Distribution& d, MPI_Comm comm, Completion how);
  Work all_to_all(const Distribution& d, MPI_Comm comm, Completion how);
  Work all_to_all_v(const Distribution& d, MPI_Comm comm, Completion how);

  bool owns_mpi_;
  int thread_level_;
  bool finalized_ = false;
  MPI_Comm world_comm_ = MPI_COMM_NULL;  // idist's duplicate of MPI_COMM_WORLD
  MPI_Comm p2p_comm_ = MPI_COMM_NULL;    // another duplicate: send / recv with the user's tags
  int tag_ub_ = 32767;                   // MPI_TAG_UB of p2p_comm_
  std::size_t max_count_;                // largest element count passed to one MPI call
  TypeMap types_;
  std::vector<std::shared_ptr<MpiGroup>> groups_;  // every group made, world included: freed at finalize()
  std::shared_ptr<CommHealth> health_ = std::make_shared<CommHealth>();
  std::unique_ptr<Watchdog> watchdog_;        // set when blocking collectives are on
  std::unique_ptr<ProgressThread> progress_;  // set when non-blocking collectives progress in the background
  std::size_t progress_chunk_ = 0;            // bytes per posted all-reduce chunk with progress_ (0: whole)
  std::size_t blocking_chunk_ = 0;            // bytes per blocking MPI_Allreduce call (0: whole)
};

}  // namespace idist::mpi_backend
