#pragma once
// Creation of Gloo's TCP transport device.
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/network_interface.hpp"

namespace gloo::transport {
class Device;
}

namespace idist::gloo_backend {

/// Nice value of Gloo's transport (event-loop) thread when every rank runs on one node and
/// IDIST_GLOO_LOOP_NICE is unset: the lowest CFS weight, so that the loop's polling yields the core to
/// the thread it serves.
inline constexpr int kDefaultLoopNice = 19;
/// How Gloo's transport (event-loop) thread is scheduled.
struct LoopScheduling {
  std::optional<int> nice;  ///< its nice value, never below the creator's; nullopt: the creator's
  /// SCHED_BATCH: woken by the network, the loop does not preempt the thread running on its core; it
  /// runs when that thread blocks or at the next scheduler tick.
  bool batch = false;

  bool operator==(const LoopScheduling&) const = default;
};

/// Reads IDIST_GLOO_LOOP_NICE and IDIST_GLOO_LOOP_BATCH for a world on `nnodes` nodes whose rank may
/// run on `cpus` CPUs.
/// - IDIST_GLOO_LOOP_NICE: "1".."19" gives that nice value; "off" or "0" leaves the creator's priority;
///   unset or empty gives kDefaultLoopNice on one node and the creator's priority across nodes.
/// - IDIST_GLOO_LOOP_BATCH: "1" or "0"; unset or empty gives SCHED_BATCH when the rank may run on one
///   CPU only (pinned: the loop shares the training thread's core), SCHED_OTHER otherwise.
/// @throws ValueError naming the variable and the accepted forms for anything else.
LoopScheduling loop_scheduling_from_env(int nnodes, int cpus);

/// The CPUs the calling thread may run on (its affinity mask), at least 1.
int allowed_cpus();

/// Creates gloo's TCP device that every context of this process uses, listening on `where.address`
/// (chosen by rendezvous::select_interface: GLOO_SOCKET_IFNAME, else the address routing to the master,
/// else the loopback for a one-node world).
/// The device's event-loop thread is scheduled as `loop` says, with the caller's CPU affinity; the
/// caller's own priority and policy are untouched.
/// @throws BackendError naming the interface and address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where,
                                                         const LoopScheduling& loop);

}  // namespace idist::gloo_backend
