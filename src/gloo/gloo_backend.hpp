#pragma once
// GlooBackend: the "gloo" backend, Gloo's collective algorithms over its TCP transport.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "gloo/op_lane.hpp"
#include "gloo/pair_socket.hpp"
#include "gloo/peer_watch.hpp"
#include "gloo/posted_exchange.hpp"
#include "gloo/reduce_scatter_cache.hpp"
#include "gloo/retained_options.hpp"
#include "gloo/sigpipe_guard.hpp"
#include "launch/settings.hpp"
#include "rendezvous/discovery.hpp"
#include "rendezvous/env.hpp"
#include "rendezvous/network_interface.hpp"
#include "rendezvous/peer_table.hpp"
#include "store/store.hpp"

namespace gloo {
class Context;
namespace transport {
class Device;
}
}  // namespace gloo

namespace idist::gloo_backend {

/// One process group: for a member, a connected gloo context over the group's ranks (the context's
/// rank i is ranks()[i]) and the lane that runs its operations in issue order. Non-members hold none.
/// What the operations change (the failure, the lane's queue) is synchronised, so the group is used
/// through const references like every ProcessGroup.
class GlooGroup final : public ProcessGroup {
 public:
  using ProcessGroup::ProcessGroup;

  std::shared_ptr<gloo::Context> context;  ///< null for a non-member, and after teardown
  std::unique_ptr<OpLane> lane;            ///< null for a non-member, and after teardown
  /// reduce_scatter's algorithms, reused (used by the group's running operation only).
  mutable ReduceScatterCache reduce_scatters;
  /// Set by the first failed operation: a gloo context is not reusable after an I/O error or a
  /// timeout (peers may be mid-operation), so later operations fail fast with this message.
  mutable std::mutex failure_mutex;
  mutable std::string failure;
  mutable std::atomic<bool> broken{false};
  /// Set (under failure_mutex) by the peer watch when it shut down the connections to lost hosts:
  /// the failure message names them instead of guessing from Gloo's error.
  mutable std::string unreachable;
  /// The socket of the connection to each position's rank on another host (none for this rank).
  std::vector<std::optional<PairSocket>> sockets;
  /// What the peer watch sees of this group's communicator (its other hosts, the running operation).
  mutable PeerWatch::Subject watched;
  /// Whether a member's address differs from this rank's: its traffic crosses the network.
  bool spans_hosts = false;
  /// Posted operations issued so far: part of each one's slot (gloo_posted.cpp).
  mutable std::atomic<std::uint32_t> posted_operations{0};
  /// monitored_barrier calls so far: names each one's store keys.
  mutable std::atomic<std::uint64_t> monitored_barriers{0};
};

/// ignite's _NativeDistModel with backend "gloo" (model name "native-dist"): a world of processes
/// that discovered their ranks from the environment (or InitOptions) and met through a store.
///
/// - Transport: gloo::transport::tcp on the address rendezvous::select_interface() picks
///   (GLOO_SOCKET_IFNAME, else the local address that routes to MASTER_ADDR, else the loopback for a
///   one-node world); the ranks then exchange their hosts and addresses (the peer table) and refuse at
///   once a world where a rank advertises a loopback address to other hosts.
/// - Failures name the lost peer by rank and host: from the address in Gloo's I/O error, or after a
///   timeout by a one-second TCP probe of the other hosts. A peer host that stops answering on the
///   network while an operation waits (a partition, a crashed host) ends the operation within about
///   two seconds (PeerWatch, IDIST_GLOO_PEER_WATCH), instead of at the timeout.
/// - Collectives: all_reduce posted at issue on a group that spans hosts, else gloo::allreduce's ring
///   (IDIST_GLOO_ALLREDUCE chooses: auto, ring, bcube, posted), gloo::broadcast, gloo::barrier and the
///   others below, each bounded by InitOptions::timeout.
/// - Groups: a group's first use connects its own gloo context, rendezvoused under the store prefix
///   "idist/gloo/group/<ranks>"; ranks outside the group take no part.
/// - While the backend is initialized SIGPIPE is ignored (when it was at its default), so that a
///   write to a dead peer is an error instead of killing the process; finalize() restores it.
/// - Never touches MPI, even when launched by mpirun (ranks come from Open MPI's variables).
class GlooBackend final : public core::Backend {
 public:
  /// Discovers ranks, opens the store, connects the world context and completes the topology.
  /// @throws ValueError for bad options / environment; TimeoutError when the rendezvous does not
  ///         complete within opts.timeout; BackendError when the transport fails.
  explicit GlooBackend(const InitOptions& opts);
  /// Tears down without the closing barrier when finalize() was not called (initialize failed, or
  /// the process is unwinding).
  ~GlooBackend() override;

  std::string model_name() const override { return "native-dist"; }
  std::optional<std::string> backend() const override { return "gloo"; }
  Device device() const override;
  void set_local_rank(int local_rank) override;
  std::optional<std::string> network_interface() const override { return interface_.describe(); }

  /// Barrier (bounded by the timeout; a failure is reported on stderr, not thrown), then stops the
  /// lanes, closes every context, closes the store (rank 0's server last: it waits for the other
  /// ranks to disconnect) and restores the environment variables and SIGPIPE.
  void finalize() override;

  /// The board over the rendezvous store (keys "idist/debug/seq/...").
  std::shared_ptr<core::debug::ProgressBoard> progress_board() override;

