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
/// Its nice value across nodes when the rank may run on one CPU only (pinned, as idist::spawn and
/// mpirun's default binding pin), so that the loop shares the training thread's core: low enough that
/// its polling leaves that core to the training thread between messages, high enough that it keeps up
/// with the wire while backward computes (docs/performance.md weighs 5, 10 and 19).
inline constexpr int kPinnedCrossNodeLoopNice = 10;

/// Reads IDIST_GLOO_LOOP_NICE for a world on `nnodes` nodes whose rank may run on `cpus` CPUs: "1".."19"
/// gives that nice value; "off" or "0" gives nullopt (the loop thread keeps the creating thread's
/// priority); unset or empty gives kDefaultLoopNice on one node, kPinnedCrossNodeLoopNice across nodes
/// on one CPU, and nullopt across nodes otherwise (the loop then has another core to poll on).
/// @throws ValueError naming the accepted forms for anything else.
std::optional<int> loop_nice_from_env(int nnodes, int cpus);

/// The CPUs the calling thread may run on (its affinity mask), at least 1.
int allowed_cpus();

/// Creates gloo's TCP device that every context of this process uses, listening on `where.address`
/// (chosen by rendezvous::select_interface: GLOO_SOCKET_IFNAME, else the address routing to the master,
/// else the loopback for a one-node world).
/// The device's event-loop thread runs at the nice value `loop_nice` (never below the caller's own;
/// nullopt: the caller's), with the caller's CPU affinity.
/// @throws BackendError naming the interface and address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where,
                                                         std::optional<int> loop_nice);

}  // namespace idist::gloo_backend
