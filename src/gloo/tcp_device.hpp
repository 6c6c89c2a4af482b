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

/// Reads IDIST_GLOO_LOOP_NICE for a world on `nnodes` nodes: "1".."19" gives that nice value; "off" or
/// "0" gives nullopt (the loop thread keeps the creating thread's priority); unset or empty gives
/// kDefaultLoopNice on one node and nullopt across nodes, where the loop must keep up with the wire
/// while backward computes (at nice 19 the cross-host step took up to 1.17x as long).
/// @throws ValueError naming the accepted forms for anything else.
std::optional<int> loop_nice_from_env(int nnodes);

/// Creates gloo's TCP device that every context of this process uses, listening on `where.address`
/// (chosen by rendezvous::select_interface: GLOO_SOCKET_IFNAME, else the address routing to the master,
/// else the loopback for a one-node world).
/// The device's event-loop thread runs at the nice value `loop_nice` (never below the caller's own;
/// nullopt: the caller's), with the caller's CPU affinity.
/// @throws BackendError naming the interface and address when the device cannot be created.
std::shared_ptr<gloo::transport::Device> make_tcp_device(const rendezvous::InterfaceChoice& where,
                                                         std::optional<int> loop_nice);

}  // namespace idist::gloo_backend