  /// Connects the group's own gloo context under the store prefix "idist/gloo/group/<ranks>" (members
  /// only; non-members take no part).
  std::shared_ptr<ProcessGroup> create_group(std::vector<int> sorted_ranks) override;
  // The operations, their arguments checked by ComputationModel's front door. Completion::Blocking
  // runs the gloo algorithm on the calling thread when the group's lane is idle
  // (OpLane::run_if_idle), else queues it behind the lane's operations and waits.
  /// AllReduce: on a group that spans hosts, posted at issue (see gloo_posted.cpp), else gloo::allreduce's
  /// ring (IDIST_GLOO_ALLREDUCE: auto, ring, bcube or posted on every group); Reduce:
  /// gloo::reduce; ReduceScatter and ReduceScatterV: gloo::ReduceScatterHalvingDoubling with equal
  /// blocks on groups whose size is a power of two, else each block sent straight to its owner,
  /// posted at issue (see gloo_posted.cpp).
  Work do_reduce(const Reduction& r, Completion how) override;
  /// AllGather and AllGatherV: each block sent straight to every other member, posted at issue (see
  /// gloo_posted.cpp); Gather: gloo::gather.
  Work do_gather(const Gathering& g, Completion how) override;
  /// Broadcast: gloo::broadcast; Scatter: gloo::scatter; AllToAll: gloo::alltoall; AllToAllV:
  /// gloo::alltoallv.
  Work do_distribute(const Distribution& d, Completion how) override;
  /// Send / Recv: an unbound buffer of the world context sent to / received from the peer's pair, in a
  /// slot of the tag. Posted at once on the caller's thread (so that crossing sends and receives never
  /// wait for each other); blocking, the caller waits; non-blocking, the wait runs on the
  /// point-to-point lane (or on the thread that waits for the Work).
  Work do_point_to_point(const PointToPoint& p, Completion how) override;
  /// gloo::barrier.
  Work do_barrier(const ProcessGroup& group, Completion how) override;
  /// Through the store (store_monitored_barrier), keys "idist/monitored_barrier/<group>/<n>".
  void do_monitored_barrier(const ProcessGroup& group, std::chrono::milliseconds timeout, bool wait_all_ranks) override;

 private:
  /// Connects `group`'s context and lane (this rank a member) under store prefix `prefix`.
  void connect(GlooGroup& group, const std::string& prefix);
  /// Queues `run(gloo::Context&)` on `group`'s lane (Async: returns its Work), or runs it to completion
  /// (Blocking: returns a completed Work).
  template <class Run>
  Work issue(const ProcessGroup& group, OpType op, Completion how, Run run);
  /// Runs `run` on `group`'s context; gloo failures become TimeoutError / BackendError.
  /// `peers` names the lost peers in the message of the group's first failure.
  template <class Run>
  static void run_guarded(const GlooGroup& group, OpType op, int rank, const rendezvous::PeerTable& peers,
                          const Run& run);
  /// Lets the peer watch (when on) probe `group`'s other hosts while one of its operations waits.
  void watch(GlooGroup& group);
  // The reductions (gloo_reduce.cpp); `blocks`: the length of each group rank's block.
  Work all_reduce(const Reduction& r, Completion how);
  Work reduce_to_root(const Reduction& r, Completion how);
  Work reduce_scatter(const Reduction& r, std::vector<int> blocks, Completion how);
  // Posted operations (gloo_posted.cpp; send / recv and the posted collectives): `post` posts the
  // receives and sends of one operation on the caller's thread; the wait for them, then `done` (may
  // be empty), run inline (Blocking) or on the point-to-point lane (Async).
  using PostFn = std::function<void(gloo::Context&, PostedExchange&)>;
  using DoneFn = std::function<void(PostedExchange&)>;
  Work posted(const GlooGroup& group, OpType op, Completion how, const PostFn& post, DoneFn done);
  Work posted_reduce_scatter(const Reduction& r, const std::vector<int>& blocks, Completion how);
  /// In place: 2 members exchange their whole buffers; more reduce-scatter, then all-gather the blocks.
  Work posted_all_reduce(const Reduction& r, Completion how);
  /// `lengths`: the elements of each group rank's block.
  Work posted_all_gather(const Gathering& g, std::vector<std::size_t> lengths, Completion how);
  // The rooted gathering (gloo_gather.cpp).
  Work gather_to_root(const Gathering& g, Completion how);
  // The distributions (gloo_distribute.cpp).
  Work broadcast(const Distribution& d, Completion how);
  Work scatter_from_root(const Distribution& d, Completion how);
  Work all_to_all(const Distribution& d, Completion how);
  Work all_to_all_v(const Distribution& d, Completion how);
  // Send (`sending`) or Recv (gloo_point_to_point.cpp).
  Work transfer(const PointToPoint& p, bool sending, Completion how);
  /// Releases everything in teardown order. `barrier_first`: finalize()'s closing barrier.
  void teardown(bool barrier_first) noexcept;

  rendezvous::EnvOverride env_;
  SigpipeGuard sigpipe_;
  std::shared_ptr<store::Store> store_;
  rendezvous::InterfaceChoice interface_;  // where this rank's gloo pairs listen
  rendezvous::PeerTable peers_;            // every rank's host and address, for failure messages
  // Options of failed operations (retained_options.hpp); declared before device_, so destroyed after it.
  std::unique_ptr<RetainedOptions> retained_ = std::make_unique<RetainedOptions>();
  std::shared_ptr<gloo::transport::Device> device_;
  // Watches the groups below (destroyed first in teardown: it calls into them).
  std::unique_ptr<PeerWatch> watch_;
  std::vector<std::shared_ptr<GlooGroup>> groups_;  // every group made, the world first
  std::unique_ptr<OpLane> p2p_lane_;                // waits of non-blocking sends and receives
  launch::GlooAllReduce all_reduce_algorithm_ = launch::GlooAllReduce::Auto;
  bool torn_down_ = false;
};

}  // namespace idist::gloo_backend
